'use strict';
// What both frameworks share: the request as idem_http_begin reads it, the handler's req.idem,
// and the handler's answer's headers.

// { principal, operation, key, body } of a request: the principal option's answer (NULL: none),
// METHOD and the route's template (or the operation option's answer), the Idempotency-Key
// header's raw value (null: none), the raw body.
// A promise only when an option's function returns one.
function describe(o, req, route, body) {
  const principal = o.principal ? o.principal(req) : null;
  const operation = o.operation ? o.operation(req) : `${req.method} ${route}`;
  if (isThenable(principal) || isThenable(operation)) {
    return Promise.all([principal, operation]).then(([p, op]) => described(p, op, req, body));
  }
  return described(principal, operation, req, body);
}

const isThenable = (v) => v !== null && typeof v === 'object' && typeof v.then === 'function';

function described(principal, operation, req, body) {
  const key = req.headers['idempotency-key'];
  return { principal: principal == null ? null : String(principal), operation: String(operation), key: key ?? null, body };
}

// The handler's view of its attempt: query (client.query's arguments) in the request's
// transaction, the key, the attempt (fencing token), reclaimed, the scope, the mode, and
// resourceId, which the handler may set (default: the last segment of Location's path). A
// class, its accessors on the prototype: one object a request, not seven closures.
class Handle {
  #attempt;

  constructor(attempt) {
    this.#attempt = attempt;
    this.query = (...args) => attempt.query(...args); // `const { query } = req.idem` works
    Object.freeze(this);
  }

  get key() { return this.#attempt.key; }

  get attempt() { return this.#attempt.attempt; }

  get reclaimed() { return this.#attempt.reclaimed; }

  get scope() { return this.#attempt.scope; }

  get mode() { return this.#attempt.mode; }

  get resourceId() { return this.#attempt.resourceId; }

  set resourceId(v) { this.#attempt.resourceId = v; }
}
const handle = (attempt) => new Handle(attempt);

// Every header of an answer as a JSON object (name -> string, several values joined with ", "),
// the names of the headers option spelled as there (frameworks lower-case names).
// The headers option's spellings by lower-case name, made once per options.
const spellings = new WeakMap();
function headersOf(names, get, allowed) {
  let spelled = spellings.get(allowed);
  if (!spelled) {
    spelled = new Map(allowed.map((n) => [n.toLowerCase(), n]));
    spellings.set(allowed, spelled);
  }
  const out = {};
  for (const name of names) {
    const v = get(name);
    if (v !== undefined) out[spelled.get(name.toLowerCase()) ?? name] = Array.isArray(v) ? v.join(', ') : String(v);
  }
  return out;
}

module.exports = { describe, handle, headersOf };
