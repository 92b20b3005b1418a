'use strict';
// What the package itself does, beyond the conformance cases (conformance.test.js): the options
// checked when it is built, the start check, route templates, the raw body, the handler's
// transaction and its writes, the heartbeat, a takeover (IK002) and a finished takeover (IK003),
// no head-of-line blocking, off mode, prepared statements, and both module systems.
const { describe, test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { setTimeout: sleep } = require('node:timers/promises');
const pg = require('pg');
const idempotency = require('..');
const apps = require('./apps');
const db = require('./db');

let pool; let admin; let table;
before(async () => {
  pool = await db.pool({ max: 6 });
  admin = await db.pool({ max: 2 });
  // The handler's writes: a table of the tests' own (the role needs CREATE in a schema of its
  // search_path).
  table = `clients_node_writes_${process.pid}`;
  await admin.query(`CREATE TABLE ${table} (id serial PRIMARY KEY, k text, v text)`);
});
after(async () => {
  await admin.query(`DROP TABLE IF EXISTS ${table}`);
  await pool.end();
  await admin.end();
});

const tag = () => crypto.randomBytes(6).toString('hex');
const rows = async (k) => (await admin.query(`SELECT v FROM ${table} WHERE k = $1 ORDER BY id`, [k])).rows.map((r) => r.v);
const lookup = async (principal, operation, key) => (await admin.query(
  `SELECT l.status, l.attempt, l.response_status, l.resource_id, l.response_headers
   FROM idempotency.idem_lookup(idempotency.idem_http_scope($1, $2), idempotency.idem_key_from_header($3)) l`,
  [principal, operation, key])).rows[0] ?? null;
const post = (url, key, body = '{"amount":1}', headers = {}) => apps.send(url, {
  headers: { 'Content-Type': 'application/json', 'X-User': 'alice', ...(key === null ? {} : { 'Idempotency-Key': key }), ...headers },
  body });
const base = (more) => ({ pool, principal: (req) => req.headers['x-user'], ...more });
// A latch: wait() until open(); opened tells whether it was.
const latch = () => {
  let resolve;
  const p = new Promise((r) => { resolve = r; });
  const l = { opened: false, wait: () => p, open: () => { l.opened = true; resolve(); } };
  return l;
};

describe('options, checked when the middleware is built', () => {
  const p = { query() {}, connect() {} };
  const bad = [
    [{ pool: p }, /principal option is required/],
    [{ pool: p, principal: 'alice' }, /principal must be a function/],
    [{ pool: p, sharedKeySpace: 'yes' }, /sharedKeySpace must be true or false/],
    [{ principal: () => 'a' }, /pool option must be a pg.Pool/],
    [{ pool: {}, principal: () => 'a' }, /pool option must be a pg.Pool/],
    [{ pool: p, principal: () => 'a', mode: 'twophase' }, /unknown mode "twophase"/],
    [{ pool: p, principal: () => 'a', mode: 'Single' }, /unknown mode/],
    [{ pool: p, principal: () => 'a', lease: 30 }, /unknown option lease \(did you mean leaseMs\?\)/],
    [{ pool: p, principal: () => 'a', ttl: 86400 }, /unknown option ttl \(did you mean ttlMs\?\)/],
    [{ pool: p, principal: () => 'a', scope: 'payments' }, /unknown option scope/],
    [{ pool: p, principal: () => 'a', leaseMs: 0 }, /leaseMs must be a positive integer number of milliseconds/],
    [{ pool: p, principal: () => 'a', leaseMs: 1.5 }, /leaseMs must be a positive integer/],
    [{ pool: p, principal: () => 'a', leaseMs: '30s' }, /leaseMs must be a positive integer/],
    [{ pool: p, principal: () => 'a', ttlMs: Number.NaN }, /ttlMs must be a positive integer/],
    [{ pool: p, principal: () => 'a', ttlMs: -1 }, /ttlMs must be a positive integer/],
    [{ pool: p, principal: () => 'a', mode: 'two-phase', ttlMs: 1000 }, /ttlMs \(1000\) is shorter than leaseMs \(30000\)/],
    [{ pool: p, principal: () => 'a', leaseMs: 5000, ttlMs: 4999 }, /shorter than leaseMs/],
    [{ pool: p, principal: () => 'a', headers: 'Location' }, /headers must be an array/],
    [{ pool: p, principal: () => 'a', operation: 'POST /x' }, /operation must be a function/],
    [{ pool: p, principal: () => 'a', prepare: 1 }, /prepare must be true or false/],
  ];
  for (const [options, message] of bad) {
    test(`refused: ${JSON.stringify(options, (k, v) => (typeof v === 'function' ? 'fn' : v))}`, () => {
      assert.throws(() => idempotency(options), (err) => err instanceof TypeError && message.test(err.message));
    });
  }
  test('accepted: a principal, or an explicit shared key space; defaults', () => {
    const a = idempotency({ pool: p, principal: () => 'a' });
    assert.deepEqual({ mode: a.options.mode, headers: a.options.headers, shared: a.options.sharedKeySpace, lease: a.options.leaseMs },
      { mode: 'single', headers: ['Content-Type', 'Location'], shared: false, lease: undefined });
    assert.equal(idempotency({ pool: p, sharedKeySpace: true, mode: 'two-phase' }).options.leaseMs, 30000);
    assert.throws(() => a.express(), /wraps the route handler/);
  });
});

describe('the start check', () => {
  test('ready() resolves on a database with the extension and the grants', async () => {
    await idempotency(base({ mode: 'two-phase' })).ready();
  });
  test('a pool that cannot connect fails ready() and a Fastify app\'s start', async () => {
    const dead = new pg.Pool({ host: '127.0.0.1', port: 1, connectionTimeoutMillis: 2000 });
    const idem = idempotency({ pool: dead, principal: () => 'a' });
    await assert.rejects(idem.ready(), /idempotency: the start check failed: .*ECONNREFUSED|connect/);
    const app = require('fastify')();
    app.register(idem.fastifyPlugin);
    await assert.rejects(app.ready(), /the start check failed/);
    await dead.end();
  });
  test('a database without the extension fails ready()', async () => {
    const other = new pg.Pool({ database: 'template1', max: 1 });
    const { rows: [r] } = await other.query("SELECT count(*)::int AS n FROM pg_extension WHERE extname = 'idempotency'");
    if (r.n === 0) await assert.rejects(idempotency({ pool: other, principal: () => 'a' }).ready(), /extension idempotency 2.0.0 or later/);
    await other.end();
  });
  test('a role without EXECUTE on the functions fails ready(), naming them', async (t) => {
    const { rows: [me] } = await admin.query('SELECT rolsuper OR rolcreaterole AS may FROM pg_roles WHERE rolname = current_user');
    if (!me.may) return t.skip('the role may not create roles');
    const role = `clients_node_nogrants_${process.pid}`;
    await admin.query(`CREATE ROLE ${role} LOGIN`);
    try {
      const weak = new pg.Pool({ database: await db.database(), user: role, max: 1 });
      await assert.rejects(idempotency({ pool: weak, principal: () => 'a' }).ready(),
        /may not execute idempotency\.idem_http_begin\(text,text,text,bytea,interval,interval,boolean\), idempotency\.idem_http_end/);
      await weak.end();
    } finally {
      await admin.query(`DROP ROLE ${role}`);
    }
  });
});

for (const framework of ['express', 'fastify']) {
  describe(`${framework}: the route, the body, the handler's transaction`, () => {
    const services = [];
    const start = async (routes, opts) => {
      const s = await apps[framework](routes, opts);
      services.push(s);
      return s;
    };
    after(() => Promise.all(services.map((s) => s.close())));

    // A handler that writes a row keyed by its test's header, then answers what x-answer says.
    const writer = async (ctx) => {
      const k = ctx.headers['x-k'];
      const { rows: [r] } = await ctx.idem.query(`INSERT INTO ${table} (k, v) VALUES ($1, $2) RETURNING id`, [k, `attempt ${ctx.idem.attempt}`]);
      const answer = ctx.headers['x-answer'] ?? '201';
      if (answer === 'throw') throw new Error('after the INSERT');
      if (answer === 'next') throw Object.assign(new Error('a database error'), { code: '40P01', severity: 'ERROR' });
      ctx.answer(Number(answer), { 'Content-Type': 'application/json', Location: `/v1/payments/p${r.id}`, 'X-Trace': 't' },
        JSON.stringify({ id: r.id, attempt: ctx.idem.attempt }));
    };

    test('the operation is the method and the route\'s template, the mount path included', async () => {
      const idem = idempotency(base());
      const s = await start([{ path: '/v1/items/:id', idem, handler: writer }], { prefix: '/api' });
      const key = `k-${tag()}`;
      const a = await post(`${s.base}/api/v1/items/1`, key, '{"n":1}', { 'X-K': key });
      const b = await post(`${s.base}/api/v1/items/2`, key, '{"n":1}', { 'X-K': key });
      assert.equal(a.status, 201);
      assert.deepEqual([b.status, b.headers.get('idempotent-replayed'), b.body.toString()], [201, 'true', a.body.toString()]);
      const rec = await lookup('alice', 'POST /api/v1/items/:id', key);
      assert.equal(rec?.status, 'completed');
      assert.deepEqual(rec.response_headers, { 'Content-Type': 'application/json', Location: a.headers.get('location') });
      assert.equal(rec.resource_id, a.headers.get('location').split('/').pop());
      assert.deepEqual(await rows(key), ['attempt 1']);
    });

    test('another principal with the same key runs its own handler; none at all is 403', async () => {
      const s = await start([{ path: '/v1/pay', idem: idempotency(base()), handler: writer }]);
      const key = `k-${tag()}`;
      const a = await post(`${s.base}/v1/pay`, key, '{}', { 'X-K': key });
      const b = await post(`${s.base}/v1/pay`, key, '{}', { 'X-K': key, 'X-User': 'bob' });
      const c = await apps.send(`${s.base}/v1/pay`, { headers: { 'Idempotency-Key': key, 'X-K': key }, body: '{}' });
      assert.deepEqual([a.status, b.status, b.headers.get('idempotent-replayed'), c.status], [201, 201, null, 403]);
      assert.equal(JSON.parse(c.body).status, 403);
      assert.deepEqual(await rows(key), ['attempt 1', 'attempt 1']);
    });

    test('the handler\'s writes commit with the stored answer; a 500, a throw or a database error roll them back', async () => {
      const s = await start([{ path: '/w', idem: idempotency(base()), handler: writer }]);
      const key = () => `k-${tag()}`;
      const k1 = key(); const k2 = key(); const k3 = key(); const k4 = key();
      const ok = await post(`${s.base}/w`, k1, '{}', { 'X-K': k1 });
      const e500 = await post(`${s.base}/w`, k2, '{}', { 'X-K': k2, 'X-Answer': '500' });
      const thrown = await post(`${s.base}/w`, k3, '{}', { 'X-K': k3, 'X-Answer': 'throw' });
      const dbErr = await post(`${s.base}/w`, k4, '{}', { 'X-K': k4, 'X-Answer': 'next' });
      assert.equal(ok.status, 201);
      assert.deepEqual([e500.status, JSON.parse(e500.body).attempt], [500, 1]); // the handler's own 500
      assert.deepEqual([thrown.status, thrown.headers.get('content-type'), JSON.parse(thrown.body).status], [500, 'application/problem+json', 500]);
      assert.deepEqual([dbErr.status, dbErr.headers.get('retry-after')], [503, '1']);
      assert.deepEqual([await rows(k1), await rows(k2), await rows(k3), await rows(k4)], [['attempt 1'], [], [], []]);
      for (const k of [k2, k3, k4]) assert.equal(await lookup('alice', 'POST /w', k), null);
      const again = await post(`${s.base}/w`, k3, '{}', { 'X-K': k3 });
      assert.equal(again.status, 201); // released: the retry runs
    });

    test('two-phase: the handler outside a transaction, heartbeats keep the lease, the writes commit with the answer', { timeout: 60000 }, async () => {
      const gate = latch();
      const entered = latch();
      const idem = idempotency(base({ mode: 'two-phase', leaseMs: 300 }));
      const s = await start([{ path: '/slow', idem, handler: async (ctx) => {
          if (!entered.opened) { entered.open(); await gate.wait(); } // the first request only
          return writer(ctx);
        } }]);
      const k = `k-${tag()}`;
      const first = post(`${s.base}/slow`, k, '{}', { 'X-K': k });
      await entered.wait();
      await sleep(900); // three leases: the heartbeats renew it
      const dup = await post(`${s.base}/slow`, k, '{}', { 'X-K': k });
      assert.deepEqual([dup.status, dup.headers.has('retry-after')], [409, true]);
      assert.equal((await lookup('alice', 'POST /slow', k)).status, 'processing');
      gate.open();
      const a = await first;
      assert.deepEqual([a.status, JSON.parse(a.body).attempt], [201, 1]);
      assert.deepEqual(await rows(k), ['attempt 1']);
      assert.deepEqual((({ status, attempt }) => ({ status, attempt }))(await lookup('alice', 'POST /slow', k)), { status: 'completed', attempt: 1 });
    });

    test('two-phase: an attempt taken over answers the map\'s 409 (IK002), or the new attempt\'s stored answer (IK003)', { timeout: 60000 }, async () => {
      for (const finished of [false, true]) {
        const gate = latch();
        const entered = latch();
        const idem = idempotency(base({ mode: 'two-phase', leaseMs: 60000 }));
        const path = `/taken${finished ? 'done' : ''}`;
        const s = await start([{ path, idem, handler: async (ctx) => {
          if (!entered.opened) { entered.open(); await gate.wait(); } // the first request only
          return writer(ctx);
        } }]);
        const k = `k-${tag()}`;
        const first = post(`${s.base}${path}`, k, '{}', { 'X-K': k });
        await entered.wait();
        const scope = `alice/POST ${path}`;
        await admin.query('SELECT idempotency.idem_fail($1, $2, 1, retryable => true)', [scope, k]);
        const { rows: [b] } = await admin.query(
          "SELECT * FROM idempotency.idem_http_begin('alice', $1, $2, '{}'::bytea, lease => '60 s')", [`POST ${path}`, k]);
        assert.deepEqual([b.run, b.attempt], [true, 2]);
        if (finished) {
          await admin.query(`SELECT idempotency.idem_http_end($1, $2, 2, 201, '{"Content-Type": "text/plain"}', 'by attempt 2')`, [scope, k]);
        }
        gate.open();
        const a = await first;
        if (finished) {
          assert.deepEqual([a.status, a.headers.get('idempotent-replayed'), a.body.toString()], [201, 'true', 'by attempt 2']);
        } else {
          assert.deepEqual([a.status, a.headers.get('retry-after'), JSON.parse(a.body).status], [409, '1', 409]);
        }
        assert.deepEqual(await rows(k), []); // attempt 1's write rolled back
      }
    });

    test('no head-of-line blocking: a pool of 2, one request held, 12 duplicates answered 409 at once, an unrelated request completes', { timeout: 60000 }, async () => {
      for (const mode of ['single', 'two-phase']) {
        const small = await db.pool({ max: 2 });
        const gate = latch();
        const entered = latch();
        const idem = idempotency({ pool: small, principal: (req) => req.headers['x-user'], mode });
        await idem.ready();
        const s = await start([{ path: `/hol-${mode}`, idem, handler: async (ctx) => {
          if (ctx.headers['x-hold']) { entered.open(); await gate.wait(); }
          return writer(ctx);
        } }]);
        const url = `${s.base}/hol-${mode}`;
        const k = `k-${tag()}`;
        const held = post(url, k, '{}', { 'X-K': k, 'X-Hold': '1' });
        await entered.wait();
        const dups = await Promise.all(Array.from({ length: 12 }, () => post(url, k, '{}', { 'X-K': k, 'X-Hold': '1' })));
        assert.deepEqual(dups.map((d) => d.status), Array(12).fill(409), mode);
        assert.ok(dups.every((d) => Number(d.headers.get('retry-after')) >= 1), mode);
        const other = `k-${tag()}`;
        const unrelated = await post(url, other, '{}', { 'X-K': other }); // would hang if the duplicates held connections
        assert.equal(unrelated.status, 201, mode);
        gate.open();
        assert.equal((await held).status, 201, mode);
        assert.deepEqual(await rows(k), ['attempt 1'], mode);
        await small.end();
      }
    });

    test('mode off: the handler in a plain transaction, nothing claimed', async () => {
      const s = await start([{ path: '/off', idem: idempotency(base({ mode: 'off' })), handler: writer }]);
      const k = `k-${tag()}`;
      const a = await post(`${s.base}/off`, k, '{}', { 'X-K': k });
      const b = await post(`${s.base}/off`, null, '{}', { 'X-K': k });
      assert.deepEqual([a.status, b.status], [201, 201]);
      assert.deepEqual(await rows(k), ['attempt null', 'attempt null']);
      assert.equal(await lookup('alice', 'POST /off', k), null);
    });

    test('prepare: named statements on a pipelined pool', async () => {
      const piped = await db.pool({ max: 2, pipeline: true });
      const idem = idempotency({ pool: piped, principal: () => 'carol', prepare: true });
      await idem.ready();
      const s = await start([{ path: '/prep', idem, handler: writer }]);
      const k = `k-${tag()}`;
      const a = await post(`${s.base}/prep`, k, '{"x":1}', { 'X-K': k });
      const b = await post(`${s.base}/prep`, k, '{"x": 1.0}', { 'X-K': k });
      assert.deepEqual([a.status, b.status, b.headers.get('idempotent-replayed')], [201, 201, 'true']);
      const { rows: names } = await piped.query('SELECT name FROM pg_prepared_statements ORDER BY name');
      assert.ok(names.some((r) => r.name === 'idem_http_begin'), JSON.stringify(names));
      await piped.end();
    });
  });
}

describe('the raw body', () => {
  test('express: no body parser (the package reads it), express.json with verify, express.json without: refused', async () => {
    const express = require('express');
    const handler = (ctx) => ctx.answer(201, { 'Content-Type': 'text/plain' }, `got ${typeof ctx.body}`);
    const idem = idempotency(base());
    const s = await apps.express([
      { path: '/none', before: [], idem, handler },
      { path: '/verify', before: [express.json({ verify: (req, res, buf) => { req.rawBody = buf; } })], idem, handler },
      { path: '/parsed', before: [express.json()], idem, handler }]);
    try {
      const k = `k-${tag()}`;
      const a = await post(`${s.base}/none`, k, '{"a":1}');
      const a2 = await post(`${s.base}/none`, k, '{ "a": 1 }');
      const b = await post(`${s.base}/verify`, k, '{"a":1}');
      const b2 = await post(`${s.base}/verify`, k, '{"a":2}');
      const c = await post(`${s.base}/parsed`, k, '{"a":1}');
      assert.deepEqual([a.status, a2.status, a2.headers.get('idempotent-replayed'), b.status, b2.status, c.status], [201, 201, 'true', 201, 422, 500]);
      assert.equal(await lookup('alice', 'POST /parsed', k), null);
    } finally {
      await s.close();
    }
  });
  test('req.idem: query works destructured, the handle is frozen', async () => {
    const idem = idempotency(base());
    let frozen;
    const s = await apps.fastify([{ path: '/d', idem, handler: async (ctx) => {
      const { query } = ctx.idem;
      const { rows: [r] } = await query('SELECT 41 + 1 AS n');
      frozen = Object.isFrozen(ctx.idem);
      ctx.answer(201, { 'Content-Type': 'text/plain' }, `${r.n}`);
    } }]);
    try {
      const a = await post(`${s.base}/d`, `k-${tag()}`);
      assert.deepEqual([a.status, a.body.toString(), frozen], [201, '42', true]);
    } finally {
      await s.close();
    }
  });
  test('fastify: a body sent slowly in chunks is fingerprinted whole', async () => {
    const idem = idempotency(base());
    const s = await apps.fastify([{ path: '/c', idem, handler: (ctx) => ctx.answer(201, { 'Content-Type': 'text/plain' }, `${ctx.body.length}`) }]);
    try {
      const k = `k-${tag()}`;
      const run = (ch) => ch.repeat(100000);
      const parts = [`{"x":"${run('a')}`, run('b'), `${run('c')}"}`].map((p) => Buffer.from(p)); // 300 kB of JSON
      // Chunked, 30 ms between the parts: the parser reads them as they come.
      const slow = await new Promise((resolve, reject) => {
        const req = require('node:http').request(`${s.base}/c`, { method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-User': 'alice', 'Idempotency-Key': k } }, (res) => {
          const got = [];
          res.on('data', (c) => got.push(c)).on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(got).toString() }));
        });
        req.on('error', reject);
        (async () => { for (const p of parts) { req.write(p); await sleep(30); } req.end(); })();
      });
      const again = await post(`${s.base}/c`, k, Buffer.concat(parts)); // the same bytes at once: a replay
      const other = await post(`${s.base}/c`, k, `{"x":"${run('a')}${run('c')}${run('b')}"}`); // another order: 422
      assert.deepEqual([slow.status, slow.body, again.status, again.headers.get('idempotent-replayed'), other.status],
        [201, '300008', 201, 'true', 422]);
    } finally {
      await s.close();
    }
  });
  test('fastify: the JSON parser kept, the fingerprint of the exact bytes', async () => {
    const idem = idempotency(base());
    const s = await apps.fastify([{ path: '/j', idem, handler: (ctx) => ctx.answer(201, { 'Content-Type': 'text/plain' }, `amount ${ctx.body.amount}`) }], { json: true });
    try {
      const k = `k-${tag()}`;
      const a = await post(`${s.base}/j`, k, '{"amount":5}');
      const b = await post(`${s.base}/j`, k, '{ "amount" : 5.0 }');
      const c = await post(`${s.base}/j`, k, '{"amount":6}');
      assert.deepEqual([a.status, a.body.toString(), b.status, b.headers.get('idempotent-replayed'), b.body.toString(), c.status],
        [201, 'amount 5', 201, 'true', 'amount 5', 422]);
    } finally {
      await s.close();
    }
  });
});

describe('module systems', () => {
  test('require and import give the same factory (the exports map)', async () => {
    const cjs = require('idempotency-pg');
    const esm = await import('idempotency-pg');
    assert.equal(cjs, idempotency);
    assert.equal(esm.default, idempotency);
    assert.equal(esm.idempotency, idempotency);
    assert.equal(cjs.idempotency, idempotency);
  });
  test('the TypeScript declarations check (tsc --noEmit -p test/types), when typescript is installed', (t) => {
    let tsc;
    try {
      tsc = require.resolve('typescript/bin/tsc');
    } catch {
      return t.skip('typescript is not installed (clients/node/setup installs it)');
    }
    const r = require('node:child_process').spawnSync(process.execPath, [tsc, '--noEmit', '-p', require('node:path').join(__dirname, 'types')], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    return undefined;
  });
});
