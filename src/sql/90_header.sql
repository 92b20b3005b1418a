-- idempotency 0.5 -> 0.6 (assembled from src/sql/9*.sql by the Makefile into
-- idempotency--0.5--0.6.sql; CREATE EXTENSION without VERSION runs 0.1, then every upgrade
-- script up to default_version, ending with this one).
\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.6'" to load this file. \quit
