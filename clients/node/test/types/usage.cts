// The declarations as a CommonJS TypeScript user sees them (tsc --noEmit -p test/types).
import idempotency = require('idempotency-pg');

declare const pool: idempotency.PoolLike;
const idem: idempotency.Idempotency = idempotency({
  pool,
  principal: (req) => req.headers['x-user'] as string | undefined,
  mode: 'two-phase',
  leaseMs: 30_000,
  ttlMs: 86_400_000,
  headers: ['Content-Type', 'Location'],
});
const same: idempotency.Idempotency = idempotency.idempotency({ pool, sharedKeySpace: true });
export const route = idem.express(async (req, res) => {
  const i: idempotency.Idem = req.idem;
  i.resourceId = 'pay_1';
  await i.query('SELECT 1');
  res.status(201).json({ key: i.key, attempt: i.attempt, reclaimed: i.reclaimed });
});
export const hooks: idempotency.FastifyRouteHooks = same.fastify();
export const ready: Promise<void> = idem.ready();
// @ts-expect-error: an unknown mode
idempotency({ pool, sharedKeySpace: true, mode: 'twophase' });
// @ts-expect-error: the lease in milliseconds, a number
idempotency({ pool, sharedKeySpace: true, leaseMs: '30s' });
