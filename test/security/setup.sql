-- The security stage's bookkeeping in one database (run by a superuser after CREATE EXTENSION):
-- the log every decoy writes to, the calls' outcomes, and the helpers the batteries use. Every
-- name here is qualified and the helpers that compare pin their search path, so the stage's own
-- text never resolves a decoy: a decoy that fires was reached through the extension.
SET client_min_messages = warning;
DROP TABLE IF EXISTS public.attack_log, public.attack_calls, public.attack_decoys;
-- one row per decoy firing: who planted it, who ran it, during which call
CREATE TABLE public.attack_log (
    planter pg_catalog.name NOT NULL,
    ran_as pg_catalog.name NOT NULL,
    session_as pg_catalog.name NOT NULL,
    decoy pg_catalog.text NOT NULL,
    call pg_catalog.text,
    at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp());
-- one row per call a battery made
CREATE TABLE public.attack_calls (
    role pg_catalog.name NOT NULL,
    session pg_catalog.text NOT NULL,
    call pg_catalog.text NOT NULL,
    got pg_catalog.text,
    want pg_catalog.text,
    verdict pg_catalog.text NOT NULL,   -- ok | unreachable | WRONG
    error pg_catalog.text);
-- one row per decoy planted
CREATE TABLE public.attack_decoys (
    planter pg_catalog.name NOT NULL,
    decoy pg_catalog.text NOT NULL);
GRANT SELECT, INSERT ON public.attack_log, public.attack_calls, public.attack_decoys TO PUBLIC;

-- What every decoy calls: records the firing and, when it runs as a superuser that is not its
-- planter, does what an attacker would (ALTER ROLE planter SUPERUSER).
CREATE OR REPLACE FUNCTION public.attack_note(planter pg_catalog.name, decoy pg_catalog.text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO public.attack_log (planter, ran_as, session_as, decoy, call)
    VALUES (planter, current_user, session_user, decoy,
            pg_catalog.current_setting('attack.call', true));
    IF current_user OPERATOR(pg_catalog.<>) planter AND
       (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user) THEN
        BEGIN
            EXECUTE pg_catalog.format('ALTER ROLE %I SUPERUSER', planter);
        EXCEPTION WHEN OTHERS THEN
            NULL;
        END;
    END IF;
END
$$;

-- Records a call's outcome: ok when it is want; unreachable when the role may not execute the
-- call's function (or read its view) and got 42501; WRONG otherwise.
-- needs: the other functions (or relations, schema-qualified) the call depends on, comma-separated:
-- when the role may not use one of them, the call is unreachable whatever it answered. A function
-- is a name (any overload will do) or one overload's signature (idempotency.idem_http_answer(text,text)).
CREATE OR REPLACE FUNCTION public.attack_reachable(what pg_catalog.text)
RETURNS pg_catalog.bool LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN pg_catalog.strpos(what, '(') OPERATOR(pg_catalog.>) 0
                THEN pg_catalog.has_function_privilege(what, 'EXECUTE')
                WHEN pg_catalog.strpos(what, '.') OPERATOR(pg_catalog.>) 0
                THEN pg_catalog.has_schema_privilege(pg_catalog.split_part(what, '.', 1), 'USAGE')
                     AND pg_catalog.has_table_privilege(what, 'SELECT')
                ELSE EXISTS (SELECT FROM pg_catalog.pg_proc p
                             WHERE p.proname OPERATOR(pg_catalog.=) what
                               AND p.pronamespace OPERATOR(pg_catalog.=) 'idempotency'::pg_catalog.regnamespace
                               AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE'))
                     OR (pg_catalog.to_regclass(pg_catalog.concat('idempotency.', what)) IS NOT NULL
                         AND pg_catalog.has_table_privilege(pg_catalog.concat('idempotency.', what), 'SELECT'))
           END
$$;
CREATE OR REPLACE FUNCTION public.attack_record(call pg_catalog.text, got pg_catalog.text,
                                                want pg_catalog.text, error pg_catalog.text,
                                                needs pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    verdict pg_catalog.text;
BEGIN
    IF got OPERATOR(pg_catalog.=) 'ERROR 42501' AND NOT public.attack_reachable(pg_catalog.split_part(call, ' ', 1)) THEN
        verdict := 'unreachable';
    ELSIF needs IS NOT NULL AND EXISTS (SELECT FROM pg_catalog.unnest(pg_catalog.string_to_array(needs, ',')) n
                                        WHERE NOT public.attack_reachable(n)) THEN
        verdict := 'unreachable';
    ELSIF COALESCE(got OPERATOR(pg_catalog.=) ANY (pg_catalog.string_to_array(want, '|')), got IS NULL AND want IS NULL) THEN
        verdict := 'ok';
    ELSE
        verdict := 'WRONG';
    END IF;
    INSERT INTO public.attack_calls (role, session, call, got, want, verdict, error)
    VALUES (current_user, pg_catalog.current_setting('attack.tag'), call, got, want, verdict, error);
    PERFORM pg_catalog.set_config('attack.call', '', false);
    RETURN pg_catalog.concat(verdict, ': ', call, ' -> ', got,
                             CASE WHEN verdict OPERATOR(pg_catalog.=) 'WRONG'
                                  THEN pg_catalog.concat(' (want ', want, ') ', error) END);
END
$$;

-- Runs one call of a battery: sql (with @T@ replaced by the session's tag) under the CALLER's
-- search path (no SET clause: the point is the caller's path), its first column as text, or
-- "ERROR sqlstate".
CREATE OR REPLACE FUNCTION public.attack_run(call pg_catalog.text, sql pg_catalog.text,
                                             want pg_catalog.text, needs pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.text LANGUAGE plpgsql AS $$
DECLARE
    got pg_catalog.text;
    error pg_catalog.text;
BEGIN
    PERFORM pg_catalog.set_config('attack.call', call, false);
    BEGIN
        EXECUTE pg_catalog.replace(sql, '@T@', pg_catalog.current_setting('attack.tag')) INTO got;
    EXCEPTION WHEN OTHERS THEN
        got := pg_catalog.concat('ERROR ', SQLSTATE);
        error := SQLERRM;
    END;
    RETURN public.attack_record(call, got, want, error, needs);
END
$$;
