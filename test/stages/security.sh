#!/usr/bin/env bash
#: stage  security
#: about  hostile names against every entry point (roles of the recipe, a database owner, pg_cron), test/sql-lint, the catalog check
#: needs  server
#: runs   host chroot
#: order  160
# The attack stage: roles that hold the recipe's grants (docs/operations.md
# "Privileges"), a role with EXECUTE on everything and a database owner plant decoys wherever
# PostgreSQL resolves names, then call every entry point they can reach, in every outcome, with
# idempotency.direct_access and idempotency.claim_scan on and off. Fails when any decoy ran as a
# role other than the one that planted it (the extension ran the caller's code as its owner, or a
# superuser's purge ran the database owner's code), or when a call's outcome was not the one
# expected. Also: test/sql-lint (and its self-test), and a catalog check that every non-C
# function of the installed extension pins its search path.
#  - test/security/roles.sql: the roles; grants.sql: the recipe's grants; seed.sql: rows to purge
#  - test/security/setup.sql: the log tables and the helpers; plant_schema.sql: decoys in a schema
#    of the role's own (functions, aggregates, operators, domains, a type named record);
#    plant_temp.sql: domains in pg_temp; battery.sql: the calls; report.sql and catalog.sql: checks
#  - database idem_security: each role's sessions put their own schema ahead of pg_catalog
#    (SET search_path = own, pg_catalog, public); half of them also plant pg_temp domains
#  - database idem_security_owned, owned by sec_dbowner (no superuser), who plants schema evil and
#    sets ALTER DATABASE ... SET search_path = evil, pg_catalog, public: the superuser runs the
#    battery there, CALLs idem_purge_loop in a fresh session as pg_cron would, and (when the
#    cluster has pg_cron) real pg_cron jobs purge it: a hand-written job's CALL idempotency.idem_purge_loop
#    and the job idem_schedule_purge makes (in the cron database, postgres)
# - part owner: the database owner's overloads of every routine and view (test/security/owner.sh:
#   the 1.x layout falls to them, 2.0.0 does not; then every documented statement of README.md and
#   docs/ in a database whose owner planted them, test/docs/doctest.py with IDEM_DOCS_OWNER_ATTACK=1)
# SECURITY_PARTS (default "lint catalog attack owner") picks the parts. Needs the running test cluster
# (PGHOST/PGPORT/PGUSER, a superuser). Takes about a minute (the pg_cron job runs at the next
# minute boundary).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
PARTS=${SECURITY_PARTS:-lint catalog attack owner}
DB=idem_security
OWNED=idem_security_owned
SUPER=${PGUSER:-postgres}
LOGS=$(mktemp -d /tmp/idem-security.XXXXXX)
failures=0
want() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
say() { echo "security: $*"; }
bad() { echo "security: FAIL: $*" >&2; failures=$((failures + 1)); }
sq() { PGOPTIONS='-c client_min_messages=warning' psql -X -q -v ON_ERROR_STOP=1 -U "$SUPER" "$@"; }

if want lint; then
    if test/sql-lint; then say "sql-lint: clean"; else bad "test/sql-lint found violations (above)"; fi
    if test/sql-lint --self-test >"$LOGS/lint-self-test" 2>&1; then
        say "sql-lint --self-test: $(tail -n 1 "$LOGS/lint-self-test")"
    else
        cat "$LOGS/lint-self-test" >&2
        bad "test/sql-lint --self-test"
    fi
fi

if want owner; then
    test/security/owner.sh || bad "the database owner's attack (above)"
    if IDEM_DOCS_OWNER_ATTACK=1 python3 test/docs/doctest.py >"$LOGS/docs-owner" 2>&1; then
        say "$(grep "the database owner's attack" "$LOGS/docs-owner")"
    else
        grep -E '^FAIL|owner' "$LOGS/docs-owner" >&2
        bad "the documented statements against a hostile database owner (above)"
    fi
fi

want attack || want catalog || { [ $failures = 0 ]; exit; }

# --- roles, databases, grants, seeds -------------------------------------------------------------
cron=0
if [ "$(sq -d postgres -tAc "SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_cron'")" = 1 ] &&
    [ "$(sq -d postgres -tAc "SELECT current_setting('cron.database_name', true) IS NOT NULL")" = t ]; then
    cron=1
    sq -d postgres -c "CREATE EXTENSION IF NOT EXISTS pg_cron" >/dev/null 2>&1 || cron=0
fi
[ $cron = 1 ] && sq -d postgres -tAc "SELECT count(cron.unschedule(jobid)) FROM cron.job
                                      WHERE jobname IN ('idem-security-purge', 'idempotency-purge:$OWNED')" >/dev/null
sq -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "DROP DATABASE IF EXISTS $OWNED WITH (FORCE)" || exit 1
sq -d postgres -f test/security/roles.sql || exit 1
sq -d postgres -c "CREATE DATABASE $DB" -c "CREATE DATABASE $OWNED OWNER sec_dbowner" || exit 1
for db in $DB $OWNED; do
    sq -d "$db" -c "CREATE EXTENSION idempotency" -f test/security/setup.sql -f test/security/grants.sql \
        -f test/security/seed.sql >/dev/null || exit 1
done
say "PostgreSQL $(sq -d $DB -tAc "SHOW server_version"), idempotency $(sq -d $DB -tAc "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'")"

if want catalog; then
    sq -d $DB -f test/security/catalog.sql >"$LOGS/catalog" || bad "catalog check did not run"
    grep '^CATALOG:' "$LOGS/catalog" >&2 && bad "functions of the extension that do not pin their search path (above)"
    say "catalog: $(grep -c '^CATALOG:' "$LOGS/catalog") of $(sed -n 's/^catalog-checked|//p' "$LOGS/catalog") functions and procedures do not pin search_path"
fi
want attack || { rm -rf "$LOGS"; [ $failures = 0 ]; exit; }

# --- decoys in schemas of their own ----------------------------------------------------------------
LOGINS="sec_payments_service sec_reconciler sec_ops_login sec_monitoring sec_all_exec"
for role in $LOGINS; do
    psql -X -q -v ON_ERROR_STOP=1 -U "$role" -d $DB -v schema="$role" -f test/security/plant_schema.sql \
        >>"$LOGS/plant" 2>&1 || { cat "$LOGS/plant" >&2; bad "planting the decoys of $role"; }
done
# the database owner: its own schema, and the database's search path
psql -X -q -v ON_ERROR_STOP=1 -U sec_dbowner -d $OWNED -c "CREATE SCHEMA evil" -v schema=evil \
    -f test/security/plant_schema.sql -c "ALTER DATABASE $OWNED SET search_path = evil, pg_catalog, public" \
    >>"$LOGS/plant" 2>&1 || { cat "$LOGS/plant" >&2; bad "planting the database owner's decoys"; }
# and its overloads of every routine and view of the extension (test/security/owner_decoys.sql), in
# public and evil, which the superuser's battery, its CALL and the real pg_cron jobs below meet
psql -X -q -v ON_ERROR_STOP=1 -U sec_dbowner -d $OWNED -v keep_search_path=1 -f test/security/owner_decoys.sql \
    >>"$LOGS/plant" 2>&1 || { cat "$LOGS/plant" >&2; bad "planting the database owner's overloads"; }

# real pg_cron jobs purging the owner's database as the superuser (they run at the next minute):
# a job written by hand with the qualified CALL (docs/lifecycle.md), and the job idem_schedule_purge makes
jobs=""
ext_created=0
if [ $cron = 1 ]; then
    jobs=$(sq -d postgres -tAc "SELECT cron.schedule_in_database('idem-security-purge', '* * * * *',
            'CALL idempotency.idem_purge_loop(batch_size => 1000)', '$OWNED')") || bad "scheduling the pg_cron job"
    if [ "$(sq -d postgres -tAc "SELECT count(*) FROM pg_extension WHERE extname = 'idempotency'")" = 0 ]; then
        sq -d postgres -c "CREATE EXTENSION idempotency" >/dev/null && ext_created=1
    fi
    job2=$(sq -d postgres -tAc "SELECT idempotency.idem_schedule_purge('* * * * *', '$OWNED', 1000)") ||
        bad "idempotency.idem_schedule_purge('* * * * *', '$OWNED', 1000) in the cron database"
    jobs="$jobs${job2:+,$job2}"
    sq -d postgres -tAc "SELECT 'pg_cron job ' || jobid || ' as ' || username || ' in ' || database || ': ' ||
                                left(regexp_replace(command, '\s+', ' ', 'g'), 120)
                         FROM cron.job WHERE jobid IN ($jobs) ORDER BY jobid" | sed 's/^/security: /'
fi

# --- the batteries -------------------------------------------------------------------------------
sessions=0 temp_sessions=0
battery() { # role db tag direct scan temp(1|0) schema('' = the database's path)
    local role=$1 db=$2 tag=$3 direct=$4 scan=$5 temp=$6 schema=$7 path
    if [ -n "$schema" ]; then path="SET search_path = \"$schema\", pg_catalog, public"; else path="RESET search_path"; fi
    local files=(-f test/security/session.sql)
    if [ "$temp" = 1 ]; then files+=(-f test/security/plant_temp.sql); temp_sessions=$((temp_sessions + 1)); fi
    sessions=$((sessions + 1))
    psql -X -q -U "$role" -d "$db" -v tag="$tag" -v direct="$direct" -v scan="$scan" "${files[@]}" \
        -c "$path" -f test/security/battery.sql >"$LOGS/${tag//\//_}.out" 2>&1
}
combos="on:on:1 on:off:0 off:on:0 off:off:1" # direct_access : claim_scan : pg_temp domains
for role in $LOGINS; do
    for c in $combos; do
        IFS=: read -r direct scan temp <<<"$c"
        battery "$role" $DB "$role/$direct-$scan" "$direct" "$scan" "$temp" "$role"
    done
done
for c in $combos; do
    IFS=: read -r direct scan temp <<<"$c"
    battery sec_dbowner $OWNED "sec_dbowner/$direct-$scan" "$direct" "$scan" "$temp" ""
    battery "$SUPER" $OWNED "superuser/$direct-$scan" "$direct" "$scan" 0 ""
done
# the superuser's purge in a fresh session of the owner's database, as pg_cron runs it
PGOPTIONS='-c attack.call=CALL_idem_purge_loop_as_pg_cron' psql -X -q -U "$SUPER" -d $OWNED \
    -c "CALL idempotency.idem_purge_loop(batch_size => 1000)" >"$LOGS/cron-like.out" 2>&1 ||
    { cat "$LOGS/cron-like.out" >&2; bad "the superuser's CALL idempotency.idem_purge_loop(batch_size => 1000) in $OWNED failed"; }

if [ -n "$jobs" ]; then
    n_jobs=$(tr ',' '\n' <<<"$jobs" | grep -c .)
    for _ in $(seq 1 75); do
        ran=$(sq -d postgres -tAc "SELECT count(DISTINCT jobid) FROM cron.job_run_details
                                  WHERE jobid IN ($jobs) AND status IN ('succeeded', 'failed')")
        [ "$ran" = "$n_jobs" ] && break
        sleep 1
    done
    sq -d postgres -tAc "SELECT DISTINCT ON (jobid) 'pg_cron job ' || jobid || ' ran: ' || status || ': ' ||
                                coalesce(return_message, '')
                         FROM cron.job_run_details WHERE jobid IN ($jobs) ORDER BY jobid, runid" | sed 's/^/security: /'
    sq -d postgres -tAc "SELECT count(cron.unschedule(jobid)) FROM cron.job WHERE jobid IN ($jobs)" >/dev/null
    [ $ext_created = 1 ] && sq -d postgres -c "DROP EXTENSION idempotency" >/dev/null
    [ "$ran" = "$n_jobs" ] || bad "only $ran of the $n_jobs pg_cron jobs ran within 75 s"
    failed_runs=$(sq -d postgres -tAc "SELECT count(*) FROM cron.job_run_details WHERE jobid IN ($jobs) AND status = 'failed'")
    [ "$failed_runs" = 0 ] || bad "$failed_runs pg_cron run(s) failed (above)"
fi

# --- the verdict -----------------------------------------------------------------------------------
calls=0 ok=0 unreach=0 wrong=0 planted=0 fired=0 crossed=0
for db in $DB $OWNED; do
    sq -d "$db" -f test/security/report.sql >"$LOGS/report-$db" 2>&1 || { cat "$LOGS/report-$db" >&2; bad "report of $db"; }
    grep -E '^(CROSSED|WRONG|ESCALATED):' "$LOGS/report-$db" | sed "s/^/security: $db: /" >&2
    grep '^same-role' "$LOGS/report-$db" | sed "s/^/security: $db: /"
    IFS='|' read -r _ c o u w _ p f x <<<"$(grep '^counts' "$LOGS/report-$db" | tr -d ' ')"
    calls=$((calls + c)) ok=$((ok + o)) unreach=$((unreach + u)) wrong=$((wrong + w))
    planted=$((planted + p)) fired=$((fired + f)) crossed=$((crossed + x))
    grep -q '^ESCALATED:' "$LOGS/report-$db" && bad "a decoy's ALTER ROLE ... SUPERUSER succeeded (above)"
done
[ "$crossed" = 0 ] || bad "$crossed decoy firing(s) as another role than the planter (CROSSED lines above)"
overloads=$(sq -d $OWNED -tAc "SELECT count(*) FROM public.owner_decoys")
overload_runs=$(sq -d $OWNED -tAc "SELECT coalesce(string_agg(name || ' as ' || who, ', '), '') FROM public.owner_decoy_fired WHERE who <> 'sec_dbowner'")
[ -z "$overload_runs" ] || bad "the database owner's overloads ran as another role: $overload_runs"
say "$OWNED: $overloads overloads of the extension's routines and views by its owner, run as another role: ${overload_runs:-none}"
[ "$wrong" = 0 ] || bad "$wrong call(s) with an unexpected outcome (WRONG lines above; session output in $LOGS)"
[ "$calls" -gt 0 ] || bad "no call was made"
say "$calls calls in $sessions sessions ($ok as expected, $unreach unreachable for the role, $wrong wrong); $planted decoys planted in schemas + 26 pg_temp domains in each of $temp_sessions sessions; $fired decoy firings, $crossed as another role"
if [ $failures = 0 ]; then
    rm -rf "$LOGS"
    sq -d postgres -c "DROP DATABASE $DB WITH (FORCE)" -c "DROP DATABASE $OWNED WITH (FORCE)" \
        -c "DROP ROLE sec_payments_service, sec_reconciler, sec_ops_login, sec_monitoring, sec_all_exec, sec_dbowner, sec_idempotency_user, sec_idempotency_ops" >/dev/null
    say ok
    exit 0
fi
say "$failures failure(s); the sessions' output is in $LOGS"
exit 1
