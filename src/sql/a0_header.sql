-- idempotency 0.6 -> 0.7 (assembled from src/sql/a*.sql by the Makefile into
-- idempotency--0.6--0.7.sql; CREATE EXTENSION without VERSION runs 0.1, then every upgrade
-- script up to default_version, ending with this one).
\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.7'" to load this file. \quit
