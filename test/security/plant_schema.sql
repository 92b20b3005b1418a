-- Run by a role in its own session (psql -v schema=S): plants decoys in schema S, which the role's
-- sessions put AHEAD of pg_catalog (SET search_path = S, pg_catalog, public; or, for the database
-- owner, ALTER DATABASE ... SET search_path). Each decoy calls public.attack_note(planter, what)
-- and then does what the real object does, so the extension keeps working when it is fooled.
--  - functions: every pg_catalog function of the names below that plpgsql can wrap (no "any",
--    internal or cstring arguments, no set-returning ones), same name and argument types;
--  - aggregates count(*), count, max, min, sum, bool_or, bool_and, string_agg, array_agg over
--    the usual types;
--  - operators: every binary pg_catalog operator of the names below between the usual types;
--  - types: a domain over each usual type, of the same name, whose CHECK fires the decoy, and a
--    composite type named record.
SET client_min_messages = warning;
SET search_path = pg_catalog, pg_temp;
SELECT pg_catalog.set_config('attack.schema', :'schema', false) \g /dev/null
DO $plant$
DECLARE
    s text := current_setting('attack.schema');
    me name := current_user;
    f record;
    n integer := 0;
    args text;
    call_args text;
    sig text;
    body text;
    types text[] := ARRAY['text', 'bytea', 'tid', 'uuid', 'jsonb', 'json', 'timestamptz', 'timestamp',
                          'int2', 'int4', 'int8', 'bool', 'name', 'interval', 'numeric', 'float8',
                          'oid', 'regclass', 'varchar', 'bpchar', 'date', 'regproc', 'regprocedure',
                          'regnamespace', 'regrole', 'char'];
    fnames text[] := ARRAY[
        'now', 'clock_timestamp', 'statement_timestamp', 'transaction_timestamp', 'timezone',
        'to_timestamp', 'date_part', 'date_trunc', 'age', 'make_interval', 'justify_interval', 'isfinite',
        'format', 'array_length', 'array_position', 'array_fill', 'array_append', 'array_cat',
        'array_to_string', 'string_to_array', 'cardinality', 'array_lower', 'array_upper', 'array_ndims',
        'nextval', 'currval', 'setval', 'to_regclass', 'to_regproc', 'to_regprocedure',
        'to_regnamespace', 'to_regrole', 'to_regtype', 'set_config', 'current_setting', 'pg_sleep',
        'current_database', 'current_schema', 'version', 'pg_backend_pid', 'pg_notify',
        'pg_advisory_xact_lock', 'pg_try_advisory_xact_lock', 'pg_advisory_lock', 'hashtext',
        'hashtextextended', 'lower', 'upper', 'length', 'octet_length', 'char_length', 'convert_from',
        'convert_to', 'encode', 'decode', 'sha256', 'sha224', 'sha384', 'sha512', 'md5', 'left', 'right',
        'substr', 'strpos', 'starts_with', 'replace', 'split_part', 'regexp_replace', 'regexp_match',
        'btrim', 'ltrim', 'rtrim', 'repeat', 'chr', 'ascii', 'quote_ident', 'quote_literal',
        'quote_nullable', 'jsonb_typeof', 'jsonb_strip_nulls', 'jsonb_set', 'jsonb_extract_path_text',
        'jsonb_pretty', 'to_jsonb', 'to_json', 'row_to_json', 'jsonb_object_field', 'jsonb_exists',
        'gen_random_uuid', 'abs', 'trunc', 'floor', 'ceil', 'round', 'random', 'mod', 'int4', 'int8',
        'int2', 'text', 'bool', 'numeric', 'float8', 'timestamptz', 'interval', 'has_function_privilege',
        'has_table_privilege', 'has_schema_privilege', 'pg_has_role', 'pg_get_indexdef',
        'pg_get_userbyid', 'pg_relation_size', 'pg_table_size', 'txid_current', 'pg_current_xact_id',
        'num_nulls', 'num_nonnulls', 'obj_description', 'col_description', 'shard_name',
        'run_command_on_workers', 'array_remove', 'array_replace', 'width_bucket', 'byteaeq', 'texteq',
        'int4eq', 'int8eq', 'tideq', 'uuid_eq', 'timestamptz_lt', 'timestamptz_le', 'int4pl', 'int8pl',
        'textcat', 'tidgt', 'tidlt', 'max', 'min'];
    opnames text[] := ARRAY['=', '<>', '<', '>', '<=', '>=', '+', '-', '*', '/', '||', '~', '~~',
                            '!~', '@>', '<@', '&&', '->', '->>', '#>', '#>>', '?', '%'];
BEGIN
    -- functions
    FOR f IN
        SELECT p.oid, p.proname, p.proargtypes, p.prorettype, p.provariadic, p.pronargs
        FROM pg_proc p
        WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname = ANY (fnames)
          AND p.prokind = 'f' AND NOT p.proretset
          AND NOT EXISTS (SELECT FROM unnest(p.proargtypes::oid[] || p.prorettype) t
                          WHERE t IN ('"any"'::regtype, 'internal'::regtype, 'cstring'::regtype,
                                      'trigger'::regtype, 'event_trigger'::regtype,
                                      'language_handler'::regtype, 'anyenum'::regtype,
                                      'anyrange'::regtype, 'anymultirange'::regtype,
                                      'anycompatiblerange'::regtype, 'anycompatiblemultirange'::regtype))
          AND (p.prorettype NOT IN ('anyelement'::regtype, 'anyarray'::regtype, 'anynonarray'::regtype,
                                    'anycompatible'::regtype, 'anycompatiblearray'::regtype,
                                    'anycompatiblenonarray'::regtype)
               OR p.pronargs > 0)
        ORDER BY p.oid
    LOOP
        SELECT string_agg(format_type(t, NULL), ', ' ORDER BY o),
               string_agg(CASE WHEN o = f.pronargs AND f.provariadic <> 0 THEN 'VARIADIC ' ELSE '' END
                          || '$' || o, ', ' ORDER BY o)
            INTO args, call_args
        FROM unnest(f.proargtypes::oid[]) WITH ORDINALITY AS a(t, o);
        IF f.provariadic <> 0 THEN
            args := regexp_replace(args, '([^,]+)$', 'VARIADIC \1');
        END IF;
        sig := format('%I.%I(%s)', s, f.proname, coalesce(args, ''));
        body := format('BEGIN PERFORM public.attack_note(%L, %L); RETURN pg_catalog.%I(%s); END',
                       me, 'function ' || sig, f.proname, coalesce(call_args, ''));
        BEGIN
            EXECUTE format('CREATE FUNCTION %s RETURNS %s LANGUAGE plpgsql AS %L',
                           sig, format_type(f.prorettype, NULL), body);
            INSERT INTO public.attack_decoys VALUES (me, 'function ' || sig);
            n := n + 1;
        EXCEPTION WHEN duplicate_function OR invalid_function_definition OR datatype_mismatch
                       OR feature_not_supported OR wrong_object_type OR undefined_object THEN
            NULL;
        END;
    END LOOP;
    -- aggregates: a state function that fires the decoy and keeps a plausible state
    EXECUTE format('CREATE FUNCTION %I.attack_count_star(bigint) RETURNS bigint LANGUAGE plpgsql AS %L', s,
                   format('BEGIN PERFORM public.attack_note(%L, %L); RETURN $1 + 1; END', me,
                          format('aggregate %I.count(*)', s)));
    EXECUTE format('CREATE AGGREGATE %I.count(*) (SFUNC = %I.attack_count_star, STYPE = bigint, INITCOND = ''0'')', s, s);
    INSERT INTO public.attack_decoys VALUES (me, format('aggregate %I.count(*)', s));
    n := n + 1;
    FOR f IN SELECT unnest(ARRAY['tid', 'int4', 'int8', 'timestamptz', 'text', 'interval', 'numeric', 'uuid', 'bool']) AS t
    LOOP
        EXECUTE format('CREATE FUNCTION %I.attack_max_%s(%s, %s) RETURNS %s LANGUAGE plpgsql AS %L', s, f.t, f.t, f.t, f.t,
                       format('BEGIN PERFORM public.attack_note(%L, %L); RETURN CASE WHEN $1 IS NULL THEN $2 ELSE $1 END; END',
                              me, format('aggregate %I.max/min(%s)', s, f.t)));
        EXECUTE format('CREATE AGGREGATE %1$I.max(%2$s) (SFUNC = %1$I.attack_max_%2$s, STYPE = %2$s)', s, f.t);
        EXECUTE format('CREATE AGGREGATE %1$I.min(%2$s) (SFUNC = %1$I.attack_max_%2$s, STYPE = %2$s)', s, f.t);
        EXECUTE format('CREATE FUNCTION %I.attack_count_%s(bigint, %s) RETURNS bigint LANGUAGE plpgsql AS %L', s, f.t, f.t,
                       format('BEGIN PERFORM public.attack_note(%L, %L); RETURN $1 + 1; END',
                              me, format('aggregate %I.count(%s)', s, f.t)));
        EXECUTE format('CREATE AGGREGATE %1$I.count(%2$s) (SFUNC = %1$I.attack_count_%2$s, STYPE = bigint, INITCOND = ''0'')', s, f.t);
        EXECUTE format('CREATE FUNCTION %I.attack_agg_%s(%s[], %s) RETURNS %s[] LANGUAGE plpgsql AS %L', s, f.t, f.t, f.t, f.t,
                       format('BEGIN PERFORM public.attack_note(%L, %L); RETURN $1 || $2; END',
                              me, format('aggregate %I.array_agg(%s)', s, f.t)));
        EXECUTE format('CREATE AGGREGATE %1$I.array_agg(%2$s) (SFUNC = %1$I.attack_agg_%2$s, STYPE = %2$s[])', s, f.t);
        INSERT INTO public.attack_decoys
        SELECT me, format('aggregate %I.%s(%s)', s, a, f.t) FROM unnest(ARRAY['max', 'min', 'count', 'array_agg']) a;
        n := n + 4;
    END LOOP;
    EXECUTE format('CREATE FUNCTION %I.attack_string_agg(text, text, text) RETURNS text LANGUAGE plpgsql AS %L', s,
                   format('BEGIN PERFORM public.attack_note(%L, %L); RETURN concat($1, $3, $2); END',
                          me, format('aggregate %I.string_agg(text, text)', s)));
    EXECUTE format('CREATE AGGREGATE %1$I.string_agg(text, text) (SFUNC = %1$I.attack_string_agg, STYPE = text)', s);
    EXECUTE format('CREATE FUNCTION %I.attack_bool_or(bool, bool) RETURNS bool LANGUAGE plpgsql AS %L', s,
                   format('BEGIN PERFORM public.attack_note(%L, %L); RETURN $1 OR $2; END',
                          me, format('aggregate %I.bool_or/bool_and(bool)', s)));
    EXECUTE format('CREATE AGGREGATE %1$I.bool_or(bool) (SFUNC = %1$I.attack_bool_or, STYPE = bool)', s);
    EXECUTE format('CREATE AGGREGATE %1$I.bool_and(bool) (SFUNC = %1$I.attack_bool_or, STYPE = bool)', s);
    EXECUTE format('CREATE FUNCTION %I.attack_sum(int8, int4) RETURNS int8 LANGUAGE plpgsql AS %L', s,
                   format('BEGIN PERFORM public.attack_note(%L, %L); RETURN coalesce($1, 0) + $2; END',
                          me, format('aggregate %I.sum(int4)', s)));
    EXECUTE format('CREATE AGGREGATE %1$I.sum(int4) (SFUNC = %1$I.attack_sum, STYPE = int8)', s);
    INSERT INTO public.attack_decoys
    SELECT me, format('aggregate %I.%s', s, a)
    FROM unnest(ARRAY['string_agg(text, text)', 'bool_or(bool)', 'bool_and(bool)', 'sum(int4)']) a;
    n := n + 4;
    -- operators
    FOR f IN
        SELECT o.oid, o.oprname, o.oprleft, o.oprright, o.oprresult
        FROM pg_operator o
        WHERE o.oprnamespace = 'pg_catalog'::regnamespace AND o.oprkind = 'b' AND o.oprname = ANY (opnames)
          AND (format_type(o.oprleft, NULL) = ANY (types) OR o.oprleft IN ('anyarray'::regtype,
               'anyelement'::regtype, 'anycompatiblearray'::regtype, 'anycompatible'::regtype))
          AND (format_type(o.oprright, NULL) = ANY (types) OR o.oprright IN ('anyarray'::regtype,
               'anyelement'::regtype, 'anycompatiblearray'::regtype, 'anycompatible'::regtype))
          AND o.oprcode <> 0
        ORDER BY o.oid
    LOOP
        sig := format('%s %s %s', format_type(f.oprleft, NULL), f.oprname, format_type(f.oprright, NULL));
        BEGIN
            EXECUTE format('CREATE FUNCTION %I.attack_op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql AS %L',
                           s, f.oid, format_type(f.oprleft, NULL), format_type(f.oprright, NULL),
                           format_type(f.oprresult, NULL),
                           format('BEGIN PERFORM public.attack_note(%L, %L); RETURN $1 OPERATOR(pg_catalog.%s) $2; END',
                                  me, format('operator %I.%s', s, sig), f.oprname));
            EXECUTE format('CREATE OPERATOR %I.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %I.attack_op_%s)',
                           s, f.oprname, format_type(f.oprleft, NULL), format_type(f.oprright, NULL), s, f.oid);
            INSERT INTO public.attack_decoys VALUES (me, format('operator %I.%s', s, sig));
            n := n + 1;
        EXCEPTION WHEN duplicate_function OR invalid_function_definition OR datatype_mismatch
                       OR feature_not_supported OR undefined_function OR invalid_parameter_value THEN
            NULL;
        END;
    END LOOP;
    -- types: a domain per usual type, whose CHECK fires the decoy
    FOR f IN SELECT unnest(types) AS t
    LOOP
        EXECUTE format('CREATE FUNCTION %I.attack_check_%s(pg_catalog.%I) RETURNS boolean LANGUAGE plpgsql AS %L',
                       s, f.t, f.t, format('BEGIN PERFORM public.attack_note(%L, %L); RETURN true; END',
                                           me, format('domain %I.%s', s, f.t)));
        EXECUTE format('CREATE DOMAIN %1$I.%2$I AS pg_catalog.%2$I CHECK (%1$I.attack_check_%2$s(VALUE))', s, f.t);
        INSERT INTO public.attack_decoys VALUES (me, format('domain %I.%s', s, f.t));
        n := n + 1;
    END LOOP;
    EXECUTE format('CREATE TYPE %1$I.record AS (deleted %1$I.int4, last %1$I.tid)', s);
    INSERT INTO public.attack_decoys VALUES (me, format('type %I.record', s));
    RAISE NOTICE 'planted % decoys in schema %', n + 1, s;
END
$plant$;
