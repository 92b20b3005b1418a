
-- Inbox (0.4): the primary key leads with the event id, as the textbook processed_event table's
-- does. Most rows of an inbox share one consumer, so a key that starts with it makes every index
-- comparison compare two columns instead of one (issue 18: 8,000 of 80,000 instructions of a
-- first delivery). Lookups are by both columns, so nothing else changes. The update rebuilds the
-- index under an ACCESS EXCLUSIVE lock on idempotency.inbox (docs/operations.md, "Upgrades").
ALTER TABLE idempotency.inbox
    DROP CONSTRAINT inbox_pkey,
    ADD CONSTRAINT inbox_pkey PRIMARY KEY (event_id, consumer);
