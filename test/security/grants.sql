-- The recipe's grants (docs/operations.md "Privileges") in this database, plus EXECUTE on every
-- function and procedure of the extension for sec_all_exec. Run by a superuser.
SET client_min_messages = warning;
SET search_path = public, pg_catalog;
GRANT EXECUTE ON FUNCTION
    idempotency.idem_claim(text, text, bytea, interval, interval, boolean),
    idempotency.idem_complete(text, text, integer, text, jsonb, integer, bytea, jsonb),
    idempotency.idem_fail(text, text, integer, boolean, jsonb, integer, bytea, jsonb),
    idempotency.idem_heartbeat(text, text, integer, interval),
    idempotency.idem_lookup(text, text),
    idempotency.idem_http_answer(text, text),
    idempotency.idem_inbox_receive(text, text, bytea, boolean, text, bytea, text, bigint, interval),
    idempotency.idem_inbox_next(text, integer, interval),
    idempotency.idem_inbox_done(text, text, integer),
    idempotency.idem_inbox_done_batch(text, text[], integer[]),
    idempotency.idem_inbox_fail(text, text, integer, boolean, text, integer),
    idempotency.idem_webhook_receive(text, text, text[], text, bytea, text, text, text, boolean, text, bigint, interval, interval, timestamptz),
    idempotency.idem_webhook_receive(text, text, text[], text, text, text, text, text, boolean, text, bigint, interval, interval, timestamptz),
    idempotency.idem_outbox_emit(text, jsonb, text, text, jsonb, interval),
    idempotency.idem_outbox_emit(text, text, text, text, jsonb, interval),
    idempotency.idem_outbox_emit(text, bytea, text, text, jsonb, interval),
    idempotency.idem_outbox_next(text, integer, interval),
    idempotency.idem_outbox_done(uuid, integer, text),
    idempotency.idem_outbox_done_batch(uuid[], integer[], text),
    idempotency.idem_outbox_fail(uuid, integer, boolean, text, text),
    idempotency.idem_outbox_fail_batch(uuid[], integer[], boolean, text, text)
TO sec_idempotency_user;
GRANT EXECUTE ON FUNCTION idempotency.idem_stuck(interval) TO sec_reconciler;
GRANT EXECUTE ON FUNCTION
    idempotency.idem_purge(integer, integer, boolean, interval),
    idempotency.idem_purge_batch(text, integer, tid, boolean, interval),
    idempotency.idem_unschedule_purge(name),
    idempotency.idem_outbox_requeue(uuid, text)
TO sec_idempotency_ops;
GRANT USAGE ON SCHEMA idempotency TO sec_idempotency_ops;
GRANT SELECT ON idempotency.outbox TO sec_idempotency_ops;
GRANT EXECUTE ON PROCEDURE idempotency.idem_purge_loop(integer, interval, boolean, interval, interval, bigint)
TO sec_idempotency_ops;
DO $$
DECLARE
    p regprocedure;
BEGIN
    -- idempotency.idem_schedule_purge(text, name, integer), 0.8: (text, name, integer, name)
    FOR p IN SELECT oid::regprocedure FROM pg_proc WHERE proname = 'idem_schedule_purge' LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO sec_idempotency_ops', p);
    END LOOP;
    FOR p IN SELECT d.objid::regprocedure FROM pg_depend d
             WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
               AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency')
               AND d.classid = 'pg_proc'::regclass
    LOOP
        EXECUTE format('GRANT EXECUTE ON ROUTINE %s TO sec_all_exec', p);
    END LOOP;
END
$$;
-- every login role plants decoys in a schema of its own
CREATE SCHEMA sec_payments_service AUTHORIZATION sec_payments_service;
CREATE SCHEMA sec_reconciler AUTHORIZATION sec_reconciler;
CREATE SCHEMA sec_ops_login AUTHORIZATION sec_ops_login;
CREATE SCHEMA sec_monitoring AUTHORIZATION sec_monitoring;
CREATE SCHEMA sec_all_exec AUTHORIZATION sec_all_exec;
-- 0.8 (tenants, docs/tenants.md): each role's names are bound to it, so that every call also goes
-- through a matching binding (the battery's scopes, consumers and topics start with its tag)
DO $$
DECLARE
    r text;
    k text;
BEGIN
    IF pg_catalog.to_regprocedure('idempotency.idem_bind(text, text, regrole)') IS NULL THEN
        RETURN;
    END IF;
    FOR r IN SELECT unnest(ARRAY['sec_payments_service', 'sec_reconciler', 'sec_ops_login', 'sec_monitoring',
                                 'sec_all_exec', 'sec_dbowner'])
    LOOP
        FOREACH k IN ARRAY ARRAY['scope', 'consumer', 'topic'] LOOP
            PERFORM idempotency.idem_bind(k, r || '/', r::regrole);
        END LOOP;
    END LOOP;
    FOREACH k IN ARRAY ARRAY['scope', 'consumer', 'topic'] LOOP
        PERFORM idempotency.idem_bind(k, 'superuser/', current_user::text::regrole);
    END LOOP;
END
$$;
