'use strict';
// What both frameworks share: the request as idem_http_begin reads it, the handler's req.idem,
// and the handler's answer's headers.

// { principal, operation, key, body } of a request: the principal option's answer (NULL: none),
// METHOD and the route's template (or the operation option's answer), the Idempotency-Key
// header's raw value (null: none), the raw body.
async function describe(o, req, route, body) {
  const principal = o.principal ? await o.principal(req) : null;
  const operation = o.operation ? await o.operation(req) : `${req.method} ${route}`;
  const key = req.headers['idempotency-key'];
  return { principal: principal == null ? null : String(principal), operation: String(operation), key: key ?? null, body };
}

// The handler's view of its attempt: query (client.query's arguments) in the request's
// transaction, the key, the attempt (fencing token), reclaimed, the scope, the mode, and
// resourceId, which the handler may set (default: the last segment of Location's path).
function handle(attempt) {
  return Object.freeze({
    query: (...args) => attempt.query(...args),
    get key() { return attempt.key; },
    get attempt() { return attempt.attempt; },
    get reclaimed() { return attempt.reclaimed; },
    get scope() { return attempt.scope; },
    get mode() { return attempt.mode; },
    get resourceId() { return attempt.resourceId; },
    set resourceId(v) { attempt.resourceId = v; },
  });
}

// Every header of an answer as a JSON object (name -> string, several values joined with ", "),
// the names of the headers option spelled as there (frameworks lower-case names).
function headersOf(names, get, allowed) {
  const spelled = new Map(allowed.map((n) => [n.toLowerCase(), n]));
  const out = {};
  for (const name of names) {
    const v = get(name);
    if (v !== undefined) out[spelled.get(name.toLowerCase()) ?? name] = Array.isArray(v) ? v.join(', ') : String(v);
  }
  return out;
}

module.exports = { describe, handle, headersOf };
