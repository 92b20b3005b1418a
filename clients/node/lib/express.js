'use strict';
// Express middleware (README.md): after express.raw(), before the route's handler, which finds
// its transaction in req.idem; the handler's answer is held until it is stored and committed.
const { Idem, settings, errorAnswer, problem, pick } = require('./core');

// Sends {status, headers, body} on a response whose own headers are dropped.
function send(res, a) {
  for (const name of res.getHeaderNames()) res.removeHeader(name);
  res.statusCode = a.status;
  for (const [k, v] of Object.entries(a.headers ?? {})) res.setHeader(k, v);
  res.setHeader('Content-Length', a.body.length);
  res.end(a.body);
}

function express(pool, options) {
  const o = settings(options);
  return async function idempotency(req, res, next) {
    const idem = new Idem(pool, o, req);
    const header = req.get('Idempotency-Key');
    if (header === undefined && idem.mode !== 'off') return send(res, problem(400, 'Idempotency-Key header required'));
    let answer;
    try {
      answer = await idem.claim(req, header);
    } catch (err) {
      answer = errorAnswer(err);
      if (!answer) return next(err);
    }
    if (answer) return send(res, answer);
    req.idem = idem;
    capture(res, (status, body) => idem.finish(status, pick((n) => res.getHeader(n), o.headers), body), next);
    return next();
  };
}

// Holds what the handler writes (writeHead, write, end); at its end, finish(status, body) stores
// it and commits, then the handler's answer goes out, or the one finish() returned instead.
function capture(res, finish, next) {
  const { writeHead, write, end } = res;
  const chunks = [];
  const add = (chunk, encoding) => {
    if (chunk != null && typeof chunk !== 'function') {
      chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk, typeof encoding === 'string' ? encoding : 'utf8'));
    }
  };
  res.writeHead = (status, ...rest) => {
    res.statusCode = status;
    const headers = rest.find((x) => x && typeof x === 'object');
    for (const [k, v] of Object.entries(headers ?? {})) res.setHeader(k, v);
    return res;
  };
  res.write = (chunk, encoding) => { add(chunk, encoding); return true; };
  res.end = (chunk, encoding) => {
    add(chunk, encoding);
    Object.assign(res, { writeHead, write, end });
    const body = Buffer.concat(chunks);
    finish(res.statusCode, body).then((instead) => (instead ? send(res, instead) : res.end(body)), (err) => {
      const a = errorAnswer(err);
      if (a) return send(res, a);
      for (const name of res.getHeaderNames()) res.removeHeader(name);
      return next(err);
    });
    return res;
  };
}

module.exports = { express };
