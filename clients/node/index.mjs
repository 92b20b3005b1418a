// The ES module entry of idempotency-pg: the CommonJS build, re-exported.
import cjs from './index.js';

export const { idempotency } = cjs;
export default cjs.idempotency;
