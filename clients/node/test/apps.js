'use strict';
// The tests' services on Express and on Fastify: routes given as { method, path, idem, handler,
// plugins }, where handler(ctx) is framework-neutral: ctx has idem (req.idem / request.idem),
// headers, body (the raw bytes the route received) and answer(status, headers, body) (Buffer or
// string, sent as is, no header of the framework's own but Content-Length).

function express(routes, { prefix = '' } = {}) {
  const expressLib = require('express');
  const app = expressLib();
  app.set('env', 'test'); // the framework's own 500s (a refused body) are not logged
  const router = expressLib.Router();
  for (const r of routes) {
    router[r.method ?? 'post'](r.path, ...(r.before ?? [expressLib.raw({ type: () => true })]), r.idem.express(async (req, res) => {
      await r.handler({ idem: req.idem, headers: req.headers, body: req.body, params: req.params,
        answer: (status, headers, body) => { res.writeHead(status, headers ?? {}); res.end(Buffer.from(body ?? '')); } });
    }));
  }
  app.use(prefix || '/', router);
  return listen((port) => new Promise((ok, fail) => { const s = app.listen(port, '127.0.0.1', (err) => (err ? fail(err) : ok(s))); }),
    (s) => new Promise((ok) => s.close(ok)));
}

function fastify(routes, { prefix = '', json = false, register = [] } = {}) {
  const app = require('fastify')();
  for (const p of register) app.register(p);
  app.register(async (scope) => {
    if (!json) {
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body, done) => done(null, body));
    }
    for (const r of routes) {
      scope[r.method ?? 'post'](r.path, r.idem.fastify(), async (request, reply) => {
        let sent;
        await r.handler({ idem: request.idem, headers: request.headers, body: request.body, params: request.params,
          answer: (status, headers, body) => { sent = reply.code(status).headers(headers ?? {}).send(Buffer.from(body ?? '')); } });
        return sent ?? reply;
      });
    }
  }, { prefix });
  return listen(() => app.listen({ port: 0, host: '127.0.0.1' }).then(() => app.server), () => app.close(), app);
}

// Starts a service on a free port: { base, app, close() }.
async function listen(start, stop, app) {
  const server = await start(0);
  const base = `http://127.0.0.1:${server.address().port}`;
  return { base, app, close: () => { server.closeAllConnections?.(); return stop(server); } };
}

// One request: { status, headers (a Headers), body (Buffer) }.
async function send(url, { method = 'POST', headers = {}, body } = {}) {
  const r = await fetch(url, { method, headers, body, redirect: 'manual' });
  return { status: r.status, headers: r.headers, body: Buffer.from(await r.arrayBuffer()) };
}

module.exports = { express, fastify, send, frameworks: { express, fastify } };
