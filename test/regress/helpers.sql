-- The regress suites' error-catching helper; every sql/*.sql that needs it runs \i on this file.
-- try(sql, with_hint): runs sql and returns 'ok' or 'SQLSTATE: message', with the hint on a
-- line of its own when with_hint and the error has one. query_canceled (not part of OTHERS) is
-- caught too, for the statement_timeout cases.
CREATE OR REPLACE FUNCTION try(sql text, with_hint boolean DEFAULT false) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    hint text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN query_canceled OR OTHERS THEN
    GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
    RETURN SQLSTATE || ': ' || SQLERRM ||
           CASE WHEN with_hint AND hint <> '' THEN E'\nHINT: ' || hint ELSE '' END;
END $$;
