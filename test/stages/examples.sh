#!/usr/bin/env bash
# The examples stage (issue 19), one run per call:
#   test/stages/examples.sh LANG ROUTE   LANG: python | node | go; ROUTE: direct | pgbouncer
#   test/stages/examples.sh clients      build/concurrency_test and build/faults_test through
#                                        PgBouncer
# LANG ROUTE: test/examples/http_test.py drives the service examples/LANG over HTTP through the
# fault proxy, the service connecting to the cluster directly or through a throwaway PgBouncer in
# transaction pooling mode (test/pgbouncer), which must then have carried its transactions.
# A service whose directory does not exist is a failure. Needs the libpq environment of a running
# cluster (test/pgcluster), IDEM_PGPORT, and build/fault_proxy (IDEM_BUILD: the build directory).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${IDEM_BUILD:-$(pwd)/build}
PY=/usr/bin/python3 # Debian's, with python3-psycopg (not a python3 earlier in PATH)
LANG_=${1:?usage: test/stages/examples.sh LANG ROUTE | clients}
ROUTE=${2:-direct}
# Ports, derived from the cluster's port so that concurrent runs (each with its own IDEM_PGPORT,
# DEVELOPERS.md "Ports and clusters") never meet, 30 per run from 2000 + 30 x (IDEM_PGPORT mod 1000): HTTP at +0..+17, 3 per
# language and route (the service, its proxies at +1 and +2); PgBouncer at +20 + n. All below
# 32768, where Linux's ephemeral ports begin: a port in that range can be the local end of any
# outgoing connection on the machine, and a listener then cannot bind it (a fresh-machine trial
# lost PgBouncer's port so, once in 28 stages).
case "$LANG_" in python) n=1 ;; node) n=2 ;; go) n=3 ;; clients) n=9 ;; *) echo "unknown language $LANG_" >&2; exit 2 ;; esac
base=$((2000 + 30 * (${IDEM_PGPORT:?IDEM_PGPORT is not set} % 1000)))
route_n=0
[ "$ROUTE" = pgbouncer ] && route_n=1
HTTP_PORT=$((base + 3 * (2 * (n % 9 == 0 ? 0 : n - 1) + route_n)))
export IDEM_BOUNCER_PORT=$((base + 20 + n))

bouncer_start() {
    test/pgbouncer stop >/dev/null 2>&1
    BOUNCER_ENV=$(test/pgbouncer start) || { echo "PgBouncer did not start" >&2; exit 1; }
    trap 'test/pgbouncer stop >/dev/null 2>&1' EXIT
}

if [ "$LANG_" = clients ]; then
    bouncer_start
    rc=0
    for t in concurrency_test faults_test; do
        [ -x "$BUILD/$t" ] || { echo "$BUILD/$t is not built (IDEM_CLIENTS=ON)"; rc=1; continue; }
        echo "--- $t --ci through PgBouncer (transaction pooling, port $IDEM_BOUNCER_PORT)"
        (eval "$BOUNCER_ENV" && "$BUILD/$t" --ci) 2>&1 | tail -n 14
        [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    done
    exit $rc
fi

dir=examples/$LANG_
[ -d "$dir" ] || { echo "$dir does not exist: no $LANG_ service to test"; exit 1; }
case "$LANG_" in
python) service=("$PY" "$dir/payments.py") ;;
node)
    if [ -x "$dir/setup-node-pg" ]; then
        NODE_PATH=$("$dir/setup-node-pg") || { echo "examples/node/setup-node-pg failed"; exit 1; }
        export NODE_PATH
    fi
    service=(node "$dir/payments.js") ;;
go)
    bin=$("$dir/build" "$BUILD/examples-go" | tail -n 1) || { echo "examples/go/build failed"; exit 1; }
    service=("$bin") ;;
esac

args=(--lang "$LANG_" --route "$ROUTE" --port "$HTTP_PORT" --proxy "$BUILD/fault_proxy")
if [ "$ROUTE" = pgbouncer ]; then
    bouncer_start
    args+=(--db-port "$IDEM_BOUNCER_PORT")
fi
"$PY" test/examples/http_test.py "${args[@]}" -- "${service[@]}"
rc=$?
if [ "$ROUTE" = pgbouncer ]; then
    # The service's transactions went through PgBouncer (SHOW STATS: total_xact_count).
    xacts=$(psql -qAtX -F ' ' -h 127.0.0.1 -p "$IDEM_BOUNCER_PORT" -U postgres -d pgbouncer \
        -c 'SHOW STATS' 2>/dev/null | awk -v db="examples_$LANG_" '$1 == db { print $2 }')
    echo "PgBouncer carried ${xacts:-no} transactions of database examples_$LANG_"
    [ "${xacts:-0}" -gt 0 ] || rc=1
fi
exit $rc
