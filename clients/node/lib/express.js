'use strict';
// Express (README.md): idem.express(handler) is the route's handler, wrapped: it reads the
// request, calls idem_http_begin, runs the handler with req.idem (its transaction), holds the
// handler's answer (writeHead, write, end) until idem_http_end decided, then sends it, or the
// database's answer instead. A handler that throws, rejects or calls next(err) gets the answer
// of idem_http_errors and its key released.
const { describe, handle, headersOf } = require('./request');

// Sends { status, headers, body } on a response whose own headers are dropped.
function send(res, a) {
  for (const name of res.getHeaderNames()) res.removeHeader(name);
  res.statusCode = a.status;
  for (const [k, v] of Object.entries(a.headers)) res.setHeader(k, v);
  res.setHeader('Content-Length', a.body.length);
  res.end(a.body);
}

// The request body's exact bytes: express.raw()'s Buffer, a rawBody kept by a parser's verify
// option, or the stream itself when no parser read it (then a promise).
function rawBody(req) {
  if (Buffer.isBuffer(req.rawBody)) return req.rawBody;
  if (Buffer.isBuffer(req.body)) return req.body;
  if (typeof req.body === 'string') return Buffer.from(req.body);
  if (req.body === undefined && !req.readableEnded) return readBody(req);
  if (req.body === undefined) return Buffer.alloc(0);
  throw new TypeError('idempotency: the raw request body is needed: express.raw() before the route, '
    + 'express.json({ verify: (req, res, buf) => { req.rawBody = buf; } }), or no body parser');
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  req.body = Buffer.concat(chunks);
  return req.body;
}

// The route's template: the router's mount path and the route's path (Express 5, path-to-regexp).
function template(req) {
  if (!req.route) throw new TypeError('idempotency: idem.express(handler) is a route handler: app.post(path, idem.express(handler))');
  return `${req.baseUrl ?? ''}${req.route.path}`;
}

function express(idem, handler) {
  if (typeof handler !== 'function') {
    throw new TypeError('idempotency: idem.express(handler) wraps the route handler: app.post(path, idem.express(async (req, res) => ...))');
  }
  const { o } = idem;
  return async function idempotent(req, res, next) {
    let request;
    try {
      if (!idem.errors) await idem.ready();
      const body = rawBody(req);
      request = await describe(o, req, template(req), Buffer.isBuffer(body) ? body : await body);
    } catch (err) {
      return next(err);
    }
    const attempt = idem.attempt();
    const early = await attempt.start(request);
    if (early) return send(res, early);
    req.idem = handle(attempt);
    let answered;
    const result = new Promise((resolve, reject) => {
      answered = capture(res, resolve);
      const failed = (err) => reject(err ?? new Error('idempotency: the handler called next() without answering'));
      Promise.resolve().then(() => handler(req, res, failed)).catch(failed);
    });
    let answer;
    try {
      const { status, body } = await result;
      const headers = res.getHeaders();
      answer = await attempt.finish(status, headersOf(Object.keys(headers), (n) => headers[n], o.headers), body);
      answered.restore();
      if (!answer) return res.end(body);
    } catch (err) {
      answer = await attempt.fail(err);
      answered.restore();
    }
    return send(res, answer);
  };
}

// Holds what the handler writes (writeHead, write, end, flushHeaders); at its end, resolve({
// status, body }). restore() gives the response its methods back.
function capture(res, resolve) {
  const { writeHead, write, end, flushHeaders } = res;
  const chunks = [];
  const add = (chunk, encoding) => {
    if (chunk != null && typeof chunk !== 'function') {
      chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk, typeof encoding === 'string' ? encoding : 'utf8'));
    }
  };
  res.writeHead = (status, ...rest) => {
    res.statusCode = status;
    const headers = rest.find((x) => x && typeof x === 'object');
    if (Array.isArray(headers)) {
      for (let i = 0; i + 1 < headers.length; i += 2) res.setHeader(headers[i], headers[i + 1]);
    } else {
      for (const [k, v] of Object.entries(headers ?? {})) res.setHeader(k, v);
    }
    return res;
  };
  res.write = (chunk, encoding, cb) => {
    add(chunk, encoding);
    if (typeof encoding === 'function') encoding();
    else if (typeof cb === 'function') cb();
    return true;
  };
  res.flushHeaders = () => {};
  res.end = (chunk, encoding) => {
    add(chunk, encoding);
    resolve({ status: res.statusCode, body: Buffer.concat(chunks) });
    return res;
  };
  return { restore: () => Object.assign(res, { writeHead, write, end, flushHeaders }) };
}

module.exports = { express };
