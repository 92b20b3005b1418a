-- The same relay cycle through the hand-written PL/pgSQL outbox (bench/plpgsql_outbox.sql).
SELECT count(bench_o.done(n.event_id, n.attempt)) FROM bench_o.next('orders', 100) n;
