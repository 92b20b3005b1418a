-- Objects for bench/inbox.sh (run once in a fresh database).
CREATE EXTENSION idempotency;
\ir ../plpgsql_queue.sql

-- The textbook dedup table, the baseline of idem_inbox_receive.
CREATE SCHEMA bench_bare;
CREATE TABLE bench_bare.processed_event (
    event_id       text,
    consumer_group text,
    processed_at   timestamptz DEFAULT now(),
    PRIMARY KEY (event_id, consumer_group)
);
-- For information (NOTES=1): the rows idem_inbox_receive writes, inserted by hand into a table
-- of the same definition as idempotency.inbox (its partial queue index included), which splits
-- the cost between the row and the function.
CREATE TABLE bench_bare.inbox (LIKE idempotency.inbox INCLUDING ALL) WITH (fillfactor = 90);
