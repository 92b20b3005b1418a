'use strict';
// The payment service of examples/README.md on Fastify 5, a user of the idempotency-pg package
// (clients/node): the package's route hooks claim the Idempotency-Key, give the handler its
// transaction (request.idem), store the handler's serialized answer and replay it.
const Fastify = require('fastify');
const idempotency = require('../../clients/node');
const shop = require('./shop');

const app = Fastify();
// Every body as its exact bytes (the fingerprint's input); the handlers parse the JSON.
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body, done) => done(null, body));
const idem = idempotency.fastify(shop.pool, shop.options);
async function valid(request, reply) {
  const { order, error } = shop.order(request);
  if (error) return reply.code(400).send({ error });
  request.order = order;
  return undefined;
}

app.post('/v1/payments', { preValidation: valid, ...idem }, async (request, reply) => {
  const providerRef = request.idem.mode === 'two-phase' ? await shop.charge(request.idem, request.order) : null;
  const payment = await shop.insertPayment(request.idem, request.order, providerRef);
  shop.throwFor(payment);
  return reply.code(201).header('Location', `/v1/payments/${payment.id}`).send(payment);
});

app.post('/v1/webhooks/provider', async (request, reply) => {
  const { status, body } = await shop.receiveWebhook(request.headers, request.body);
  return reply.code(status).send(body);
});

app.get('/healthz', async (request, reply) => reply.type('text/plain').send('ok'));

app.listen({ port: shop.PORT, host: '127.0.0.1' }).then(shop.listening, (err) => {
  console.error(err);
  process.exit(1);
});
