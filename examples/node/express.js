'use strict';
// The payment service of examples/README.md on Express 5, a user of the idempotency-pg package
// (clients/node): the package claims the Idempotency-Key, gives the handler its transaction
// (req.idem), stores the handler's own answer and replays it.
const express = require('express');
const idempotency = require('../../clients/node');
const shop = require('./shop');

const app = express();
const raw = express.raw({ type: () => true }); // the exact body bytes: the fingerprint's input
const idem = idempotency.express(shop.pool, shop.options);
const valid = (req, res, next) => {
  const { order, error } = shop.order(req);
  if (error) return res.status(400).json({ error });
  req.order = order;
  return next();
};

app.post('/v1/payments', raw, valid, idem, async (req, res) => {
  const providerRef = req.idem.mode === 'two-phase' ? await shop.charge(req.idem, req.order) : null;
  const payment = await shop.insertPayment(req.idem, req.order, providerRef);
  shop.throwFor(payment);
  res.status(201).location(`/v1/payments/${payment.id}`).json(payment);
});

app.post('/v1/webhooks/provider', raw, async (req, res) => {
  const { status, body } = await shop.receiveWebhook(req.headers, req.body);
  res.status(status).json(body);
});

app.get('/healthz', (req, res) => res.type('text/plain').send('ok'));

app.listen(shop.PORT, '127.0.0.1', shop.listening);
