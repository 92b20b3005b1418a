'use strict';
// A payment service on node:http and node-postgres (pg 8), following examples/README.md.
const http = require('node:http');
const { setTimeout: sleep } = require('node:timers/promises');
const pg = require('pg');

const env = (name, fallback) => process.env[name] || fallback;
const PORT = Number(env('PORT', 8080));
const LEASE_SECONDS = Number(env('LEASE_SECONDS', 10));
const PROVIDER_DELAY_MS = Number(env('PROVIDER_DELAY_MS', 100));
const COMPLETE_DELAY_MS = Number(env('COMPLETE_DELAY_MS', 0));
const WEBHOOK_SECRET = env('WEBHOOK_SECRET', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
const IDEMPOTENCY = env('IDEMPOTENCY', 'on') !== 'off';

// PGHOST, PGPORT, PGUSER, PGDATABASE and PGPASSWORD come from the environment. No query has a
// `name`, so node-postgres uses the unnamed statement: fine for PgBouncer's transaction mode.
const pool = new pg.Pool({ max: Number(env('POOL_SIZE', 8)) });
pool.on('error', (err) => console.error('idle connection:', err.message));

// Bad key (22023, 22001) or body that is not I-JSON (22P02, 22021, 22003, 54001): 400.
const BAD_REQUEST = new Set(['22023', '22001', '22P02', '22021', '22003', '54001']);
const WEBHOOK_STATUS = { new: 200, duplicate: 200, mismatch: 409 }; // the rest (invalid_*, stale_*): 400

const CLAIM = `SELECT k.key, c.*,
       greatest(1, ceil(extract(epoch FROM c.lease_expires_at - clock_timestamp())))::int AS retry_after
FROM idem_key_from_header($2) AS k(key),
     idem_claim($1, k.key, idem_fingerprint($3::text), lease => $4 * interval '1 second') AS c`;

const json = (status, value, headers = {}) =>
  ({ status, headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(value) });

// body is the raw request Buffer: node-postgres sends a Buffer as is (binary format), so
// `$3::text` gets its exact bytes, and bad UTF-8 is the server's 22021.
const claim = async (db, scope, header, body, leaseSeconds) =>
  (await db.query(CLAIM, [scope, header, body, leaseSeconds])).rows[0];

function answerClaim(c) {
  if (c.outcome === 'replayed') return replay(c);
  if (c.outcome === 'mismatch') return json(422, { error: 'Idempotency-Key reused with another request' });
  return json(409, { error: 'a request with this Idempotency-Key is in progress' },
    { 'Retry-After': String(c.retry_after) });
}

const replay = (stored) => ({ status: stored.response_status, body: stored.response_body ?? '',
  headers: { ...stored.response_headers, 'Idempotent-Replayed': 'true' } });

async function insertPayment(db, order, providerRef = null) {
  const { rows: [p] } = await db.query(
    `INSERT INTO payments (customer, amount, currency, provider_ref) VALUES ($1, $2, $3, $4)
     RETURNING id, status, created_at`, [order.customer, order.amount, order.currency, providerRef]);
  return { id: p.id, ...order, provider_ref: providerRef, status: p.status, created_at: p.created_at };
}
const created = (payment) => json(201, payment, { Location: `/v1/payments/${payment.id}` });

// The payment and its stored response commit together; the exact bytes sent are the ones stored.
async function insertAndComplete(db, scope, c, order, providerRef) {
  const payment = await insertPayment(db, order, providerRef);
  const res = created(payment);
  await db.query(`SELECT idem_complete($1, $2, $3, resource_id => $4, response_status => $5,
                    response_body => $6::bytea, response_headers => $7::jsonb)`,
    [scope, c.key, c.attempt, payment.id, res.status, Buffer.from(res.body), JSON.stringify(res.headers)]);
  return res;
}

async function transaction(work) {
  const db = await pool.connect();
  let broken;
  try {
    await db.query('BEGIN');
    const result = await work(db);
    await db.query('COMMIT');
    return result;
  } catch (err) {
    await db.query('ROLLBACK').catch((e) => { broken = e; });
    throw err;
  } finally {
    db.release(broken);
  }
}

// Single-transaction mode: BEGIN; idem_claim; INSERT; idem_complete; COMMIT. A concurrent
// duplicate waits in idem_claim for this transaction, then replays.
const singleTransaction = (header, body, order) => transaction(async (db) => {
  const c = await claim(db, 'payments', header, body, null);
  return c.outcome === 'claimed' ? insertAndComplete(db, 'payments', c, order, null) : answerClaim(c);
});

// The fake payment provider: slow, and idempotent on the key it is given (as Stripe is).
async function providerCharge(key, order) {
  await sleep(PROVIDER_DELAY_MS);
  const { rows } = await pool.query(`INSERT INTO provider_charges (idempotency_key, amount, currency)
    VALUES ($1, $2, $3) ON CONFLICT (idempotency_key) DO NOTHING RETURNING id`, [key, order.amount, order.currency]);
  return rows[0] ?? providerLookup(key);
}
const providerLookup = async (key) =>
  (await pool.query('SELECT id FROM provider_charges WHERE idempotency_key = $1', [key])).rows[0];

// Two-phase mode: the claim commits alone with a lease, the provider is called outside any
// transaction, the payment and idem_complete commit together.
async function twoPhase(header, body, order) {
  const scope = 'payments-two-phase';
  const c = await claim(pool, scope, header, body, LEASE_SECONDS);
  if (c.outcome !== 'claimed' && c.outcome !== 'reclaimed') return answerClaim(c);
  // reclaimed: the previous attempt may have charged; ask the provider before charging again.
  const charge = (c.outcome === 'reclaimed' && await providerLookup(c.key)) || await providerCharge(c.key, order);
  await sleep(COMPLETE_DELAY_MS);
  try {
    return await transaction((db) => insertAndComplete(db, scope, c, order, charge.id));
  } catch (err) {
    if (err.code === 'IK002') return json(409, { error: 'taken over by a retry' }, { 'Retry-After': '1' });
    if (err.code !== 'IK003') throw err;
    return replay((await pool.query('SELECT * FROM idem_lookup($1, $2)', [scope, c.key])).rows[0]);
  }
}

function parseOrder(body) {
  let o;
  try { o = JSON.parse(body); } catch { return null; }
  const ok = o && typeof o.customer === 'string' && Number.isSafeInteger(o.amount) && o.amount > 0 &&
    typeof o.currency === 'string';
  return ok ? { customer: o.customer, amount: o.amount, currency: o.currency } : null;
}

async function createPayment(req, body, mode) {
  const order = parseOrder(body);
  if (!order) return json(400, { error: 'expected {"customer": string, "amount": integer > 0, "currency": string}' });
  if (!IDEMPOTENCY) return transaction(async (db) => created(await insertPayment(db, order))); // bench/ baseline
  if (mode !== null && mode !== 'two-phase') return json(400, { error: 'mode must be two-phase or absent' });
  const header = req.headers['idempotency-key'];
  if (header === undefined) return json(400, { error: 'Idempotency-Key header required' });
  try {
    return await (mode === 'two-phase' ? twoPhase : singleTransaction)(header, body, order);
  } catch (err) {
    if (BAD_REQUEST.has(err.code)) return json(400, { error: err.message });
    if (err.code === '25006') return json(503, { error: 'database is read-only' });
    throw err;
  }
}

// A Standard Webhooks delivery: verified, deduplicated and applied in one transaction.
async function receiveWebhook(req, body) {
  let event;
  try { event = JSON.parse(body); } catch { /* 400 below */ }
  if (typeof event?.type !== 'string') return json(400, { error: 'expected {"type": string, "data": {...}}' });
  const id = req.headers['webhook-id'];
  return transaction(async (db) => {
    const { rows: [{ outcome }] } = await db.query(
      `SELECT idem_webhook_receive('payments-webhooks', 'standard', ARRAY[$1], $2, $3::bytea, $4, $5) AS outcome`,
      [WEBHOOK_SECRET, id, body, req.headers['webhook-signature'], req.headers['webhook-timestamp']]);
    if (outcome === 'new') {
      await db.query('INSERT INTO webhook_events (event_id, type, payment_id) VALUES ($1, $2, $3)',
        [id, event.type, event.data?.payment_id ?? null]);
    }
    return json(WEBHOOK_STATUS[outcome] ?? 400, { outcome });
  });
}

async function route(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const body = Buffer.concat(chunks);
  const url = new URL(req.url, 'http://localhost');
  const at = `${req.method} ${url.pathname}`;
  if (at === 'GET /healthz') return { status: 200, headers: { 'Content-Type': 'text/plain' }, body: 'ok' };
  if (at === 'POST /v1/payments') return createPayment(req, body, url.searchParams.get('mode'));
  if (at === 'POST /v1/webhooks/provider') return receiveWebhook(req, body);
  return json(404, { error: 'not found' });
}

const server = http.createServer((req, res) => {
  route(req).catch((err) => {
    console.error(err);
    return json(500, { error: 'internal error' });
  }).then(({ status, headers, body }) =>
    res.writeHead(status, { ...headers, 'Content-Length': Buffer.byteLength(body) }).end(body));
});
server.listen(PORT, '127.0.0.1', () => console.log(`listening on 127.0.0.1:${PORT}`));
