
-- Inbox (0.5): the same retries as the outbox (src/leased_queue.cpp). A retryable failure queues
-- the event again from available_at (exponential backoff with jitter, idempotency.retry_backoff_*)
-- instead of at once, and max_attempts defaults to idempotency.max_attempts: an event whose
-- worker fails, or dies and lets the lease expire, on every attempt is dead (failed) after that
-- many attempts instead of being handed out for ever. Adding a column without a default
-- rewrites nothing. IF NOT EXISTS for Citus: on a distributed inbox, ALTER EXTENSION UPDATE runs
-- this script on every worker too, and the coordinator's ALTER TABLE then reaches the workers'
-- tables again (without it, 42701 on a worker and the update fails; test/stages/citus.sh).
ALTER TABLE idempotency.inbox ADD COLUMN IF NOT EXISTS available_at timestamptz;
COMMENT ON COLUMN idempotency.inbox.available_at IS
    'A queued (received) event is not handed out before this time (a retry''s backoff); NULL: at once.';
COMMENT ON FUNCTION idem_inbox_fail(text, text, integer, boolean, text, integer) IS
    'Records a failed handling of a leased event; returns received (queued again after a backoff) when retryable and below max_attempts (NULL: idempotency.max_attempts), else failed (dead, kept for inspection).';
