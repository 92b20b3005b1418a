-- Errors raised inside the extension's own SQL statements: the CONTEXT lines a caller
-- sees never show the internal statement text (SPI's 'SQL statement "INSERT INTO
-- idempotency..."'). The errors here are caused by the operator's own objects on the internal
-- tables (a unique index, a CHECK, a trigger) or by the caller's statement_timeout; the caller's
-- own lines (PL/pgSQL, a trigger's statements) stay. psql prints each error in full.
\set VERBOSITY default
\set SHOW_CONTEXT errors
SET client_min_messages = warning;

-- inbox: a unique index of the operator's (23505; the extension's own conflicts never escape)
CREATE UNIQUE INDEX ctx_one_hash ON idempotency.inbox (payload_hash);
SELECT idempotency.idem_inbox_receive('ctx', 'h-1', sha256('{}'));
SELECT idempotency.idem_inbox_receive('ctx', 'h-2', sha256('{}'));
-- the same through idempotency.idem_webhook_receive (its payload_hash is sha256 of the body), called from
-- PL/pgSQL: the caller's lines stay
DO $$
BEGIN
    PERFORM idempotency.idem_webhook_receive('ctx', 'standard', ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
        'h-3', '{}', idempotency.idem_webhook_sign_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'h-3',
        '1614265330', '{}'), '1614265330', now => to_timestamp(1614265330));
END $$;
DROP INDEX idempotency.ctx_one_hash;

-- what a handler reads with GET STACKED DIAGNOSTICS: a CHECK constraint refuses an event
ALTER TABLE idempotency.inbox ADD CONSTRAINT ctx_no_x CHECK (event_id NOT LIKE 'x%');
DO $$
DECLARE
    ctx text;
BEGIN
    PERFORM idempotency.idem_inbox_receive('ctx', 'x-1');
EXCEPTION WHEN check_violation THEN
    GET STACKED DIAGNOSTICS ctx = PG_EXCEPTION_CONTEXT;
    RAISE WARNING 'caught %: context %', SQLSTATE, coalesce(ctx, '<none>');
END $$;
ALTER TABLE idempotency.inbox DROP CONSTRAINT ctx_no_x;

-- inbox: the caller's statement_timeout fires in a trigger's pg_sleep; the trigger's own lines
-- (its statement and its PL/pgSQL line) stay, the inbox's INSERT does not show
CREATE FUNCTION ctx_slow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_sleep(30);
    RETURN NEW;
END $$;
CREATE TRIGGER ctx_slow BEFORE INSERT ON idempotency.inbox FOR EACH ROW EXECUTE FUNCTION ctx_slow();
SET statement_timeout = '200ms';
SELECT idempotency.idem_inbox_receive('ctx', 'slow-1');
RESET statement_timeout;
DROP TRIGGER ctx_slow ON idempotency.inbox;

-- records: idem_claim's insert on its SQL path (another index makes the direct path step aside)
CREATE UNIQUE INDEX ctx_one_fingerprint ON idempotency.records (fingerprint);
SELECT outcome FROM idempotency.idem_claim('ctx', 'k-1', '\x01');
SELECT outcome FROM idempotency.idem_claim('ctx', 'k-2', '\x01');
DROP INDEX idempotency.ctx_one_fingerprint;
-- idem_complete's UPDATE
CREATE UNIQUE INDEX ctx_one_status ON idempotency.records (response_status);
SELECT outcome FROM idempotency.idem_claim('ctx', 'k-3');
SELECT idempotency.idem_complete('ctx', 'k-1', 1, 'r', '{}', 201);
SELECT idempotency.idem_complete('ctx', 'k-3', 1, 'r', '{}', 201);
DROP INDEX idempotency.ctx_one_status;

-- lifecycle: a trigger that refuses deletes (P0001 from the trigger, raised inside the purge)
UPDATE idempotency.records SET expires_at = now() - interval '1 day' WHERE scope = 'ctx';
CREATE FUNCTION ctx_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'records are kept for the audit';
END $$;
CREATE TRIGGER ctx_keep BEFORE DELETE ON idempotency.records FOR EACH ROW EXECUTE FUNCTION ctx_keep();
SELECT * FROM idempotency.idem_purge_batch('records', 10);
DROP TRIGGER ctx_keep ON idempotency.records;

-- nothing from the refused calls was written: h-1, k-1 (completed), k-3 (still processing)
SELECT consumer, event_id FROM idempotency.inbox WHERE consumer = 'ctx';
SELECT key, status, response_status FROM idempotency.records WHERE scope = 'ctx' ORDER BY key;
DELETE FROM idempotency.records WHERE scope = 'ctx';
DELETE FROM idempotency.inbox WHERE consumer = 'ctx';
