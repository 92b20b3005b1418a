'use strict';
// The framework-neutral half (README.md): the options, the start check, and one request's calls
// to the HTTP contract of the extension (docs/records.md "The HTTP contract"): idem_http_begin,
// the handler's transaction, idem_http_end, COMMIT or ROLLBACK and idem_http_release, and the
// answer of idem_http_errors for an error. What is stored, replayed, retried or answered is the
// database's decision; this file only carries the request there and the answer back.

const MODES = new Set(['single', 'two-phase', 'off']);
const OPTIONS = new Set(['pool', 'principal', 'sharedKeySpace', 'operation', 'mode', 'leaseMs', 'ttlMs',
  'headers', 'prepare']);
const RENAMED = { lease: 'leaseMs', ttl: 'ttlMs', scope: 'principal', heartbeat: 'leaseMs' };
const DEFAULT_LEASE_MS = 30000;

// Every statement goes out with parameters (the extended protocol); with `prepare` as a named
// prepared statement, planned once per connection.
const SQL = {
  begin: `SELECT scope, key, attempt, run, reclaimed, status, headers, body
    FROM idempotency.idem_http_begin($1::text, $2::text, $3::text, $4::bytea, $5::interval, $6::interval, $7::boolean)`,
  end: 'SELECT idempotency.idem_http_end($1::text, $2::text, $3::integer, $4::integer, $5::jsonb, $6::bytea, $7::text, $8::text[]) AS stored',
  release: 'SELECT idempotency.idem_http_release($1::text, $2::text, $3::integer) AS released',
  answer: 'SELECT status, headers, body FROM idempotency.idem_http_answer($1::text, $2::text)',
  heartbeat: 'SELECT idempotency.idem_heartbeat($1::text, $2::text, $3::integer, $4::interval)',
  errors: 'SELECT sqlstate, status, headers, body FROM idempotency.idem_http_errors()',
  grants: `SELECT f AS function FROM unnest($1::text[]) f
    WHERE NOT pg_catalog.has_function_privilege(f::pg_catalog.regprocedure, 'EXECUTE')`,
};

// What the pool's role must be allowed to execute (README.md "Privileges"): the functions this
// package calls (idem_http_begin, _end and _release claim, complete and release themselves).
const FUNCTIONS = ['idempotency.idem_http_begin(text,text,text,bytea,interval,interval,boolean)',
  'idempotency.idem_http_end(text,text,integer,integer,jsonb,bytea,text,text[])',
  'idempotency.idem_http_release(text,text,integer)',
  'idempotency.idem_http_answer(text,text)'];
// Two-phase mode's too: the lease's renewal.
const TWO_PHASE = ['idempotency.idem_heartbeat(text,text,integer,interval)'];

const isMs = (v) => Number.isSafeInteger(v) && v > 0;

// The options, checked once: a mistake throws here, when the service is built.
function settings(options) {
  if (options === null || typeof options !== 'object') throw new TypeError('idempotency: options must be an object');
  for (const name of Object.keys(options)) {
    if (OPTIONS.has(name)) continue;
    const hint = RENAMED[name] ? ` (did you mean ${RENAMED[name]}?)` : '';
    throw new TypeError(`idempotency: unknown option ${name}${hint}; the options are ${[...OPTIONS].join(', ')}`);
  }
  const o = { mode: 'single', sharedKeySpace: false, headers: ['Content-Type', 'Location'], prepare: false, ...options };
  const { pool } = o;
  if (!pool || typeof pool.query !== 'function' || typeof pool.connect !== 'function') {
    throw new TypeError('idempotency: the pool option must be a pg.Pool (an object with query and connect)');
  }
  if (!MODES.has(o.mode)) throw new TypeError(`idempotency: unknown mode ${JSON.stringify(o.mode)}; the modes are single, two-phase, off`);
  if (typeof o.sharedKeySpace !== 'boolean') throw new TypeError('idempotency: sharedKeySpace must be true or false');
  if (o.principal !== undefined && typeof o.principal !== 'function') {
    throw new TypeError('idempotency: principal must be a function of the request that returns who sends it');
  }
  if (o.principal === undefined && !o.sharedKeySpace) {
    throw new TypeError('idempotency: the principal option is required (a function of the request: the authenticated user), '
      + 'or sharedKeySpace: true to share one key space among all principals');
  }
  if (o.operation !== undefined && typeof o.operation !== 'function') {
    throw new TypeError('idempotency: operation must be a function of the request');
  }
  for (const k of ['leaseMs', 'ttlMs']) {
    if (o[k] !== undefined && !isMs(o[k])) {
      throw new TypeError(`idempotency: ${k} must be a positive integer number of milliseconds, not ${JSON.stringify(o[k])}`);
    }
  }
  if (o.mode === 'two-phase') o.leaseMs ??= DEFAULT_LEASE_MS;
  if (o.ttlMs !== undefined && o.leaseMs !== undefined && o.ttlMs < o.leaseMs) {
    throw new TypeError(`idempotency: ttlMs (${o.ttlMs}) is shorter than leaseMs (${o.leaseMs})`);
  }
  if (!Array.isArray(o.headers) || !o.headers.every((h) => typeof h === 'string' && h !== '')) {
    throw new TypeError('idempotency: headers must be an array of header names');
  }
  if (typeof o.prepare !== 'boolean') throw new TypeError('idempotency: prepare must be true or false');
  return Object.freeze({ ...o, headers: [...o.headers] });
}

const interval = (ms) => (ms === undefined ? null : `${ms} milliseconds`);

// Errors of a pg call are tagged, so that one without a SQLSTATE (a lost connection, a pool
// that cannot connect) is told from the handler's own exceptions: class 08.
const fromDatabase = new WeakSet();
function tag(err) {
  if (err !== null && typeof err === 'object' && !(err instanceof TypeError)) fromDatabase.add(err);
  throw err;
}
function sqlstate(err) {
  const code = err?.code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && (err.severity !== undefined || fromDatabase.has(err))) return code;
  return fromDatabase.has(err) ? '08' : null;
}

// The answer of a request as the database gives it: { status, headers, body }.
const answerOf = (row) => ({ status: row.status, headers: row.headers ?? {}, body: row.body ?? Buffer.alloc(0) });

class Idempotency {
  constructor(options) {
    this.o = settings(options);
    this.errors = null; // sqlstate -> answer, from idem_http_errors
    this.loading = null;
  }

  // The start check: the error map, and EXECUTE on every function the package needs. Rejects
  // with what is wrong (the pool cannot connect, the extension is missing or older, a GRANT).
  ready() {
    if (this.errors) return Promise.resolve(this);
    this.loading ??= this.load().then(() => this, (err) => {
      this.loading = null; // the next call tries again
      throw err;
    });
    return this.loading;
  }

  async load() {
    const { pool } = this.o;
    const needed = { single: FUNCTIONS, 'two-phase': [...FUNCTIONS, ...TWO_PHASE], off: [] }[this.o.mode];
    let rows; let missing;
    try {
      ({ rows } = await pool.query(this.sql('errors', [])));
      ({ rows: missing } = await pool.query(this.sql('grants', [needed])));
    } catch (err) {
      throw Object.assign(new Error(`idempotency: the start check failed: ${err.message}`
        + (err.code === '42883' || err.code === '3F000' ? ' (is the extension idempotency 2.0.0 or later installed in this database?)' : '')),
      { cause: err, code: err.code });
    }
    if (missing.length) {
      throw new Error(`idempotency: the pool's role may not execute ${missing.map((r) => r.function).join(', ')}: `
        + 'GRANT EXECUTE ON FUNCTION ... TO it (README.md "Privileges")');
    }
    const map = new Map(rows.map((r) => [r.sqlstate, r]));
    if (!map.has(null) || !map.get('IK002')?.status) throw new Error('idempotency: idem_http_errors() has no fallback or IK002 row');
    this.errors = map;
  }

  sql(name, values) {
    return this.o.prepare ? { name: `idem_http_${name}`, text: SQL[name], values } : { text: SQL[name], values };
  }

  // The map's row for an error: its SQLSTATE, else its class, else the fallback (NULL).
  mapped(err) {
    const code = sqlstate(err);
    return (code && (this.errors.get(code) ?? this.errors.get(code.slice(0, 2)))) ?? this.errors.get(null);
  }

  // One request's attempt (lib/express.js, lib/fastify.js).
  attempt() { return new Attempt(this); }
}

// One request: start() claims, query() is the handler's transaction, finish() stores the
// handler's answer or releases the key, fail() is the error path. Each returns the answer to
// send instead of the handler's, or null to send the handler's own.
class Attempt {
  constructor(idem) {
    this.idem = idem;
    this.o = idem.o;
    this.mode = this.o.mode;
    this.client = null; // the request's transaction
    this.inTx = false;
    this.opening = null;
    this.begun = null;
    this.timer = null;
    this.run = null; // idem_http_begin's row once the handler may run
    this.resourceId = undefined;
    this.ended = false;
  }

  get scope() { return this.run?.scope ?? null; }

  get key() { return this.run?.key ?? null; }

  get attempt() { return this.run?.attempt ?? null; }

  get reclaimed() { return this.run?.reclaimed ?? false; }

  // request: { principal, operation, key (the header's raw value or null), body (Buffer) }.
  // Returns null (run the handler) or the answer to send.
  async start(request) {
    const { o } = this;
    if (this.mode === 'off') return null;
    const begin = this.idem.sql('begin', [request.principal, request.operation, request.key, request.body,
      interval(o.leaseMs), interval(o.ttlMs), o.sharedKeySpace]);
    let row;
    try {
      if (this.mode === 'two-phase') {
        row = (await o.pool.query(begin).catch(tag)).rows[0];
      } else {
        await this.connect();
        this.inTx = true;
        row = (await this.pair('BEGIN', begin)).rows[0];
      }
    } catch (err) {
      return this.fail(err);
    }
    if (!row.run) {
      await this.close('ROLLBACK');
      return answerOf(row);
    }
    this.run = row;
    if (this.mode === 'two-phase') this.beat();
    return null;
  }

  async connect() {
    this.client = await this.o.pool.connect().catch(tag);
  }

  // Two statements in one round trip on a pipelined client (pg's `pipeline` option), else two;
  // the second's result.
  async pair(first, second) {
    const c = this.client;
    if (c.pipeline) return (await Promise.all([c.query(first), c.query(second)]).catch(tag))[1];
    await c.query(first).catch(tag);
    return c.query(second).catch(tag);
  }

  // A statement of the handler's, in the request's transaction (two-phase and off: begun with
  // the handler's first statement; on a pipelined client in the same round trip). The arguments
  // are client.query's.
  async query(...args) {
    if (this.ended) throw new Error('idempotency: the request\'s transaction has ended (a statement after the answer)');
    if (!this.inTx) {
      this.opening ??= this.open();
      await this.opening;
    }
    const result = this.client.query(...args).catch(tag);
    const begun = this.begun;
    this.begun = null;
    if (begun) {
      result.catch(() => {});
      await begun;
    }
    return result;
  }

  async open() {
    if (!this.client) await this.connect();
    const begun = this.client.query('BEGIN').catch(tag);
    if (this.client.pipeline) {
      begun.catch(() => {});
      this.begun = begun;
    } else {
      await begun;
    }
    this.inTx = true;
  }

  beat() {
    const s = this.idem.sql('heartbeat', [this.scope, this.key, this.attempt, interval(this.o.leaseMs)]);
    this.timer = setInterval(() => this.o.pool.query(s).catch(() => {}), Math.max(1, Math.floor(this.o.leaseMs / 3)));
    this.timer.unref();
  }

  // The handler answered status, headers (every header: name -> string) and body (Buffer).
  async finish(status, headers, body) {
    clearInterval(this.timer);
    this.ended = true;
    try {
      if (this.mode === 'off') {
        await this.close('COMMIT', true);
        return null;
      }
      const end = this.idem.sql('end', [this.scope, this.key, this.attempt, status, JSON.stringify(headers), body,
        this.resourceId == null ? null : String(this.resourceId), this.o.headers]);
      // No transaction of the handler's (two-phase, nothing written): idem_http_end on its own.
      const { rows: [{ stored }] } = await (this.inTx ? this.client.query(end) : this.o.pool.query(end)).catch(tag);
      if (stored) {
        await this.close('COMMIT', true);
        return null;
      }
      await this.close('ROLLBACK');
      await this.release();
      return null;
    } catch (err) {
      return this.fail(err);
    }
  }

  // Any error between the start and the end's COMMIT, the handler's exceptions among them: roll
  // back, release the key, and the map's answer.
  async fail(err) {
    clearInterval(this.timer);
    this.ended = true;
    await this.close('ROLLBACK');
    if (this.run) await this.release();
    const idem = this.idem;
    let row = idem.mapped(err);
    if (row.sqlstate === 'IK003') { // another attempt finished: its answer
      try {
        const { rows: [a] } = await this.o.pool.query(idem.sql('answer', [this.scope, this.key]));
        row = a?.status == null ? idem.errors.get('IK002') : a;
      } catch (e) {
        row = idem.mapped(e);
        if (row.sqlstate === 'IK003') row = idem.errors.get('IK002');
      }
    }
    return answerOf(row);
  }

  async release() {
    const { run } = this;
    this.run = { ...run, released: true };
    if (run.released) return;
    await this.o.pool.query(this.idem.sql('release', [run.scope, run.key, run.attempt])).catch(() => {});
  }

  // Ends the transaction and gives the connection back. A failed COMMIT is thrown (rethrow:
  // the error path); a failed ROLLBACK discards the connection.
  async close(statement, rethrow = false) {
    const client = this.client;
    const inTx = this.inTx;
    this.client = null;
    this.inTx = false;
    this.opening = null;
    this.begun = null;
    if (!client) return;
    try {
      if (inTx) await client.query(statement);
      client.release();
    } catch (err) {
      client.release(err);
      if (rethrow) tag(err);
    }
  }
}

module.exports = { Idempotency, settings, sqlstate, SQL, FUNCTIONS, TWO_PHASE };
