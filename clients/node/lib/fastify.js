'use strict';
// Fastify route hooks (README.md): app.post(path, idempotency.fastify(pool, options), handler),
// with a buffer content-type parser; the handler finds its transaction in request.idem, and its
// serialized answer is stored and committed in onSend, before it goes out.
const { Idem, settings, errorAnswer, problem, pick } = require('./core');

function answer(reply, a) {
  for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
  return reply.code(a.status).headers(a.headers ?? {}).send(a.body);
}

function fastify(pool, options) {
  const o = settings(options);
  return {
    async preHandler(request, reply) {
      const idem = new Idem(pool, o, request);
      const header = request.headers['idempotency-key'];
      if (header === undefined && idem.mode !== 'off') return answer(reply, problem(400, 'Idempotency-Key header required'));
      let a;
      try {
        a = await idem.claim(request, header);
      } catch (err) {
        a = errorAnswer(err);
        if (!a) throw err;
      }
      if (a) return answer(reply, a);
      request.idem = idem;
      return undefined;
    },
    // The handler threw: nothing of it is kept (single: rollback; two-phase: retryable failure).
    async onError(request) {
      const idem = request.idem;
      if (idem && !idem.done) await Object.assign(idem, { done: true }).abort();
    },
    async onSend(request, reply, payload) {
      const idem = request.idem;
      if (!idem || idem.done) return payload;
      idem.done = true;
      if (payload != null && typeof payload !== 'string' && !Buffer.isBuffer(payload)) {
        await idem.abort();
        throw new TypeError('idempotency: a streamed answer cannot be stored');
      }
      let a;
      try {
        a = await idem.finish(reply.statusCode, pick((n) => reply.getHeader(n), o.headers), Buffer.from(payload ?? ''));
      } catch (err) {
        a = errorAnswer(err);
        if (!a) throw err;
      }
      if (!a) return payload;
      for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
      reply.code(a.status).headers(a.headers ?? {});
      return a.body;
    },
    // A request that ended before onSend (the client went away): the connection goes back.
    async onResponse(request) {
      if (request.idem && !request.idem.done) await request.idem.abort();
    },
  };
}

module.exports = { fastify };
