-- The same event cycle as queue_idem.sql through the hand-written PL/pgSQL queue
-- (bench/plpgsql_queue.sql): same statements, same transactions, same payload.
\set k random(1, 9000000000000000000)
SELECT bench_q.receive('billing', 'q' || :k, 'order.paid', '\x7b226f72646572223a226f2d31383432222c22616d6f756e74223a343230302c2263757272656e6379223a22455552222c22637573746f6d6572223a22632d3737227d'::bytea);
SELECT event_id, event_type, payload, attempt FROM bench_q.next('billing', 1) \gset
SELECT bench_q.done('billing', :event_id, :attempt);
