#!/usr/bin/env bash
#: stage  metrics
#: about  promtool check and test rules; prometheus-postgres-exporter with monitoring/postgres_exporter.yml as a pg_monitor member, every series after a known workload, planted faults
#: needs  server deps:metrics
#: runs   host
#: order  170
# The metrics stage: monitoring/ where operators look.
# 1. promtool check rules and promtool test rules (monitoring/alerts_test.yml: every alert fires
#    on a synthetic fault and stays silent on healthy series); the dashboard is valid JSON.
# 2. On the shared test cluster (test/run-all's, PGHOST/PGPORT set): a database idem_metrics,
#    a LOGIN role that is a member of pg_monitor and nothing else (checked: no superuser, no
#    read of idempotency.records), the workload of test/metrics/workload.sql (known numbers:
#    the counters are reset first, so nothing else may run on the cluster meanwhile).
# 3. prometheus-postgres-exporter with monitoring/postgres_exporter.yml on port
#    IDEM_METRICS_PORT (default IDEM_PGPORT - 6000), connected as that role; one scrape of
#    /metrics, checked by test/metrics/check.py against test/metrics/expected.txt: every series
#    with its exact value, every metric name and type, the names the alerts and the dashboard use.
# 4. Planted faults, each of which the check must catch: a query with two columns swapped, a
#    column of a view renamed (the query fails), the role without pg_monitor.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
: "${PGHOST:?run by test/run-all, which starts the cluster}"
PORT=${IDEM_METRICS_PORT:-$((${IDEM_PGPORT:-25329} - 6000))}
DB=idem_metrics
ROLE=idem_metrics_exporter
EXPORTER=$(command -v prometheus-postgres-exporter || command -v postgres_exporter) || {
    echo "metrics: prometheus-postgres-exporter is not installed (test/install-deps metrics)"
    exit 1
}
work=$(mktemp -d /tmp/idem-metrics.XXXXXX)
exporter_pid=
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    [ -z "$exporter_pid" ] || kill "$exporter_pid" 2>/dev/null
    [ -n "${IDEM_METRICS_KEEP:-}" ] || rm -rf "$work"
    psql -qX -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "DROP ROLE IF EXISTS $ROLE" >/dev/null 2>&1
}
trap cleanup EXIT
rc=0
fail() { echo "metrics: $*"; rc=1; }

# 1. the alert rules and the dashboard
promtool check rules monitoring/alerts.yml || fail "promtool check rules"
promtool test rules monitoring/alerts_test.yml || fail "promtool test rules"
python3 -m json.tool monitoring/grafana-dashboard.json >/dev/null || fail "dashboard JSON"

# 2. the database, the role, the workload
psql -qX -d postgres -v ON_ERROR_STOP=1 >/dev/null <<SQL || exit 1
SET client_min_messages = warning;
DROP DATABASE IF EXISTS $DB;
DROP ROLE IF EXISTS $ROLE;
CREATE DATABASE $DB;
CREATE ROLE $ROLE LOGIN;
GRANT pg_monitor TO $ROLE;
SQL
psql -qX -d $DB -v ON_ERROR_STOP=1 -c "CREATE EXTENSION idempotency" >/dev/null || exit 1
psql -qAtX -d $DB -f test/metrics/workload.sql >"$work/workload.out" 2>&1 ||
    { cat "$work/workload.out"; exit 1; }
roles=$(psql -qAtX -d $DB -c "SELECT r.rolsuper, (SELECT string_agg(m.rolname, ',') FROM pg_auth_members a
    JOIN pg_roles m ON m.oid = a.roleid WHERE a.member = r.oid) FROM pg_roles r WHERE r.rolname = '$ROLE'")
[ "$roles" = "f|pg_monitor" ] || fail "the exporter's role is not a plain member of pg_monitor: $roles"
denied=$(psql -qAtX -d $DB -U $ROLE -c "\set VERBOSITY sqlstate" -c "SELECT count(*) FROM idempotency.records" 2>&1)
[ "$denied" = "ERROR:  42501" ] || fail "the exporter's role read idempotency.records: $denied"

# 3. scrape QUERIES_FILE OUT: start the exporter, fetch /metrics once, stop it
fetch() { # OUT
    python3 -c "import sys, urllib.request
sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics', timeout=10).read().decode())" \
        >"$1" 2>/dev/null
}
scrape() {
    if fetch "$2"; then # another exporter would answer in place of ours
        echo "metrics: port $PORT is in use (IDEM_METRICS_PORT)"
        return 1
    fi
    DATA_SOURCE_NAME="host=$PGHOST port=$PGPORT user=$ROLE dbname=$DB sslmode=disable" \
        "$EXPORTER" --web.listen-address="127.0.0.1:$PORT" --extend.query-path="$1" \
        >"$2.log" 2>&1 &
    exporter_pid=$!
    local ok=1
    for _ in $(seq 50); do
        if fetch "$2"; then ok=0; break; fi
        kill -0 "$exporter_pid" 2>/dev/null || break
        sleep 0.2
    done
    kill "$exporter_pid" 2>/dev/null
    wait "$exporter_pid" 2>/dev/null
    exporter_pid=
    [ $ok = 0 ] || { echo "metrics: no answer from the exporter on port $PORT:"; cat "$2.log"; }
    return $ok
}
check() { # SCRAPE
    python3 test/metrics/check.py "$1" test/metrics/expected.txt monitoring/postgres_exporter.yml \
        monitoring/alerts.yml monitoring/grafana-dashboard.json
}
if scrape monitoring/postgres_exporter.yml "$work/metrics"; then
    check "$work/metrics" || { fail "the scrape differs from test/metrics/expected.txt"; cat "$work/metrics.log"; }
else
    fail "no scrape"
fi

# 4. planted faults: each scrape must fail the check
planted() { # NAME QUERIES_FILE
    if ! scrape "$2" "$work/planted"; then
        fail "planted fault ($1): no scrape"
    elif check "$work/planted" >"$work/planted.check"; then
        fail "planted fault ($1) NOT caught"
    else
        echo "planted fault ($1) caught: $(grep -c '^metrics check: [a-z]' "$work/planted.check") problems, first:"
        grep '^metrics check: [a-z]' "$work/planted.check" | head -n 2 | sed 's/^/    /'
    fi
}
sed 's/SELECT pg_catalog.current_database() AS datname, scope, processing, stuck,/SELECT pg_catalog.current_database() AS datname, scope, stuck AS processing, processing AS stuck,/' \
    monitoring/postgres_exporter.yml >"$work/swapped.yml"
cmp -s "$work/swapped.yml" monitoring/postgres_exporter.yml && fail "the swap was not planted"
planted "idem_stats' processing and stuck swapped" "$work/swapped.yml"
psql -qX -d $DB -v ON_ERROR_STOP=1 -c "ALTER VIEW idempotency.idem_outbox_stats RENAME COLUMN dead TO dead_events" >/dev/null || exit 1
planted "idem_outbox_stats.dead renamed" monitoring/postgres_exporter.yml
psql -qX -d $DB -v ON_ERROR_STOP=1 -c "ALTER VIEW idempotency.idem_outbox_stats RENAME COLUMN dead_events TO dead" >/dev/null || exit 1
psql -qX -d postgres -v ON_ERROR_STOP=1 -c "REVOKE pg_monitor FROM $ROLE" >/dev/null || exit 1
planted "the role without pg_monitor" monitoring/postgres_exporter.yml
exit $rc
