-- idempotency extension install script (assembled from src/sql/*.sql by the Makefile).
\echo Use "CREATE EXTENSION idempotency" to load this file. \quit

-- Internal tables live in their own schema; PUBLIC gets no access to it. The functions run
-- their SQL as the schema's owner (see README "Privileges").
CREATE SCHEMA idempotency;
REVOKE ALL ON SCHEMA idempotency FROM PUBLIC;
COMMENT ON SCHEMA idempotency IS
    'Internal storage of the idempotency extension; use the idem_* functions, not these tables.';
