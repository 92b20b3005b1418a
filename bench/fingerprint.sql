-- SQL benchmark data for bench/fingerprint.sh: 20,000 jsonb request payloads of about 1 KiB.
DROP TABLE IF EXISTS fp_bench;
CREATE TABLE fp_bench AS
SELECT i AS id, jsonb_build_object(
    'amount', round((random() * 100000)::numeric, 2),
    'currency', (ARRAY['EUR', 'USD', 'GBP'])[1 + i % 3],
    'customer', jsonb_build_object('id', 'cus_' || md5(i::text), 'email', 'user' || i || '@example.com',
                                   'name', 'Customer ' || i),
    'metadata', jsonb_build_object('order', i, 'channel', 'web', 'trace_id', md5((i * 7)::text)),
    'capture', i % 2 = 0,
    'description', NULL::text,
    'items', (SELECT jsonb_agg(jsonb_build_object('sku', 'SKU-' || (1000 + j), 'qty', 1 + j % 7,
                                                  'price', round((random() * 500)::numeric, 2),
                                                  'name', 'Item number ' || j))
              FROM generate_series(1, 9) j)) AS j
FROM generate_series(1, 20000) i;
-- The same bodies as stored request text (what a handler that keeps the raw body has).
ALTER TABLE fp_bench ADD COLUMN t text;
UPDATE fp_bench SET t = j::text;
VACUUM ANALYZE fp_bench;
SELECT count(*) AS rows, round(avg(length(j::text))) AS avg_text_bytes,
       round(avg(pg_column_size(j))) AS avg_jsonb_bytes FROM fp_bench;
