'use strict';
// idempotency-pg: Idempotency-Key handling for Express and Fastify on node-postgres, as the
// idempotency extension's HTTP contract decides it (README.md).
const { Idempotency } = require('./lib/core');
const { express } = require('./lib/express');
const { fastify, plugin } = require('./lib/fastify');

// idempotency(options): checks the options (a mistake throws here) and returns
// { ready(), express(handler), fastify(), fastifyPlugin, options }.
function idempotency(options) {
  const idem = new Idempotency(options);
  return Object.freeze({
    options: idem.o,
    ready: () => idem.ready().then(() => undefined),
    express: (handler) => express(idem, handler),
    fastify: () => fastify(idem),
    fastifyPlugin: plugin(idem),
  });
}

module.exports = idempotency;
module.exports.idempotency = idempotency;
module.exports.default = idempotency;
