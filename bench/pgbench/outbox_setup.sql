-- Objects for bench/outbox.sh (run once in a fresh database).
CREATE EXTENSION idempotency;
\ir ../plpgsql_outbox.sql

-- The baseline of idem_outbox_emit: the same row inserted by hand into a plain table of the same
-- definition as idempotency.outbox (columns, CHECK, primary key, the three partial indexes,
-- fillfactor), seq from a sequence of its own as a column DEFAULT, no lock.
CREATE SCHEMA bench_bare;
CREATE SEQUENCE bench_bare.outbox_seq;
CREATE TABLE bench_bare.outbox (LIKE idempotency.outbox INCLUDING ALL) WITH (fillfactor = 50);
ALTER TABLE bench_bare.outbox ALTER COLUMN seq SET DEFAULT nextval('bench_bare.outbox_seq');
