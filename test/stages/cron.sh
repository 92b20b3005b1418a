#!/usr/bin/env bash
#: stage  cron
#: about  a scheduled purge really runs under pg_cron (same and cross-database)
#: needs  server
#: runs   host chroot
#: order  50
# Proves that a scheduled purge really runs under pg_cron (docs/lifecycle.md "pg_cron deployment"):
#  1. in the cron database (cron.database_name = postgres) a job purging that database;
#  2. from the cron database, a job purging another database (cron.schedule_in_database);
# each deletes exactly the expired rows and keeps the live ones, and cron.job_run_details shows
# a succeeded run. The second job runs as a dedicated non-superuser purge role (run_as).
#  3. a job for a database without the extension, where its owner planted a procedure
#     idem_purge_loop with the extension's signature in public and in a schema idempotency of its
#     own: the run fails with 55000 and says so, and no planted procedure runs.
#  4. a job scheduled by 1.1.0 (its command calls public.idem_purge_loop) is scheduled again by
#     ALTER EXTENSION UPDATE in the cron database: the same command a 2.0.0 schedule makes. Also: rescheduling updates the job (never a duplicate), unscheduling removes
# it, and without CREATE EXTENSION pg_cron the error says what to run.
# Needs the running test cluster (PGHOST/PGPORT/PGUSER from test/pgcluster). pg_cron 1.4 has no
# seconds schedules, so the jobs run at the next minute boundary: takes up to ~65 s.
set -euo pipefail
CRON_DB=postgres
TARGET_DB=idem_cron_target
EMPTY_DB=idem_cron_empty
PURGE_ROLE=idem_cron_purge
fail() { echo "cron: FAIL: $*" >&2; exit 1; }
q() { PGOPTIONS='-c client_min_messages=warning' psql -X -qtA -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }

# the expired and live rows of a database
seed() {
    q "$1" "DELETE FROM idempotency.records;
        INSERT INTO idempotency.records (scope, key, status, attempt, created_at, updated_at,
                                         lease_expires_at, expires_at)
        SELECT 'cron', 'expired-' || g, 'completed', 1, now() - interval '2 days',
               now() - interval '2 days', NULL::timestamptz, now() - interval '1 day'
        FROM generate_series(1, 2500) g
        UNION ALL
        SELECT 'cron', 'live-' || g, 'completed', 1, now(), now(), NULL, now() + interval '1 day'
        FROM generate_series(1, 10) g
        UNION ALL
        SELECT 'cron', 'stuck', 'processing', 1, now() - interval '2 days', now() - interval '2 days',
               now() - interval '2 days', now() - interval '1 day';"
}

q $CRON_DB "DROP EXTENSION IF EXISTS idempotency CASCADE; CREATE EXTENSION idempotency;"
if [ "$(q $CRON_DB "SELECT count(*) FROM pg_extension WHERE extname = 'pg_cron'")" = 0 ]; then
    err=$(psql -X -qtA -d $CRON_DB -c "SELECT idempotency.idem_schedule_purge()" 2>&1 || true)
    echo "$err" | grep -q 'extension pg_cron is not installed in database "postgres"' ||
        fail "expected the missing pg_cron error, got: $err"
    echo "$err" | grep -q 'HINT:  Run CREATE EXTENSION pg_cron in database "postgres".' ||
        fail "expected the CREATE EXTENSION hint, got: $err"
    echo "cron: missing pg_cron reported with its hint"
    q $CRON_DB "CREATE EXTENSION pg_cron"
fi
q $CRON_DB "DROP DATABASE IF EXISTS $TARGET_DB"
q $CRON_DB "DROP DATABASE IF EXISTS $EMPTY_DB"
q $CRON_DB "CREATE DATABASE $TARGET_DB"
q $CRON_DB "CREATE DATABASE $EMPTY_DB"
q $TARGET_DB "CREATE EXTENSION idempotency"
# the purge role: LOGIN (pg_cron's worker connects as it), EXECUTE on the two purge routines only
q $CRON_DB "DROP ROLE IF EXISTS $PURGE_ROLE; CREATE ROLE $PURGE_ROLE LOGIN"
q $TARGET_DB "GRANT EXECUTE ON PROCEDURE idempotency.idem_purge_loop(integer, interval, boolean, interval, interval, bigint) TO $PURGE_ROLE;
              GRANT EXECUTE ON FUNCTION idempotency.idem_purge_batch(text, integer, tid, boolean, interval) TO $PURGE_ROLE"
# the planted procedures (in public and in a schema named as the extension's): record who ran them
q $EMPTY_DB "CREATE TABLE planted_runs (who text); GRANT INSERT ON planted_runs TO PUBLIC; CREATE SCHEMA idempotency;
             CREATE PROCEDURE public.idem_purge_loop(integer, interval, boolean, interval, interval, INOUT bigint)
             LANGUAGE plpgsql AS \$\$BEGIN INSERT INTO public.planted_runs VALUES (current_user); END\$\$;
             CREATE PROCEDURE idempotency.idem_purge_loop(integer, interval, boolean, interval, interval, INOUT bigint)
             LANGUAGE plpgsql AS \$\$BEGIN INSERT INTO public.planted_runs VALUES (current_user); END\$\$;
             GRANT EXECUTE ON ALL PROCEDURES IN SCHEMA public, idempotency TO PUBLIC"
seed $CRON_DB
seed $TARGET_DB

# schedule both; scheduling again updates the same job
local_job=$(q $CRON_DB "SELECT idempotency.idem_schedule_purge('0 0 1 1 *')")
again=$(q $CRON_DB "SELECT idempotency.idem_schedule_purge('* * * * *', batch_size => 1000)")
[ "$local_job" = "$again" ] || fail "rescheduling created job $again next to $local_job"
remote_job=$(q $CRON_DB "SELECT idempotency.idem_schedule_purge('* * * * *', '$TARGET_DB', 1000, run_as => '$PURGE_ROLE')")
empty_job=$(q $CRON_DB "SELECT idempotency.idem_schedule_purge('* * * * *', '$EMPTY_DB', 1000)")
# every job runs the guarded command: the extension's own procedure or nothing
jobs=$(q $CRON_DB "SELECT string_agg(jobname || ' ' || schedule || ' ' || database || ' ' || username || ' ' ||
                   (command LIKE 'DO \$idem_purge\$%to_regprocedure(''idempotency.idem_purge_loop(integer,interval,boolean,interval,interval,bigint)'')%CALL idempotency.idem_purge_loop(1000, interval %')::text,
                   ' | ' ORDER BY jobname) FROM cron.job WHERE jobname LIKE 'idempotency-purge:%'")
expect="idempotency-purge:$EMPTY_DB * * * * * $EMPTY_DB postgres true | idempotency-purge:$TARGET_DB * * * * * $TARGET_DB $PURGE_ROLE true | idempotency-purge:postgres * * * * * postgres postgres true"
[ "$jobs" = "$expect" ] || fail "cron.job: $jobs"
echo "cron: jobs $local_job ($CRON_DB), $remote_job ($TARGET_DB, as $PURGE_ROLE) and $empty_job ($EMPTY_DB) scheduled: $jobs"

# wait for a succeeded run of each (at the next minute boundary)
for _ in $(seq 1 90); do
    done_runs=$(q $CRON_DB "SELECT count(DISTINCT jobid) FROM cron.job_run_details
                            WHERE jobid IN ($local_job, $remote_job) AND status = 'succeeded'")
    [ "$done_runs" = 2 ] && break
    bad=$(q $CRON_DB "SELECT string_agg(jobid || ': ' || return_message, '; ') FROM cron.job_run_details
                      WHERE jobid IN ($local_job, $remote_job) AND status = 'failed'")
    [ -z "$bad" ] || fail "a purge run failed: $bad"
    sleep 1
done
[ "$done_runs" = 2 ] || fail "no succeeded run of both jobs after 90 s: $(q $CRON_DB "SELECT * FROM cron.job_run_details")"
for _ in $(seq 1 30); do
    empty_run=$(q $CRON_DB "SELECT status || ': ' || split_part(return_message, E'\\n', 1) FROM cron.job_run_details
                            WHERE jobid = $empty_job AND status IN ('failed', 'succeeded') LIMIT 1")
    [ -n "$empty_run" ] && break
    sleep 1
done
[ "$empty_run" = "failed: ERROR: idempotency is not installed in schema idempotency of database $EMPTY_DB: nothing purged" ] ||
    fail "the job of $EMPTY_DB: $empty_run"
planted=$(q $EMPTY_DB "SELECT count(*) FROM planted_runs")
[ "$planted" = 0 ] || fail "the planted procedure ran $planted times"
echo "cron: $EMPTY_DB (no extension, a planted idem_purge_loop): '$empty_run', the planted procedure never ran"
q $CRON_DB "SELECT jobid, database, command, status, return_message FROM cron.job_run_details
            WHERE jobid IN ($local_job, $remote_job) ORDER BY jobid, runid" | sed 's/^/cron: run /'

for db in $CRON_DB $TARGET_DB; do
    counts=$(q "$db" "SELECT count(*) FILTER (WHERE key LIKE 'expired-%') || ' expired, ' ||
                           count(*) FILTER (WHERE key LIKE 'live-%') || ' live, ' ||
                           count(*) FILTER (WHERE key = 'stuck') || ' stuck'
                    FROM idempotency.records")
    [ "$counts" = "0 expired, 10 live, 1 stuck" ] || fail "$db after the purge: $counts"
    echo "cron: $db after the scheduled purge: $counts"
done

# a role that is not a superuser (idempotency_ops in docs/operations.md) schedules and
# unschedules in the cron database; elsewhere it is told where to run the call (55000), not
# refused with 42501 for reading the superuser-only cron.database_name (before 0.8 it was)
OPS=idem_cron_ops
q $CRON_DB "DROP ROLE IF EXISTS $OPS; CREATE ROLE $OPS LOGIN;
            GRANT EXECUTE ON FUNCTION idempotency.idem_schedule_purge(text, name, integer, name), idempotency.idem_unschedule_purge(name) TO $OPS;
            GRANT USAGE ON SCHEMA cron TO $OPS;
            GRANT EXECUTE ON FUNCTION cron.schedule(text, text, text), cron.unschedule(bigint) TO $OPS"
q $TARGET_DB "GRANT EXECUTE ON FUNCTION idempotency.idem_schedule_purge(text, name, integer, name) TO $OPS"
ops_job=$(q $CRON_DB "SET ROLE $OPS; SELECT idempotency.idem_schedule_purge('0 0 1 1 *', '$CRON_DB', 10)")
ops_user=$(q $CRON_DB "SELECT username FROM cron.job WHERE jobid = ${ops_job:-0}")
[ "$ops_user" = "$OPS" ] || fail "a job scheduled by $OPS runs as '$ops_user'"
ops_elsewhere=$(psql -X -qtA -d $TARGET_DB -c "SET ROLE $OPS" -c "SELECT idempotency.idem_schedule_purge()" 2>&1 | head -n 1 || true)
[ "$ops_elsewhere" = "ERROR:  pg_cron jobs are managed from the cron database (cron.database_name), not \"$TARGET_DB\"" ] ||
    fail "$OPS outside the cron database: $ops_elsewhere"
[ "$(q $CRON_DB "SET ROLE $OPS; SELECT idempotency.idem_unschedule_purge('$CRON_DB')")" = t ] || fail "$OPS unschedules its job"
q $TARGET_DB "DROP OWNED BY $OPS"
q $CRON_DB "DROP OWNED BY $OPS; DROP ROLE $OPS"
echo "cron: a non-superuser ($OPS) scheduled job $ops_job (runs as $OPS) and unscheduled it; elsewhere: '$ops_elsewhere'"

# unschedule: true, then false; nothing left in cron.job
[ "$(q $CRON_DB "SELECT idempotency.idem_unschedule_purge()")" = t ] || fail "unschedule $CRON_DB"
[ "$(q $CRON_DB "SELECT idempotency.idem_unschedule_purge('$TARGET_DB')")" = t ] || fail "unschedule $TARGET_DB (a job of $PURGE_ROLE)"
[ "$(q $CRON_DB "SELECT idempotency.idem_unschedule_purge('$EMPTY_DB')")" = t ] || fail "unschedule $EMPTY_DB"
[ "$(q $CRON_DB "SELECT idempotency.idem_unschedule_purge()")" = f ] || fail "second unschedule"
[ "$(q $CRON_DB "SELECT count(*) FROM cron.job WHERE jobname LIKE 'idempotency-purge:%'")" = 0 ] ||
    fail "jobs left in cron.job"
q $CRON_DB "DROP DATABASE $TARGET_DB WITH (FORCE)"
q $CRON_DB "DROP DATABASE $EMPTY_DB WITH (FORCE)"
q $CRON_DB "DROP ROLE $PURGE_ROLE"
q $CRON_DB "DROP EXTENSION idempotency"

# a job scheduled by 1.1.0 calls public.idem_purge_loop; the update to 2.0.0, run in the cron
# database, schedules it again (same schedule, batch size and user): the command 2.0.0 makes
"$(dirname "$0")/../upgrade/scripts" add
trap '"$(dirname "$0")/../upgrade/scripts" remove' EXIT
q $CRON_DB "CREATE EXTENSION idempotency VERSION '1.1.0'"
old_job=$(q $CRON_DB "SELECT public.idem_schedule_purge('0 0 1 1 *', batch_size => 77)")
old_cmd=$(q $CRON_DB "SELECT command FROM cron.job WHERE jobid = $old_job")
case "$old_cmd" in *"CALL public.idem_purge_loop(77, "*) ;; *) fail "1.1.0's job command: $old_cmd" ;; esac
q $CRON_DB "ALTER EXTENSION idempotency UPDATE"
updated=$(q $CRON_DB "SELECT jobid || ' ' || schedule || ' ' || command FROM cron.job WHERE jobname = 'idempotency-purge:$CRON_DB'")
q $CRON_DB "SELECT idempotency.idem_schedule_purge('0 0 1 1 *', batch_size => 77)" >/dev/null
fresh=$(q $CRON_DB "SELECT jobid || ' ' || schedule || ' ' || command FROM cron.job WHERE jobname = 'idempotency-purge:$CRON_DB'")
[ "$updated" = "$fresh" ] || fail "the 1.1.0 job after the update: $updated; 2.0.0 schedules: $fresh"
case "$updated" in *"CALL idempotency.idem_purge_loop(77, "*) ;; *) fail "the updated job: $updated" ;; esac
[ "$(q $CRON_DB "SELECT idempotency.idem_unschedule_purge()")" = t ] || fail "unschedule after the update"
q $CRON_DB "DROP EXTENSION idempotency"
echo "cron: a 1.1.0 job (batch 77) was scheduled again by ALTER EXTENSION UPDATE, as 2.0.0 schedules it"
echo "cron: ok"
