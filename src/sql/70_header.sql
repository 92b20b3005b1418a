-- idempotency 0.3 -> 0.4 (assembled from src/sql/7*.sql by the Makefile into
-- idempotency--0.3--0.4.sql; CREATE EXTENSION without VERSION runs 0.1, then every upgrade
-- script up to default_version, ending with this one).
\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.4'" to load this file. \quit
