-- idempotency 0.4 -> 0.5 (assembled from src/sql/8*.sql by the Makefile into
-- idempotency--0.4--0.5.sql; CREATE EXTENSION without VERSION runs 0.1, then every upgrade
-- script up to default_version, ending with this one).
\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.5'" to load this file. \quit
