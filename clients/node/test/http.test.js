'use strict';
// The package over HTTP on Express and on Fastify against the extension (the libpq environment:
// PGHOST, PGPORT, PGUSER; a database clients_node_test of its own): every outcome's answer,
// what is stored, the rows the handler wrote, and the round trips per request.
const { describe, test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const pg = require('pg');
const apps = require('./apps');

const DB = 'clients_node_test';
let admin; let db; let piped;

before(async () => {
  admin = new pg.Client({ database: 'postgres' });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${DB}`);
  db = new pg.Pool({ database: DB, max: 12 });
  db.on('error', () => {}); // an idle client's lost connection: the next query gets a new one
  await db.query('CREATE EXTENSION idempotency; CREATE TABLE t (id serial PRIMARY KEY, v text)');
  piped = new pg.Pool({ database: DB, max: 12, pipeline: true });
  piped.on('error', () => {});
});
after(async () => {
  await db.end();
  await piped.end();
  // A client the pool removed after an error may still be closing its connection: wait for the
  // database to have none, so that no client of this process sees its backend terminated (an
  // 'error' event after its test ended, which node:test counts as a failure).
  for (let i = 0; i < 100; i += 1) {
    const { rows: [r] } = await admin.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [DB]);
    if (r.n === 0) break;
    await sleep(50);
  }
  await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`);
  await admin.end();
});

// The pool the package gets, counting its statements (one client.query is one round trip, but
// on a pipelined client) and the names of its prepared ones.
function counted(pool) {
  const c = { n: 0, names: new Set() };
  const query = (target) => (...a) => {
    c.n += 1;
    if (a[0]?.name) c.names.add(a[0].name);
    return target.query(...a);
  };
  return Object.assign(c, { query: query(pool), connect: async () => {
    const client = await pool.connect();
    return { query: query(client), release: (err) => client.release(err), pipeline: client.pipeline };
  } });
}

let seq = 0;
const newKey = () => `k-${process.pid}-${++seq}`;
const body = (v) => Buffer.from(JSON.stringify({ v, note: 'naïve ✓' }));
async function post(url, key, b, headers = {}) {
  const h = { 'Content-Type': 'application/json', ...headers };
  if (key !== null) h['Idempotency-Key'] = key;
  const r = await fetch(url, { method: 'POST', headers: h, body: b });
  return { status: r.status, headers: Object.fromEntries(r.headers), body: Buffer.from(await r.arrayBuffer()) };
}
const record = async (scope, key) => (await db.query(
  'SELECT status, retryable, attempt, resource_id, response_status, response_body, response_headers FROM idempotency.records WHERE scope = $1 AND key = $2',
  [scope, key])).rows[0];
const rows = async () => Number((await db.query('SELECT count(*) FROM t')).rows[0].count);

// The package's statements: simple protocol (3 round trips a new key), or named prepared
// statements (prepare: true; `BEGIN` and `COMMIT` apart: 5), on a pipelined pool too.
const setups = [['', {}, 0], [' prepared', { prepare: true }, 2], [' prepared, pipelined', { prepare: true }, 2]];
for (const framework of ['express', 'fastify']) for (const [label, setup, more] of setups) {
  describe(framework + label, () => {
    const services = [];
    const start = async (options) => {
      const pool = counted(label.includes('pipelined') ? piped : db);
      const s = await apps[framework](pool, { scope: framework, ...setup, ...options });
      services.push(s);
      return Object.assign(s, { pool });
    };
    after(() => Promise.all(services.map((s) => s.close())));

    test('single: claimed 201 stored byte-exact in 3 round trips; replay in 2, same bytes', async () => {
      const s = await start({});
      const key = newKey(); const before = await rows();
      const first = await post(s.url, `"${key}"`, body(1));
      assert.equal(first.status, 201);
      assert.equal(s.pool.n, 3 + more, 'BEGIN + claim, INSERT, idem_complete + COMMIT');
      const rec = await record(framework, key);
      const id = JSON.parse(first.body).id;
      assert.deepEqual({ ...rec, response_body: rec.response_body.toString() }, {
        status: 'completed', retryable: false, attempt: 1, resource_id: String(id), response_status: 201,
        response_body: first.body.toString(),
        response_headers: { 'Content-Type': 'application/json; charset=utf-8', Location: `/pay/${id}` } });
      assert.equal(first.headers['idempotent-replayed'], undefined);
      const again = await post(s.url, key, Buffer.from(` ${body(1)}`)); // the same JSON, other bytes
      assert.equal(s.pool.n, 5 + 2 * more, 'BEGIN + claim, answer + COMMIT');
      assert.deepEqual([...s.pool.names].sort(), more ? ['idem_answer', 'idem_claim_body', 'idem_complete'] : []);
      assert.deepEqual([again.status, again.body.equals(first.body), again.headers.location, again.headers['idempotent-replayed']],
        [201, true, `/pay/${id}`, 'true']);
      assert.equal(await rows(), before + 1);
    });

    test('mismatch 422, bad key / body 400: nothing stored, no handler', async () => {
      const s = await start({});
      const key = newKey(); const before = await rows();
      assert.equal((await post(s.url, key, body(1))).status, 201);
      const other = await post(s.url, key, body(2));
      assert.deepEqual([other.status, other.headers['content-type'], JSON.parse(other.body).status], [422, 'application/problem+json', 422]);
      const bad = newKey();
      const cases = [[null, body(1)], ['"unterminated', body(1)], ['k'.repeat(300), body(1)],
        [bad, Buffer.from('{not json')], [bad, Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d])]];
      const statuses = [];
      for (const [k, b] of cases) statuses.push((await post(s.url, k, b)).status);
      assert.deepEqual(statuses, [400, 400, 400, 400, 400]);
      assert.equal(await record(framework, bad), undefined);
      assert.equal(await rows(), before + 1);
    });

    test('single: a handler that throws -> 500, its INSERT and the claim rolled back', async () => {
      const s = await start({});
      const key = newKey(); const before = await rows();
      const r = await post(s.url, key, body(1), { 'x-answer': 'throw' });
      assert.equal(r.status, 500);
      assert.equal(await record(framework, key), undefined);
      assert.equal(await rows(), before);
      assert.equal((await post(s.url, key, body(1))).status, 201, 'the retry claims anew');
    });

    test('two-phase: a handler that throws -> 500, failed and retryable; the retry is attempt 2', async () => {
      const s = await start({ mode: 'two-phase', scope: `${framework}-2p` });
      const key = newKey(); const before = await rows();
      assert.equal((await post(s.url, key, body(1), { 'x-answer': 'throw' })).status, 500);
      assert.deepEqual(await record(`${framework}-2p`, key), { status: 'failed', retryable: true, attempt: 1,
        resource_id: null, response_status: null, response_body: null, response_headers: null });
      assert.equal((await post(s.url, key, body(1), { 'x-answer': 'throw' })).status, 500);
      assert.equal((await record(`${framework}-2p`, key)).attempt, 2);
      const ok = await post(s.url, key, body(1));
      assert.deepEqual([ok.status, JSON.parse(ok.body).attempt], [201, 3]);
      assert.deepEqual([...s.pool.names].sort(), more ? ['idem_claim_body', 'idem_complete', 'idem_retry'] : []);
      assert.equal(await rows(), before + 1);
    });

    test('4xx stored as a non-retryable failure and replayed; 409 and 5xx not stored', async () => {
      const s = await start({});
      const key = newKey(); const before = await rows();
      const first = await post(s.url, key, body(1), { 'x-answer': '404' });
      const again = await post(s.url, key, body(1), { 'x-answer': '201' });
      assert.deepEqual([first.status, again.status, again.headers['idempotent-replayed'], again.body.equals(first.body)],
        [404, 404, 'true', true]);
      assert.deepEqual(Object.values(await record(framework, key)).slice(0, 3), ['failed', false, 1]);
      for (const status of ['409', '503']) {
        const k = newKey();
        assert.equal((await post(s.url, k, body(1), { 'x-answer': status })).status, Number(status));
        assert.equal(await record(framework, k), undefined, status);
      }
      assert.equal(await rows(), before + 1);
    });

    test('two-phase: in progress -> 409 Retry-After; heartbeats keep the lease; 4 round trips', async () => {
      const s = await start({ mode: 'two-phase', scope: `${framework}-hb`, lease: 1, heartbeat: 0.25 });
      const key = newKey();
      const slow = post(s.url, key, body(1), { 'x-sleep': '2500' });
      await sleep(1600); // past the first lease: only the heartbeats keep it
      const [during, done] = await Promise.all([post(s.url, key, body(1)), slow]);
      assert.deepEqual([during.status, during.headers['retry-after'], during.headers['content-type']],
        [409, '1', 'application/problem+json']);
      assert.deepEqual([done.status, JSON.parse(done.body).attempt, JSON.parse(done.body).reclaimed], [201, 1, false]);
      assert.ok(s.pool.n >= 4 + 1 + 6, `claim, BEGIN, INSERT, complete + COMMIT, the 409's claim, >= 6 heartbeats: ${s.pool.n}`);
      assert.deepEqual([...s.pool.names].sort(), more ? ['idem_answer', 'idem_claim_body', 'idem_complete', 'idem_heartbeat'] : []);
    });

    test('two-phase: fenced (IK002) -> 409 Retry-After: 1, the attempt\'s INSERT rolled back', async () => {
      const s = await start({ mode: 'two-phase', scope: `${framework}-fence`, lease: 1, heartbeat: 60 });
      const key = newKey(); const before = await rows();
      const first = post(s.url, key, body(1), { 'x-sleep': '2000' });
      await sleep(1300); // the lease ended: the retry takes over as attempt 2 and is still running
      const [a, b] = await Promise.all([first, post(s.url, key, body(1), { 'x-sleep': '1500' })]);
      assert.deepEqual([a.status, a.headers['retry-after'], a.headers['content-type']], [409, '1', 'application/problem+json']);
      assert.deepEqual([b.status, JSON.parse(b.body).attempt, JSON.parse(b.body).reclaimed], [201, 2, true]);
      assert.equal(await rows(), before + 1);
    });

    test('two-phase: already finished by a retry (IK003) -> the stored answer', async () => {
      const s = await start({ mode: 'two-phase', scope: `${framework}-done`, lease: 1, heartbeat: 60 });
      const key = newKey(); const before = await rows();
      const first = post(s.url, key, body(1), { 'x-sleep': '2500' });
      await sleep(1300);
      const [a, second] = await Promise.all([first, post(s.url, key, body(1))]);
      assert.deepEqual([second.status, a.status, a.headers['idempotent-replayed'], a.body.equals(second.body)],
        [201, 201, 'true', true]);
      assert.equal(await rows(), before + 1);
    });

    test('headers option: ETag stored and replayed; mode off: no record, 3 round trips', async () => {
      const s = await start({ headers: ['Content-Type', 'Location', 'ETag'] });
      const key = newKey();
      const first = await post(s.url, key, body(1), { 'x-etag': '"v1"' });
      const again = await post(s.url, key, body(1), { 'x-etag': '"v2"' });
      assert.deepEqual([first.headers.etag, again.headers.etag], ['"v1"', '"v1"']);
      const off = await start({ mode: 'off' });
      const before = await rows();
      assert.equal((await post(off.url, null, body(1))).status, 201);
      assert.deepEqual([off.pool.n, await rows()], [3, before + 1]);
    });

    test('a read-only database (25006) -> 503 Retry-After: 1', async () => {
      const ro = new pg.Pool({ database: DB, max: 2, options: '-c default_transaction_read_only=on' });
      const s = await apps[framework](ro, { scope: framework, ...setup });
      try {
        const r = await post(s.url, newKey(), body(1));
        assert.deepEqual([r.status, r.headers['retry-after']], [503, '1']);
      } finally {
        await s.close();
        await ro.end();
      }
    });
  });
}
