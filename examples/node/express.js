'use strict';
// The payment service of examples/README.md on Express 5, a user of the idempotency-pg package
// (clients/node): idem.express(handler) reads the Idempotency-Key, asks the database
// (idem_http_begin), gives the handler its transaction (req.idem), and stores or releases the
// handler's answer as the database decides (idem_http_end).
const express = require('express');
const shop = require('./shop');

const app = express();
const raw = express.raw({ type: () => true }); // the exact body bytes: the fingerprint's input
const valid = (req, res, next) => {
  const { order, error } = shop.order(req);
  if (error) return res.status(400).json({ error });
  req.order = order;
  return next();
};

async function pay(req, res) {
  const providerRef = req.idem.mode === 'two-phase' ? await shop.charge(req.idem, req.order) : null;
  const payment = await shop.insertPayment(req.idem, req.order, providerRef);
  shop.throwFor(payment);
  res.status(201).location(`/v1/payments/${payment.id}`).json(payment);
}
const routes = { single: shop.idem.single.express(pay), twoPhase: shop.idem.twoPhase.express(pay) };
// IDEMPOTENCY=manual: the exactly-once record by hand (shop.payByHand), for bench/http.sh.
const byHand = (req, res, next) => shop.payByHand(req).then((a) => res.status(a.status).set(a.headers).send(a.body), next);
app.post('/v1/payments', raw, valid, (req, res, next) => {
  if (shop.byHand(req)) return byHand(req, res, next);
  return (shop.idemFor(req) === shop.idem.twoPhase ? routes.twoPhase : routes.single)(req, res, next);
});

app.post('/v1/webhooks/provider', raw, async (req, res) => {
  const { status, body } = await shop.receiveWebhook(req.headers, req.body);
  res.status(status).json(body);
});

app.get('/healthz', (req, res) => res.type('text/plain').send('ok'));

shop.ready().then(() => app.listen(shop.PORT, '127.0.0.1', shop.listening), (err) => {
  console.error(err.message);
  process.exit(1);
});
