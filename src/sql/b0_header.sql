-- idempotency 0.7 -> 0.8 (assembled from src/sql/b*.sql by the Makefile into
-- idempotency--0.7--0.8.sql; CREATE EXTENSION without VERSION runs 0.1, then every upgrade
-- script up to default_version, ending with this one). 0.8 is the security release (issue 28).
\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.8'" to load this file. \quit
