-- The HTTP contract (docs/records.md "The HTTP contract"): idem_http_begin, idem_http_end,
-- idem_http_release, idem_http_errors, run over test/conformance/http.json, the file every client
-- package's runner reads too (clients/run-tests). A case that fails shows what differed.
\set VERBOSITY terse
\set ECHO none
\i test/regress/helpers.sql
\i test/conformance/http_runner.sql
\set ECHO all
\set cases `cat test/conformance/http.json`

SELECT name, ran, status, problems FROM http_conformance(:'cases', 'single', 'sql-single');
SELECT name, ran, status, problems FROM http_conformance(:'cases', 'two-phase', 'sql-two-phase');

-- The rule and the scope, pinned value by value.
SELECT s AS status, idempotency.idem_http_stored(s) AS stored
FROM unnest('{100,199,200,201,204,301,303,399,400,401,402,403,404,408,409,410,422,423,424,425,429,499,500,502,503,599}'::int[]) s;
SELECT idempotency.idem_http_scope('user:42', 'POST /v1/payments') AS plain,
       idempotency.idem_http_scope('a/b%c*', 'POST /x') AS encoded,
       idempotency.idem_http_scope('*', 'POST /x') AS star_principal,
       idempotency.idem_http_scope(NULL, 'POST /x', true) AS shared,
       idempotency.idem_http_scope('u', 'POST /x', true) AS shared_ignores_principal,
       idempotency.idem_http_scope('', 'POST /x') IS NULL AS empty_is_none,
       idempotency.idem_http_scope(NULL, 'POST /x') IS NULL AS null_is_none;

-- The caller's mistakes are errors, and change nothing.
SELECT try($$SELECT idempotency.idem_http_begin('u', NULL, 'k', '{}')$$);
SELECT try($$SELECT idempotency.idem_http_begin('u', '', 'k', '{}')$$);
SELECT try($$SELECT idempotency.idem_http_end('u/POST /x', 'k', 1, 99)$$);
SELECT try($$SELECT idempotency.idem_http_end('u/POST /x', 'k', 1, 600)$$);
SELECT try($$SELECT idempotency.idem_http_end('u/POST /x', 'k', 1, NULL)$$);
SELECT count(*) AS records FROM idempotency.idem_lookup('u/POST /x', 'k');

-- idem_http_end of an attempt that another one took over (IK002) and after another attempt
-- finished (IK003); idem_http_release leaves both to their owner.
SELECT run, attempt FROM idempotency.idem_http_begin('u', 'POST /fence', 'k', '{}', lease => '1 ms');
SELECT pg_sleep(0.02);
SELECT run, attempt, reclaimed FROM idempotency.idem_http_begin('u', 'POST /fence', 'k', '{}', lease => '1 hour');
SELECT try($$SELECT idempotency.idem_http_end('u/POST /fence', 'k', 1, 201)$$);
SELECT idempotency.idem_http_release('u/POST /fence', 'k', 1) AS released_1;
SELECT idempotency.idem_http_end('u/POST /fence', 'k', 2, 201, '{"Location": "/r/9"}', 'two');
SELECT try($$SELECT idempotency.idem_http_end('u/POST /fence', 'k', 2, 201)$$) AS again;
SELECT try($$SELECT idempotency.idem_http_end('u/POST /fence', 'k', 1, 201)$$) AS late;
SELECT idempotency.idem_http_release('u/POST /fence', 'k', 2) AS released_2;
SELECT status, resource_id, response_status, convert_from(response_body, 'UTF8') AS body
FROM idempotency.idem_lookup('u/POST /fence', 'k');

-- A two-phase attempt released: failed and retryable, the next begin runs with attempt 2.
SELECT run, attempt FROM idempotency.idem_http_begin('u', 'POST /release', 'k', '{}', lease => '1 hour');
SELECT idempotency.idem_http_end('u/POST /release', 'k', 1, 503) AS stored;
SELECT idempotency.idem_http_release('u/POST /release', 'k', 1) AS released;
SELECT idempotency.idem_http_release('u/POST /release', 'k', 1) AS released_again;
SELECT status FROM idempotency.idem_lookup('u/POST /release', 'k');
SELECT run, attempt, reclaimed FROM idempotency.idem_http_begin('u', 'POST /release', 'k', '{}');

-- Headers: every one of the handler's goes in, the allow-listed ones (any case) are stored.
SELECT run FROM idempotency.idem_http_begin('u', 'POST /h', 'k', '{}');
SELECT idempotency.idem_http_end('u/POST /h', 'k', 1, 201,
    '{"content-type": "text/plain", "LOCATION": "/a/b/", "ETag": "\"1\"", "Set-Cookie": "s=1"}',
    'x', stored_headers => '{Location,ETag,Content-Type}');
SELECT resource_id, response_headers FROM idempotency.idem_lookup('u/POST /h', 'k');
SELECT status, headers FROM idempotency.idem_http_begin('u', 'POST /h', 'k', '{}');

-- idem_http_end's headers: not a JSON object is 22023 and writes nothing; a value that is no
-- string (a number, true) is stored as its text, and a numeric Location still names the resource.
SELECT run FROM idempotency.idem_http_begin('u', 'POST /hv', 'k', NULL);
SELECT try($$SELECT idempotency.idem_http_end('u/POST /hv', 'k', 1, 201, '["Location"]')$$);
SELECT status FROM idempotency.idem_lookup('u/POST /hv', 'k');
SELECT idempotency.idem_http_end('u/POST /hv', 'k', 1, 201, '{"location": 7, "X-Flag": true}',
    stored_headers => '{Location,X-Flag}');
SELECT resource_id, response_headers FROM idempotency.idem_lookup('u/POST /hv', 'k');

-- idem_http_problem: a NULL detail is JSON null, a Retry-After of 0 is still sent, a NULL
-- status has no answer (idem_http_errors' IK003 row).
SELECT status, headers, convert_from(body, 'UTF8') AS body
FROM idempotency.idem_http_problem(418, NULL, 0);
SELECT idempotency.idem_http_problem(NULL, 'x') IS NULL AS no_answer;

-- EXECUTE on idem_http_begin and idem_http_end is all a role needs (not on idem_claim or
-- idem_complete), and a scope bound to another role refuses them as it refuses idem_claim.
CREATE ROLE regress_http_app;
CREATE ROLE regress_http_owner;
GRANT EXECUTE ON FUNCTION
    idempotency.idem_http_begin(text, text, text, bytea, interval, interval, boolean),
    idempotency.idem_http_end(text, text, integer, integer, jsonb, bytea, text, text[])
TO regress_http_app;
SELECT idempotency.idem_bind('scope', 'bound/', 'regress_http_owner') AS bound;
SET ROLE regress_http_app;
SELECT run, attempt FROM idempotency.idem_http_begin('app', 'POST /g', 'k', NULL);
SELECT idempotency.idem_http_end('app/POST /g', 'k', 1, 201) AS stored;
SELECT try($$SELECT idempotency.idem_http_begin('bound', 'POST /g', 'k', NULL)$$);
SELECT try($$SELECT idempotency.idem_claim('app/POST /g', 'k2')$$);
RESET ROLE;
SELECT count(*) AS bound_records FROM idempotency.records WHERE scope LIKE 'bound/%';
SELECT idempotency.idem_unbind('scope', 'bound/') AS unbound;
REVOKE ALL ON FUNCTION
    idempotency.idem_http_begin(text, text, text, bytea, interval, interval, boolean),
    idempotency.idem_http_end(text, text, integer, integer, jsonb, bytea, text, text[])
FROM regress_http_app;
DROP ROLE regress_http_app;
DROP ROLE regress_http_owner;

-- Permissions: the functions run as the caller; without EXECUTE on them, 42501.
CREATE ROLE regress_http_nobody;
SET ROLE regress_http_nobody;
SELECT try($$SELECT idempotency.idem_http_begin('u', 'POST /x', 'k', '{}')$$);
SELECT count(*) AS map_rows FROM idempotency.idem_http_errors();
RESET ROLE;
DROP ROLE regress_http_nobody;
