-- For information (NOTES=1 bench/load.sh): an older replay baseline, the whole row
-- (select_replay.sql, the five columns a replay needs, is the baseline of record).
\set k random(1, 100000)
SELECT * FROM bench_bare.replay WHERE scope = 'bench' AND key = 'r' || :k;
