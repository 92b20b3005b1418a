
-- Tenants apart (issue 28, docs/tenants.md) ------------------------------------------------------
-- Scope prefixes, inbox consumer prefixes and outbox topic prefixes bound to roles. A name that a
-- binding matches (the longest matching prefix of its kind) may be used only by members of the
-- bound role; a name that no binding matches stays open; with no binding, nothing changes. The
-- module reads the table once per backend (src/tenants.cpp) and again when its trigger says
-- that it changed.
CREATE TABLE idempotency.bindings (
    kind   text    NOT NULL CHECK (kind IN ('scope', 'consumer', 'topic')),
    prefix text    NOT NULL,
    role   regrole NOT NULL,
    PRIMARY KEY (kind, prefix)
);
REVOKE ALL ON idempotency.bindings FROM PUBLIC;
COMMENT ON TABLE idempotency.bindings IS
    'Tenants apart: names of a kind (scope, consumer, topic) starting with prefix may be used only by members of role; the longest matching prefix wins, a name no prefix matches stays open. Change it with idem_bind / idem_unbind.';
SELECT pg_catalog.pg_extension_config_dump('idempotency.bindings', '');

-- Every change reaches every backend's cached copy through a relcache invalidation of the table.
CREATE FUNCTION idempotency.idem_bindings_changed() RETURNS pg_catalog.trigger
AS 'MODULE_PATHNAME', 'idem_bindings_changed' LANGUAGE C;
REVOKE EXECUTE ON FUNCTION idempotency.idem_bindings_changed() FROM PUBLIC;
COMMENT ON FUNCTION idempotency.idem_bindings_changed() IS
    'Statement trigger of idempotency.bindings: makes every backend read the bindings again.';
CREATE TRIGGER bindings_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idempotency.bindings
    FOR EACH STATEMENT EXECUTE FUNCTION idempotency.idem_bindings_changed();
COMMENT ON TRIGGER bindings_changed ON idempotency.bindings IS
    'Every change of the bindings reaches every session (src/tenants.cpp keeps them per backend).';

-- Binds the names of kind starting with prefix to role (a binding of the same kind and prefix is
-- moved to role). True when the binding is new. The extension's owner and superusers only
-- (writing idempotency.bindings takes its privileges).
CREATE FUNCTION idem_bind(kind pg_catalog.text, prefix pg_catalog.text, role pg_catalog.regrole)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    made boolean;
BEGIN
    IF kind IS NULL OR prefix IS NULL OR role IS NULL THEN
        RAISE EXCEPTION 'kind, prefix and role must not be null' USING ERRCODE = '22004';
    END IF;
    IF kind OPERATOR(pg_catalog.<>) ALL (ARRAY['scope', 'consumer', 'topic']) THEN
        RAISE EXCEPTION 'invalid kind "%"', kind USING ERRCODE = '22023',
            HINT = 'A binding is of kind scope, consumer or topic.';
    END IF;
    INSERT INTO idempotency.bindings AS b (kind, prefix, role) VALUES (kind, prefix, role)
    ON CONFLICT ON CONSTRAINT bindings_pkey DO UPDATE SET role = excluded.role
    RETURNING b.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid INTO made;
    RETURN made;
END
$$;
COMMENT ON FUNCTION idem_bind(text, text, regrole) IS
    'Binds the scopes, inbox consumers or outbox topics (kind) starting with prefix to role: only its members may use them. True when the binding is new, false when an existing one was moved to role.';

-- Removes the binding of kind and prefix. True when there was one.
CREATE FUNCTION idem_unbind(kind pg_catalog.text, prefix pg_catalog.text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n bigint;
BEGIN
    IF kind IS NULL OR prefix IS NULL THEN
        RAISE EXCEPTION 'kind and prefix must not be null' USING ERRCODE = '22004';
    END IF;
    DELETE FROM idempotency.bindings AS b
    WHERE b.kind OPERATOR(pg_catalog.=) idem_unbind.kind
      AND b.prefix OPERATOR(pg_catalog.=) idem_unbind.prefix;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n OPERATOR(pg_catalog.>) 0;
END
$$;
COMMENT ON FUNCTION idem_unbind(text, text) IS
    'Removes the binding of kind and prefix: its names are open again (or fall to a shorter bound prefix). True when there was one.';

REVOKE EXECUTE ON FUNCTION idem_bind(text, text, regrole), idem_unbind(text, text) FROM PUBLIC;

-- The bindings, for the extension's owner and superusers.
CREATE VIEW idem_bindings AS
    SELECT b.kind, b.prefix, b.role
    FROM idempotency.bindings AS b
    ORDER BY b.kind, b.prefix;
REVOKE ALL ON idem_bindings FROM PUBLIC;
COMMENT ON VIEW idem_bindings IS
    'The bindings of idempotency.bindings (kind, prefix, role), by kind and prefix.';

-- idem_stuck checks as its caller: from 0.8 it is C, not SECURITY DEFINER (which runs as the
-- owner and cannot tell who called), and lists only the records of scopes the caller may use.
-- CREATE OR REPLACE keeps its grants.
CREATE OR REPLACE FUNCTION idem_stuck(
    older_than interval DEFAULT '0',
    OUT scope pg_catalog.text, OUT key pg_catalog.text, OUT attempt integer,
    OUT fingerprint pg_catalog.bytea, OUT created_at pg_catalog.timestamptz,
    OUT updated_at pg_catalog.timestamptz, OUT lease_expires_at pg_catalog.timestamptz,
    OUT expires_at pg_catalog.timestamptz)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idem_stuck' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION idem_stuck(interval) IS
    'Processing records whose lease expired at least older_than ago (outcome unknown: reconcile, then complete or fail); with scope bindings, only those of scopes the caller may use.';
