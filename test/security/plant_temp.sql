-- Run at the start of each battery session (psql -v planter=...): domains in pg_temp named like
-- the usual types (pg_temp comes first for types unless a search path lists it), each with a
-- CHECK that fires the decoy. pg_temp is never searched for functions or operators.
SET client_min_messages = warning;
SET search_path = pg_catalog, pg_temp;
DO $plant$
DECLARE
    t text;
    me name := current_user;
BEGIN
    FOREACH t IN ARRAY ARRAY['text', 'bytea', 'tid', 'uuid', 'jsonb', 'json', 'timestamptz', 'timestamp',
                             'int2', 'int4', 'int8', 'bool', 'name', 'interval', 'numeric', 'float8',
                             'oid', 'regclass', 'varchar', 'bpchar', 'date', 'regproc', 'regprocedure',
                             'regnamespace', 'regrole', 'char']
    LOOP
        EXECUTE format('CREATE FUNCTION pg_temp.attack_check_%s(pg_catalog.%I) RETURNS boolean LANGUAGE plpgsql AS %L',
                       t, t, format('BEGIN PERFORM public.attack_note(%L, %L); RETURN true; END',
                                    me, 'domain pg_temp.' || t));
        EXECUTE format('CREATE DOMAIN pg_temp.%1$I AS pg_catalog.%1$I CHECK (pg_temp.attack_check_%1$s(VALUE))', t);
    END LOOP;
END
$plant$;
