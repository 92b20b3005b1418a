-- The bare baseline of a replay: by primary key, the five columns a replay needs (the status and
-- fingerprint to decide, the stored result to answer).
\set k random(1, 100000)
SELECT status, fingerprint, resource_id, response, response_status
FROM bench_bare.replay WHERE scope = 'bench' AND key = 'r' || :k;
