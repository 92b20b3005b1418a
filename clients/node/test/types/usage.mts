// The declarations as an ES module TypeScript user sees them (tsc --noEmit -p test/types).
import idempotency, { idempotency as named, type Options } from 'idempotency-pg';

declare const pool: Options['pool'];
const options: Options = { pool, principal: (req) => req.headers['x-user'] as string, mode: 'single' };
export const a = idempotency(options);
export const b = named({ pool, sharedKeySpace: true });
await a.ready();
app();
function app(): void {
  // @ts-expect-error: an unknown option
  idempotency({ pool, sharedKeySpace: true, lease: 30 });
}
