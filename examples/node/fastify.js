'use strict';
// The payment service of examples/README.md on Fastify 5, a user of the idempotency-pg package
// (clients/node): the package's route hooks read the Idempotency-Key, ask the database
// (idem_http_begin), give the handler its transaction (request.idem), and store or release its
// serialized answer as the database decides (idem_http_end); its plugin checks the database
// when the app starts.
const Fastify = require('fastify');
const shop = require('./shop');

const app = Fastify();
// Every body as its exact bytes; the handlers parse the JSON.
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body, done) => done(null, body));
app.register(shop.idem.single.fastifyPlugin);
app.register(shop.idem.twoPhase.fastifyPlugin);
async function valid(request, reply) {
  const { order, error } = shop.order(request);
  if (error) return reply.code(400).send({ error });
  request.order = order;
  return undefined;
}
// One route, two modes: each hook is the request's mode's (?mode=two-phase); none when
// IDEMPOTENCY=manual writes the record by hand (shop.payByHand, for bench/http.sh).
const hooks = new Map([[shop.idem.single, shop.idem.single.fastify()], [shop.idem.twoPhase, shop.idem.twoPhase.fastify()]]);
const none = Promise.resolve(); // a hook's promise: Fastify waits on it, not on a callback
const idem = Object.fromEntries(Object.keys(hooks.get(shop.idem.single)).map((name) =>
  [name, (request, ...rest) => (shop.byHand(request) ? none : hooks.get(shop.idemFor(request))[name](request, ...rest))]));

app.post('/v1/payments', { preValidation: valid, ...idem }, async (request, reply) => {
  if (shop.byHand(request)) {
    const a = await shop.payByHand(request);
    return reply.code(a.status).headers(a.headers).send(a.body);
  }
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
  console.error(err.message);
  process.exit(1);
});
