
-- Inbox (0.4): the primary key leads with the event id, as the textbook processed_event table's
-- does. Most rows of an inbox share one consumer, so a key that starts with it makes every index
-- comparison compare two columns instead of one (issue 18: 8,000 of 80,000 instructions of a
-- first delivery). Lookups are by both columns, so nothing else changes. The update rebuilds the
-- index under an ACCESS EXCLUSIVE lock on idempotency.inbox (docs/operations.md, "Upgrades").
ALTER TABLE idempotency.inbox
    DROP CONSTRAINT inbox_pkey,
    ADD CONSTRAINT inbox_pkey PRIMARY KEY (event_id, consumer);

-- The queue index ends with the event id, the tie-breaker of idem_inbox_next's ORDER BY
-- received_at, event_id: the index scan then yields the queue in that order and the LIMIT stops
-- after the batch, where 0.3's (consumer, received_at) needed an incremental sort that reads at
-- least 32 entries per call (issue 18). Rebuilt under the same lock as the primary key.
DROP INDEX idempotency.inbox_queue;
CREATE INDEX inbox_queue ON idempotency.inbox (consumer, received_at, event_id)
    WHERE status IN ('received', 'processing');
COMMENT ON INDEX idempotency.inbox_queue IS
    'The work queue of idem_inbox_next: queued and leased events per consumer in arrival order (event id breaks ties).';
