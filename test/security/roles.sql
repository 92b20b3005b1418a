-- The roles of docs/operations.md "Privileges" (prefixed sec_, so that the docs stage's own run of
-- the recipe never meets them), a role with EXECUTE on everything, and a database owner. Run by a
-- superuser in the postgres database; the stage drops the databases first.
SET client_min_messages = warning;
DROP ROLE IF EXISTS sec_payments_service, sec_reconciler, sec_ops_login, sec_monitoring,
    sec_all_exec, sec_dbowner, sec_idempotency_user, sec_idempotency_ops;
CREATE ROLE sec_idempotency_user NOLOGIN;
CREATE ROLE sec_payments_service LOGIN IN ROLE sec_idempotency_user;
CREATE ROLE sec_reconciler LOGIN IN ROLE sec_idempotency_user;
CREATE ROLE sec_idempotency_ops NOLOGIN;
CREATE ROLE sec_ops_login LOGIN IN ROLE sec_idempotency_ops;
CREATE ROLE sec_monitoring LOGIN IN ROLE pg_monitor;
CREATE ROLE sec_all_exec LOGIN;
CREATE ROLE sec_dbowner LOGIN;
