'use strict';
// What the Express and the Fastify payment services share (examples/README.md): the settings,
// the pool, the request check, the payment's INSERT, the fake provider and the webhook receiver.
// The Idempotency-Key handling is the package's (clients/node).
const { setTimeout: sleep } = require('node:timers/promises');
const pg = require('pg');

const env = (name, fallback) => process.env[name] || fallback;
const PORT = Number(env('PORT', 8080));
const PROVIDER_DELAY_MS = Number(env('PROVIDER_DELAY_MS', 100));
const COMPLETE_DELAY_MS = Number(env('COMPLETE_DELAY_MS', 0));
const WEBHOOK_SECRET = env('WEBHOOK_SECRET', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');

// PREPARE=on: named prepared statements (the package's and the INSERT's), on a pipelined pool
// (the package's `BEGIN` + claim and `idem_complete` + `COMMIT` each in one round trip); direct
// connections or PgBouncer >= 1.21 with max_prepared_statements only (examples/README.md).
const PREPARE = env('PREPARE', 'off') === 'on';
// PGHOST, PGPORT, PGUSER, PGDATABASE and PGPASSWORD come from the environment.
const pool = new pg.Pool({ max: Number(env('POOL_SIZE', 8)), pipeline: PREPARE });
pool.on('error', (err) => console.error('idle connection:', err.message));

// The package's options: ?mode=two-phase picks the two-phase mode and its scope;
// IDEMPOTENCY=off runs the same handler in a plain transaction (bench/http.sh's baseline).
const twoPhase = (req) => req.query.mode === 'two-phase';
const options = {
  scope: (req) => (twoPhase(req) ? 'payments-two-phase' : 'payments'),
  mode: (req) => (env('IDEMPOTENCY', 'on') === 'off' ? 'off' : twoPhase(req) ? 'two-phase' : 'single'),
  lease: Number(env('LEASE_SECONDS', 10)),
  prepare: PREPARE,
};

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

const listening = () => console.log(`listening on 127.0.0.1:${PORT}`);
module.exports = { PORT, pool, options, order, insertPayment, charge, throwFor, receiveWebhook, listening };
