-- The bare baseline of a redelivery (inbox_receive_again.sql): the textbook insert of one of 50
-- event ids, which after the first calls of a run finds the row and writes nothing.
\set k random(1, 50)
INSERT INTO bench_bare.processed_event (event_id, consumer_group) VALUES ('a' || :k, 'billing')
ON CONFLICT DO NOTHING;
