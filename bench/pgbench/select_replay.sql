-- The bare baseline of a replay: the same row by primary key.
\set k random(1, 100000)
SELECT * FROM bench_bare.replay WHERE scope = 'bench' AND key = 'r' || :k;
