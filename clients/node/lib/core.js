'use strict';
// The framework-neutral half: one request's claim, its transaction, the stored answer, and the
// SQLSTATE -> HTTP mapping (README.md). express.js and fastify.js adapt it to their framework.

const DEFAULTS = { scope: null, mode: 'single', lease: 30, ttl: null, heartbeat: null,
  headers: ['Content-Type', 'Location'], fingerprint: null, prepare: false };
// A bad key or body (docs/records.md, "SQLSTATE to HTTP"): 400, nothing stored.
const BAD_REQUEST = new Set(['22004', '22023', '22001', '22P02', '22021', '22003', '54001']);
// Worth the client's retry: serialization failure, deadlock, read-only (standby), shutdown,
// too many connections, and connection failures (class 08, Node's socket errors, pg's own).
const RETRYABLE = new Set(['40001', '40P01', '25006', '57P01', '57P02', '57P03', '53300']);
// 4xx answers that say "later" are not stored: the retry runs the handler again.
const NOT_STORED = new Set([408, 409, 425, 429]);

function retryable(err) {
  const code = String(err?.code ?? '');
  return RETRYABLE.has(code) || code.startsWith('08') || /^E[A-Z]+$/.test(code) ||
    (!code && /Connection terminated|timeout exceeded when trying to connect/.test(err?.message));
}

// RFC 9457 problem details.
const problem = (status, title, headers = {}) => ({ status,
  headers: { 'Content-Type': 'application/problem+json', ...headers },
  body: Buffer.from(JSON.stringify({ type: 'about:blank', title, status })) });

// The answer an error gets, or null when it is not the package's to answer (the framework's 500).
function errorAnswer(err) {
  if (BAD_REQUEST.has(err?.code)) return problem(400, err.message);
  if (retryable(err)) return problem(503, 'the database is unavailable, retry', { 'Retry-After': '1' });
  return null;
}

// SQL literals. By default the statements go out with the simple protocol, several in one round
// trip (`BEGIN; claim`, `complete; COMMIT`), which the extended protocol's parameters cannot do.
const text = (s) => `E'${String(s).replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
const bytes = (b) => (b == null ? 'NULL' : `decode('${Buffer.from(b).toString('hex')}', 'hex')`);
const literal = (v) => (v == null ? 'NULL' : Buffer.isBuffer(v) ? bytes(v) : typeof v === 'number' ? String(v) : text(v));
// A statement of the package's, written once with parameters $1, $2, ...: with the prepare
// option a named statement (node-postgres prepares it once per connection, README.md), else
// its text with the values as literals (planned on every call, PgBouncer-safe).
const statement = (prepare, name, sql, values) =>
  (prepare ? { name: `idem_${name}`, text: sql, values }
    : sql.replace(/\$(\d+)/g, (_, i) => literal(values[i - 1])));

function settings(options) {
  const o = { ...DEFAULTS, ...options };
  if (!o.scope) throw new TypeError('idempotency: the scope option is required');
  for (const k of ['lease', 'ttl', 'heartbeat']) {
    if (o[k] != null && !(Number.isFinite(o[k]) && o[k] > 0)) throw new TypeError(`idempotency: ${k} must be seconds > 0`);
  }
  o.heartbeat ??= o.lease / 3;
  return o;
}
// The allow-listed headers of an answer, as a JSON object (get: the framework's getHeader).
function pick(get, allowed) {
  const out = {};
  for (const name of allowed) {
    const v = get(name);
    if (v !== undefined) out[name] = Array.isArray(v) ? v.join(', ') : String(v);
  }
  return out;
}
const resolve = (v, req) => (typeof v === 'function' ? v(req) : v);

// The request body bytes: a raw body (express.raw, fastify's buffer parser, or rawBody).
function rawBody(req) {
  const b = req.rawBody ?? req.body;
  if (b === undefined || b === null) return Buffer.alloc(0);
  if (Buffer.isBuffer(b) || typeof b === 'string') return b;
  throw new TypeError('idempotency: the raw request body is needed (express.raw(), or a buffer content-type parser)');
}

// One request under an Idempotency-Key: claim(), the handler's query(), finish() or abort().
class Idem {
  constructor(pool, o, req) {
    Object.assign(this, { pool, o, scope: resolve(o.scope, req), mode: resolve(o.mode, req) });
    this.client = null; this.key = null; this.attempt = null; this.outcome = null; this.timer = null;
  }

  get reclaimed() { return this.outcome === 'reclaimed'; }

  // null: run the handler; otherwise the answer to send as it is (replay, 409, 422).
  async claim(req, header) {
    try {
      return await (this.mode === 'off' ? this.begin().then(() => null) : this.claimKey(req, header));
    } catch (err) {
      await this.end('ROLLBACK');
      throw err;
    }
  }

  // The claim alone keeps its custom scan and a cheap plan (planned on every call, as behind
  // PgBouncer); only an outcome that does not run the handler asks idem_http_answer, with the
  // claim's row as text, in the statement that also ends the transaction.
  async claimKey(req, header) {
    const { scope, o } = this;
    const lease = this.mode === 'two-phase' ? o.lease : null;
    const [fingerprint, hashed] = this.fingerprint(req);
    const sql = this.sql(hashed ? 'claim_body' : 'claim', `SELECT c.outcome, c.attempt,
      idempotency.idem_key_from_header($2::text) AS key,
      CASE WHEN c.outcome NOT IN ('claimed', 'reclaimed') THEN ROW(c.outcome, c.attempt, c.resource_id,
        c.response, c.response_status, c.lease_expires_at, c.expires_at, c.response_body,
        c.response_headers)::idempotency.idem_claim_result::text END AS claim
      FROM idempotency.idem_claim($1::text, idempotency.idem_key_from_header($2::text),
        ${hashed ? 'idempotency.idem_fingerprint($3::bytea)' : '$3::bytea'},
        lease => make_interval(secs => $4::float8), ttl => make_interval(secs => $5::float8)) c`,
    [scope, header, fingerprint, lease, o.ttl]);
    let row;
    if (this.mode === 'two-phase') {
      row = (await this.pool.query(sql)).rows[0];
    } else {
      this.client = await this.pool.connect();
      row = (await this.inTx('BEGIN', sql, null)).rows[0];
    }
    Object.assign(this, { key: row.key, attempt: row.attempt, outcome: row.outcome });
    if (row.claim !== null) {
      const answer = this.sql('answer', 'SELECT status, headers, body FROM idempotency.idem_http_answer($1::idempotency.idem_claim_result)',
        [row.claim]);
      if (!this.client) return (await this.pool.query(answer)).rows[0];
      const { rows: [a] } = await this.inTx(null, answer, 'COMMIT');
      await this.end(null);
      return a;
    }
    if (this.mode === 'two-phase') this.beat();
    return null;
  }

  // The claim's fingerprint as [bytes, hashed]: idem_fingerprint of the raw body (hashed; none
  // for an empty body), the bytes of the fingerprint option's function, or none (false).
  fingerprint(req) {
    const f = this.o.fingerprint;
    if (f === false) return [null, false];
    if (f) return [Buffer.from(f(req)), false];
    const body = Buffer.from(rawBody(req));
    return body.length ? [body, true] : [null, false];
  }

  sql(name, text, values) { return statement(this.o.prepare, name, text, values); }

  // s between `BEGIN` and/or before `COMMIT` (either null) in the request's transaction; s's
  // result. One round trip: one query string (simple protocol), or, with prepare, on a pipelined
  // client (node-postgres' `pipeline` option); otherwise a round trip per statement.
  async inTx(before, s, after) {
    const all = [before, s, after].filter(Boolean);
    let results;
    if (typeof s === 'string') results = [].concat(await this.run(all.join('; ')));
    else if (this.client.pipeline) results = await Promise.all(all.map((q) => this.run(q)));
    else {
      results = [];
      for (const q of all) results.push(await this.run(q));
    }
    return results[before ? 1 : 0];
  }

  async begin() {
    this.client ??= await this.pool.connect();
    await this.run('BEGIN');
  }

  // A statement of the handler's: the request's transaction (two-phase: the final one, begun by
  // the first query after the handler's work outside any transaction).
  async query(...args) {
    if (!this.client) await this.begin();
    return this.client.query(...args);
  }

  beat() {
    const sql = this.sql('heartbeat', 'SELECT idempotency.idem_heartbeat($1::text, $2::text, $3::integer, make_interval(secs => $4::float8))',
      [this.scope, this.key, this.attempt, this.o.lease]);
    this.timer = setInterval(() => this.pool.query(sql).catch(() => {}), this.o.heartbeat * 1000);
    this.timer.unref();
  }

  // The handler answered: store it (or not) and commit. Returns null to send the handler's own
  // answer, or the answer to send instead (409 when fenced, what is stored when already done).
  async finish(status, headers, body) {
    try {
      if (this.mode === 'off') return status < 500 ? await this.end('COMMIT') : await this.end('ROLLBACK');
      if (status >= 500 || NOT_STORED.has(status)) return await this.abort();
      const stored = 'response_status => $5::integer, response_body => $6::bytea, response_headers => $7::jsonb';
      const call = status < 400
        ? this.sql('complete', `SELECT idempotency.idem_complete($1::text, $2::text, $3::integer, resource_id => $4::text, ${stored})`,
          [this.scope, this.key, this.attempt, this.resource(headers), status, Buffer.from(body), JSON.stringify(headers)])
        : this.sql('fail', `SELECT idempotency.idem_fail($1::text, $2::text, $3::integer, retryable => $4::boolean, ${stored})`,
          [this.scope, this.key, this.attempt, 'false', status, Buffer.from(body), JSON.stringify(headers)]);
      if (this.client) await this.inTx(null, call, 'COMMIT');
      else await this.pool.query(call);
      return this.end(null);
    } catch (err) {
      await this.end('ROLLBACK');
      if (err.code === 'IK002') return problem(409, 'taken over by a retry of this request', { 'Retry-After': '1' });
      if (err.code !== 'IK003') {
        await this.abort(); // two-phase: the key is left claimable
        throw err;
      }
      const { rows: [a] } = await this.pool.query(this.sql('answer_key',
        'SELECT status, headers, body FROM idempotency.idem_http_answer($1::text, $2::text)', [this.scope, this.key]));
      return a.status === null ? problem(409, 'retry this request', { 'Retry-After': '1' }) : a;
    }
  }

  // The handler threw or answered 5xx: nothing of it is kept. Single mode rolls the claim back;
  // two-phase records a retryable failure, so that the retry claims anew.
  async abort() {
    await this.end('ROLLBACK');
    if (this.mode === 'two-phase' && this.attempt !== null) {
      await this.pool.query(this.sql('retry', 'SELECT idempotency.idem_fail($1::text, $2::text, $3::integer, retryable => true)',
        [this.scope, this.key, this.attempt]))
        .catch(() => {}); // fenced or gone: the key's next owner decides
    }
    return null;
  }

  run(sql) { return this.client.query(sql); }

  // resource_id: what the handler set (req.idem.resourceId), else the Location's last segment.
  resource(headers) {
    const location = Object.entries(headers).find(([k]) => k.toLowerCase() === 'location')?.[1];
    const id = this.resourceId ?? location?.split('?')[0].split('/').filter(Boolean).pop();
    return id == null ? null : String(id);
  }

  // Ends the transaction (statement null: it has ended), stops the heartbeat, returns the
  // client; a failed COMMIT is thrown, a failed ROLLBACK only discards the connection.
  async end(statement) {
    clearInterval(this.timer);
    const client = this.client;
    this.client = null;
    if (!client) return null;
    try {
      if (statement) await client.query(statement);
      client.release();
    } catch (err) {
      client.release(err);
      if (statement === 'COMMIT') throw err;
    }
    return null;
  }
}

module.exports = { Idem, settings, errorAnswer, problem, pick, rawBody, retryable, text, bytes };
