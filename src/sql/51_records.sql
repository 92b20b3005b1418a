
-- idem_claim returns a named row type ---------------------------------------------------------
-- Same columns as 0.1's OUT parameters, but a named type lets the executor take the row
-- description from the type cache instead of rebuilding it from pg_proc on every call (about 3 %
-- of a replay's backend CPU, bench/RESULTS.md "Load and cost"). A function's return type cannot be
-- altered, so idem_claim is dropped and created again here, with its comment, and the EXECUTE
-- grants it had before the update are given to the new function. The update stops with an error
-- if a view or other object depends on idem_claim (drop it first, recreate it after).
CREATE TYPE idem_claim_result AS (
    outcome          text,
    attempt          integer,
    resource_id      text,
    response         jsonb,
    response_status  integer,
    lease_expires_at timestamptz,
    expires_at       timestamptz
);
COMMENT ON TYPE idem_claim_result IS
    'Result row of idem_claim: outcome (claimed | replayed | in_progress | mismatch | reclaimed), attempt (the fencing token), the stored result of a replay (resource_id, response, response_status), lease_expires_at and expires_at.';

DO $$
DECLARE
    old_acl pg_catalog.aclitem[];
    grantee text;
BEGIN
    SELECT p.proacl INTO old_acl FROM pg_catalog.pg_proc p
    WHERE p.oid OPERATOR(pg_catalog.=)
          'idem_claim(text, text, bytea, interval, interval, boolean)'::pg_catalog.regprocedure;

    DROP FUNCTION idem_claim(text, text, bytea, interval, interval, boolean);
    CREATE FUNCTION idem_claim(
        scope text, key text, fingerprint bytea DEFAULT NULL, lease interval DEFAULT NULL,
        ttl interval DEFAULT NULL, wait boolean DEFAULT true)
    RETURNS idem_claim_result
    AS 'MODULE_PATHNAME', 'idem_claim' LANGUAGE C VOLATILE PARALLEL UNSAFE;
    COMMENT ON FUNCTION idem_claim(text, text, bytea, interval, interval, boolean) IS
        'Claims an Idempotency-Key in a scope. outcome: claimed | replayed | in_progress | mismatch | reclaimed; attempt is the fencing token.';

    -- Stateful: not executable by PUBLIC (as src/sql/50_operations.sql), then the grants it had before.
    REVOKE EXECUTE ON FUNCTION idem_claim(text, text, bytea, interval, interval, boolean) FROM PUBLIC;
    FOR grantee IN
        SELECT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                    ELSE pg_catalog.quote_ident(r.rolname) END
               OPERATOR(pg_catalog.||) CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END
        FROM pg_catalog.aclexplode(old_acl) a
        LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
        WHERE a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
          AND a.grantee OPERATOR(pg_catalog.<>) a.grantor
    LOOP
        EXECUTE 'GRANT EXECUTE ON FUNCTION idem_claim(text, text, bytea, interval, interval, boolean) TO '
                OPERATOR(pg_catalog.||) grantee;
    END LOOP;
END $$;
