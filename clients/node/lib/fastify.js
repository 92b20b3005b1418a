'use strict';
// Fastify (README.md): idem.fastify() is a route's options (hooks); idem.fastifyPlugin checks the
// database when the app starts (onReady). preParsing keeps the body's exact bytes whatever the
// content-type parser makes of them (a second 'data' listener on the request's own stream), preHandler calls idem_http_begin, the handler finds its
// transaction in request.idem, onSend hands the serialized answer to idem_http_end before it
// goes out (or puts the database's answer in its place), onError takes a thrown handler to the
// error path (the answer of idem_http_errors, the key released).
const { describe, handle, headersOf } = require('./request');

const RAW = Symbol('idempotency raw body');
const ATTEMPT = Symbol('idempotency attempt');
const ERROR = Symbol('idempotency error answer');

function replace(reply, a) {
  for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
  reply.code(a.status).headers(a.headers);
}

function fastify(idem) {
  const { o } = idem;
  return {
    // The body's chunks as the content-type parser reads them. Paused first, so that the listener
    // does not start the stream before the parser listens (it resumes it): no chunk and no 'end'
    // is missed, an empty body included. A body no parser reads is empty (Fastify reads any other).
    async preParsing(request, reply, payload) {
      const chunks = [];
      request[RAW] = chunks;
      payload.pause();
      payload.on('data', (chunk) => chunks.push(chunk));
      return payload;
    },
    async preHandler(request, reply) {
      if (!idem.errors) await idem.ready();
      const body = Buffer.concat(request[RAW] ?? []);
      const req = await describe(o, request, request.routeOptions.url, body);
      const attempt = idem.attempt();
      const early = await attempt.start(req);
      if (early) {
        replace(reply, early);
        return reply.send(early.body);
      }
      request[ATTEMPT] = attempt;
      request.idem = handle(attempt);
      return undefined;
    },
    // The handler threw (or rejected): the error path now; onSend then sends its answer in
    // place of the error handler's.
    async onError(request, reply, error) {
      const attempt = request[ATTEMPT];
      if (!attempt || request[ERROR]) return;
      request[ATTEMPT] = null;
      request[ERROR] = await attempt.fail(error);
    },
    async onSend(request, reply, payload) {
      let a = request[ERROR];
      const attempt = request[ATTEMPT];
      if (!a && !attempt) return payload;
      request[ATTEMPT] = null;
      request[ERROR] = null;
      if (!a) {
        if (payload != null && typeof payload !== 'string' && !Buffer.isBuffer(payload)) {
          a = await attempt.fail(new TypeError('idempotency: a streamed answer cannot be stored'));
        } else {
          const headers = reply.getHeaders();
          a = await attempt.finish(reply.statusCode, headersOf(Object.keys(headers), (n) => headers[n], o.headers),
            Buffer.from(payload ?? ''));
        }
      }
      if (!a) return payload;
      replace(reply, a);
      return a.body;
    },
    // A request that ended without onSend (the client went away first): nothing of it is kept.
    async onResponse(request) {
      const attempt = request[ATTEMPT];
      request[ATTEMPT] = null;
      if (attempt) await attempt.fail(new Error('the request ended before its answer'));
    },
  };
}

// app.register(idem.fastifyPlugin): the start check (idem.ready()) in onReady, so that a service
// whose database, extension or grants are wrong fails at app.ready() / app.listen().
function plugin(idem) {
  const p = async function idempotencyPlugin(app) {
    app.addHook('onReady', async () => { await idem.ready(); });
  };
  p[Symbol.for('skip-override')] = true;
  p[Symbol.for('fastify.display-name')] = 'idempotency-pg';
  return p;
}

module.exports = { fastify, plugin };
