-- Memory after huge documents: the buffers a ~15 MB document needs are freed after each call,
-- and the backend's heap is trimmed at the end of the transaction, so its resident size comes
-- back (VmRSS of this backend, from /proc; Linux).
CREATE FUNCTION pg_temp.rss_kb() RETURNS bigint LANGUAGE sql AS $$
    SELECT (regexp_match(pg_read_file('/proc/' || pg_backend_pid() || '/status'),
                         'VmRSS:\s+(\d+)'))[1]::bigint
$$;
CREATE TEMP TABLE mem_doc AS
SELECT '{"items": [' || string_agg(format('{"sku": "SKU-%s", "qty": %s, "price": %s.25, '
                                          '"name": "Item number %s"}', i, i % 7, i % 50, i),
                                   ', ') || ']}' AS doc
FROM generate_series(1, 200000) i;
SELECT length(doc) > 14000000 AS about_15_mb FROM mem_doc;
SELECT pg_temp.rss_kb() AS start_kb \gset
SELECT length(idempotency.idem_canonical_json(doc)) FROM mem_doc;
SELECT length(idempotency.idem_fingerprint(doc)) FROM mem_doc;
SELECT length(idempotency.idem_canonical_json(doc::jsonb)) FROM mem_doc;
SELECT pg_temp.rss_kb() - :start_kb < 20000 AS rss_back_within_20_mb;
-- A call that fails half-way leaves its buffers to the next call, which frees them.
SELECT pg_temp.rss_kb() AS start_kb \gset
SELECT length(idempotency.idem_canonical_json(doc || ' x')) FROM mem_doc;
SELECT idempotency.idem_canonical_json('[1]');
SELECT pg_temp.rss_kb() - :start_kb < 20000 AS rss_back_after_an_error;
