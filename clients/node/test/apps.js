'use strict';
// The tests' services: one route, POST /pay, on Express and on Fastify, whose handler inserts a
// row in its request's transaction and answers what the request's x-answer header asks for
// (201 with Location by default, "throw" after the INSERT, or a status). x-sleep: milliseconds
// before the INSERT (a slow handler); x-etag: an ETag header on the answer.
const { setTimeout: sleep } = require('node:timers/promises');
const idempotency = require('..');

async function work(idem, headers) {
  await sleep(Number(headers['x-sleep'] ?? 0));
  const { rows: [row] } = await idem.query('INSERT INTO t (v) VALUES ($1) RETURNING id, v', [headers['x-value'] ?? 'é ✓']);
  const answer = headers['x-answer'] ?? '201';
  if (answer === 'throw') throw new Error('the handler fails after its INSERT');
  return { status: Number(answer), row, attempt: idem.attempt, reclaimed: idem.reclaimed };
}

function express(pool, options) {
  const app = require('express')();
  app.post('/pay', require('express').raw({ type: () => true }), idempotency.express(pool, options), async (req, res) => {
    const { status, row, ...rest } = await work(req.idem, req.headers);
    if (req.headers['x-etag']) res.set('ETag', req.headers['x-etag']);
    res.status(status).location(`/pay/${row.id}`).json({ ...row, ...rest });
  });
  return listen((port) => new Promise((ok) => { const s = app.listen(port, '127.0.0.1', () => ok(s)); }),
    (s) => new Promise((ok) => s.close(ok)));
}

function fastify(pool, options) {
  const app = require('fastify')();
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body, done) => done(null, body));
  app.post('/pay', idempotency.fastify(pool, options), async (request, reply) => {
    const { status, row, ...rest } = await work(request.idem, request.headers);
    if (request.headers['x-etag']) reply.header('ETag', request.headers['x-etag']);
    return reply.code(status).header('Location', `/pay/${row.id}`).send({ ...row, ...rest });
  });
  return listen(() => app.listen({ port: 0, host: '127.0.0.1' }).then(() => app.server), () => app.close());
}

// Starts a service on a free port: { url, close() }.
async function listen(start, stop) {
  const server = await start(0);
  const url = `http://127.0.0.1:${server.address().port}/pay`;
  return { url, close: () => { server.closeAllConnections?.(); return stop(server); } };
}

module.exports = { express, fastify };
