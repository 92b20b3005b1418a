'use strict';
// idempotency-pg: Idempotency-Key middleware for Express and Fastify on node-postgres and the
// idempotency extension (README.md).
const { express } = require('./lib/express');
const { fastify } = require('./lib/fastify');
const { errorAnswer, retryable } = require('./lib/core');

module.exports = { express, fastify, errorAnswer, retryable };
