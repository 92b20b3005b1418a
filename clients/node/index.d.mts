// The ES module entry's types (index.mjs): the CommonJS declarations, re-exported.
import cjs = require('./index.js');

export type { Options, Idempotency, Idem, Mode, PoolLike, RequestLike, ExpressHandler, ExpressMiddleware,
  FastifyRouteHooks } from './index.js';
export declare const idempotency: typeof cjs.idempotency;
export default idempotency;
