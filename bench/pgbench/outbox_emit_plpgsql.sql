-- For information: the emit of bench/plpgsql_outbox.sql (key lock, sequence, ON CONFLICT).
\set k random(1, 100000)
SELECT bench_o.emit('orders', '{"order":"o-1842","amount":4200,"currency":"EUR","customer":"c-77"}'::jsonb, 'k' || :k);
