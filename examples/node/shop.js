'use strict';
// What the Express and the Fastify payment services share (examples/README.md): the settings,
// the pool, the request check, the payment's INSERT, the fake provider and the webhook receiver.
// The Idempotency-Key handling is the package's (clients/node), except IDEMPOTENCY=manual's.
const { createHash } = require('node:crypto');
const { setTimeout: sleep } = require('node:timers/promises');
const pg = require('pg');
const idempotency = require('../../clients/node');

const env = (name, fallback) => process.env[name] || fallback;
const PORT = Number(env('PORT', 8080));
const PROVIDER_DELAY_MS = Number(env('PROVIDER_DELAY_MS', 100));
const COMPLETE_DELAY_MS = Number(env('COMPLETE_DELAY_MS', 0));
const WEBHOOK_SECRET = env('WEBHOOK_SECRET', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');

// PREPARE=on: named prepared statements (the package's and the INSERT's), on a pipelined pool
// (the package's `BEGIN` and idem_http_begin in one round trip); direct connections or
// PgBouncer >= 1.21 with max_prepared_statements only (examples/README.md).
const PREPARE = env('PREPARE', 'off') === 'on';
// PGHOST, PGPORT, PGUSER, PGDATABASE and PGPASSWORD come from the environment.
const pool = new pg.Pool({ max: Number(env('POOL_SIZE', 8)), pipeline: PREPARE });
pool.on('error', (err) => console.error('idle connection:', err.message));

// The Idempotency-Key handling: one middleware per mode (POST /v1/payments, and
// ?mode=two-phase around the slow provider). The principal is who the key belongs to: this demo
// has no authentication, so it is the order's customer; a real service returns its
// authenticated user. IDEMPOTENCY=off runs the same handler in a plain transaction
// (bench/http.sh's baseline), IDEMPOTENCY=manual the single-transaction mode by hand (below).
const off = env('IDEMPOTENCY', 'on') === 'off';
const twoPhase = (req) => req.query.mode === 'two-phase';
const manualMode = env('IDEMPOTENCY', 'on') === 'manual';
const byHand = (req) => manualMode && !twoPhase(req);
const options = { pool, principal: (req) => req.order.customer, prepare: PREPARE };
const idem = {
  single: idempotency({ ...options, mode: off ? 'off' : 'single' }),
  twoPhase: idempotency({ ...options, mode: off ? 'off' : 'two-phase', leaseMs: 1000 * Number(env('LEASE_SECONDS', 10)) }),
};
const idemFor = (req) => (twoPhase(req) ? idem.twoPhase : idem.single);
// The start check of both (the database, the extension, the grants): before listening.
const ready = () => Promise.all([idem.single.ready(), idem.twoPhase.ready()]);

// The order of a raw JSON body, or the reason it is refused (400, before any claim).
function order(req) {
  if (req.query.mode !== undefined && !twoPhase(req)) return { error: 'mode must be two-phase or absent' };
  let o;
  try { o = JSON.parse(req.body); } catch { /* refused below */ }
  const ok = o && typeof o.customer === 'string' && Number.isSafeInteger(o.amount) && o.amount > 0 &&
    typeof o.currency === 'string';
  return ok ? { order: { customer: o.customer, amount: o.amount, currency: o.currency } }
    : { error: 'expected {"customer": string, "amount": integer > 0, "currency": string}' };
}

// The handler's write; amount as float8 so that it comes back a JSON number (int8 is a string).
const INSERT_PAYMENT = `INSERT INTO payments (customer, amount, currency, provider_ref)
  VALUES ($1, $2, $3, $4) RETURNING id, customer, amount::float8 AS amount, currency, provider_ref, status, created_at`;
const insertPayment = (idem, o, providerRef) =>
  idem.query({ name: PREPARE ? 'insert_payment' : undefined, text: INSERT_PAYMENT,
    values: [o.customer, o.amount, o.currency, providerRef] }).then((r) => r.rows[0]);

// The fake payment provider: slow, and idempotent on the key it is given (as Stripe is). A
// reclaimed key asks it first whether the earlier attempt charged. Returns the charge's id.
async function charge(idem, o) {
  const lookup = async () =>
    (await pool.query('SELECT id FROM provider_charges WHERE idempotency_key = $1', [idem.key])).rows[0]?.id;
  let id = idem.reclaimed ? await lookup() : undefined;
  if (id === undefined) {
    await sleep(PROVIDER_DELAY_MS);
    const { rows } = await pool.query(`INSERT INTO provider_charges (idempotency_key, amount, currency)
      VALUES ($1, $2, $3) ON CONFLICT (idempotency_key) DO NOTHING RETURNING id`, [idem.key, o.amount, o.currency]);
    id = rows[0]?.id ?? await lookup();
  }
  await sleep(COMPLETE_DELAY_MS);
  return id;
}

// A handler that throws after its INSERT (the contract's customer "c_throw").
function throwFor(payment) {
  if (payment.customer === 'c_throw') throw new Error('c_throw: the handler fails after its INSERT');
}

// A Standard Webhooks delivery, verified, deduplicated and applied in one transaction:
// {status, body} (not Idempotency-Key based: idem_webhook_receive).
const WEBHOOK_STATUS = { new: 200, duplicate: 200, stale: 200, mismatch: 409 }; // others: 400
async function receiveWebhook(headers, body) {
  let event;
  try { event = JSON.parse(body); } catch { /* 400 below */ }
  if (typeof event?.type !== 'string') return { status: 400, body: { error: 'expected {"type": string, "data": {...}}' } };
  const db = await pool.connect();
  let committed = false;
  try {
    await db.query('BEGIN');
    const { rows: [{ outcome }] } = await db.query(
      `SELECT idempotency.idem_webhook_receive('payments-webhooks', 'standard', ARRAY[$1], $2, $3::bytea, $4, $5) AS outcome`,
      [WEBHOOK_SECRET, headers['webhook-id'], body, headers['webhook-signature'], headers['webhook-timestamp']]);
    if (outcome === 'new') {
      await db.query('INSERT INTO webhook_events (event_id, type, payment_id) VALUES ($1, $2, $3)',
        [headers['webhook-id'], event.type, event.data?.payment_id ?? null]);
    }
    await db.query('COMMIT');
    committed = true;
    return { status: WEBHOOK_STATUS[outcome] ?? 400, body: { outcome } };
  } finally {
    if (!committed) await db.query('ROLLBACK').catch(() => {});
    db.release();
  }
}

// IDEMPOTENCY=manual (bench/http.sh's yardstick): POST /v1/payments in single-transaction mode
// with the exactly-once record written by hand instead of the package, as a careful user would
// without the extension (the table manual_keys, examples/schema.sql): the same pool and
// statements with parameters; one payment per key, a retry gets the stored answer byte for byte,
// another body under the key is refused. Returns the answer: { status, headers, body }.
const MANUAL = {
  claim: 'INSERT INTO manual_keys (scope, key, fingerprint) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING true',
  stored: 'SELECT fingerprint, status, headers, body FROM manual_keys WHERE scope = $1 AND key = $2',
  store: 'UPDATE manual_keys SET status = $3, headers = $4, body = $5 WHERE scope = $1 AND key = $2',
};
const manual = (name, values) => ({ name: PREPARE ? `manual_${name}` : undefined, text: MANUAL[name], values });
const JSON_TYPE = { 'Content-Type': 'application/json; charset=utf-8' };
const answer = (status, headers, body) => ({ status, headers: { ...JSON_TYPE, ...headers }, body: Buffer.from(body) });

async function payByHand(req) {
  // The key: an RFC 8941 string ("k-1"), or a bare token (k-1).
  const h = req.headers['idempotency-key']?.trim();
  const key = /^"(?:[^"\\]|\\.)*"$/.test(h) ? h.slice(1, -1).replace(/\\(.)/g, '$1') : h;
  if (!key) return answer(400, {}, '{"error":"an Idempotency-Key header is required"}');
  const scope = `${req.order.customer}/POST /v1/payments`; // the principal and the operation
  const fingerprint = createHash('sha256').update(req.body).digest();
  const db = await pool.connect();
  try {
    await db.query('BEGIN');
    let a;
    if ((await db.query(manual('claim', [scope, key, fingerprint]))).rowCount === 1) { // a new key
      const payment = await insertPayment(db, req.order, null);
      throwFor(payment);
      a = answer(201, { Location: `/v1/payments/${payment.id}` }, JSON.stringify(payment));
      await db.query(manual('store', [scope, key, a.status, JSON.stringify(a.headers), a.body]));
    } else { // a retry (or a duplicate: the claim waited for the first one's COMMIT)
      const { rows: [s] } = await db.query(manual('stored', [scope, key]));
      a = s.fingerprint.equals(fingerprint)
        ? { status: s.status, headers: { ...s.headers, 'Idempotent-Replayed': 'true' }, body: s.body }
        : answer(422, {}, '{"error":"this Idempotency-Key was used with another request body"}');
    }
    await db.query('COMMIT');
    return a;
  } catch (err) {
    await db.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    db.release();
  }
}

const listening = () => console.log(`listening on 127.0.0.1:${PORT}`);
module.exports = { PORT, pool, idem, idemFor, byHand, payByHand, ready, order, insertPayment, charge, throwFor, receiveWebhook, listening };
