#!/usr/bin/env bash
#: stage  examples
#: about  the client packages' tests, the five example services over HTTP through the fault proxy (direct and through PgBouncer), the client programs through PgBouncer
#: needs  server programs deps:examples
#: runs   host
#: order  190
#: parts  yes
# The examples stage, one part per call (test/run-all runs every part, one result each):
#   test/stages/examples.sh --parts          the parts, one per line, in the order they run
#   test/stages/examples.sh clients:LANG     the tests of the client package clients/LANG (python,
#                                            node, go)
#   test/stages/examples.sh SERVICE:ROUTE    SERVICE: fastapi | flask | express | fastify | go (the
#                                            services of examples/, each a user of its client
#                                            package in clients/); ROUTE: direct | pgbouncer
#   test/stages/examples.sh clients:pgbouncer  build/concurrency_test and build/faults_test
#                                            through PgBouncer
# SERVICE ROUTE: test/http/http_test.py drives the service over HTTP through the fault proxy,
# the service connecting to the cluster directly or through a throwaway PgBouncer in transaction
# pooling mode (test/pgbouncer), which must then have carried its transactions. A service whose
# files do not exist is a failure. Needs the libpq environment of a running cluster
# (test/pgcluster), IDEM_PGPORT, and build/fault_proxy (IDEM_BUILD: the build directory).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${IDEM_BUILD:-$(pwd)/build}
PY=/usr/bin/python3 # Debian's, with python3-psycopg (not a python3 earlier in PATH)
if [ "${1:-}" = --parts ]; then
    printf '%s\n' clients:python clients:node clients:go
    for service in fastapi flask express fastify go; do printf '%s\n' "$service:direct" "$service:pgbouncer"; done
    echo clients:pgbouncer
    exit 0
fi
SERVICE=${1:?usage: test/stages/examples.sh --parts | PART}
ROUTE=${2:-direct}
case "$SERVICE" in
clients:pgbouncer) SERVICE=clients ;;
clients:*) ;;
*:*) ROUTE=${SERVICE#*:} SERVICE=${SERVICE%%:*} ;;
esac
# clients:LANG: the client package's own tests (clients/LANG), against the cluster, in a database
# of their own with the extension.
case "$SERVICE" in
clients:*)
    db=clients_${SERVICE#clients:}
    psql -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" &&
        psql -qX -v ON_ERROR_STOP=1 -d "$db" -c 'CREATE EXTENSION idempotency' || exit 1
    # The package's own tests and the HTTP contract's conformance cases (clients/run-tests).
    PGDATABASE=$db IDEM_PYTHON=$PY clients/run-tests "${SERVICE#clients:}"
    exit ;;
esac
# Ports, derived from the cluster's port so that concurrent runs (each with its own IDEM_PGPORT,
# docs/testing.md "Ports and clusters") never meet, 40 per run from 2000 + 40 x (IDEM_PGPORT mod
# 700): HTTP at +0..+29, 3 per service and route (the service, its proxies at +1 and +2);
# PgBouncer at +30 + n. All below 32768, where Linux's ephemeral ports begin: a port in that
# range can be the local end of any outgoing connection on the machine, and a listener then
# cannot bind it (a fresh-machine trial lost PgBouncer's port so, once in 28 stages).
case "$SERVICE" in
fastapi) n=1 ;; flask) n=2 ;; express) n=3 ;; fastify) n=4 ;; go) n=5 ;; clients) n=9 ;;
*) echo "unknown service $SERVICE" >&2; exit 2 ;;
esac
base=$((2000 + 40 * (${IDEM_PGPORT:?IDEM_PGPORT is not set} % 700)))
route_n=0
[ "$ROUTE" = pgbouncer ] && route_n=1
HTTP_PORT=$((base + 3 * (2 * (n % 9 == 0 ? 0 : n - 1) + route_n)))
export IDEM_BOUNCER_PORT=$((base + 30 + n))

bouncer_start() {
    test/pgbouncer stop >/dev/null 2>&1
    BOUNCER_ENV=$(test/pgbouncer start) || { echo "PgBouncer did not start" >&2; exit 1; }
    trap 'test/pgbouncer stop >/dev/null 2>&1' EXIT
}

if [ "$SERVICE" = clients ]; then
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

# The service's command line, one arm per service (its client package's engineer keeps it).
case "$SERVICE" in
fastapi) service=(env PYTHONPATH=clients/python/src "$PY" examples/python/fastapi_app.py) ;;
flask) service=(env PYTHONPATH=clients/python/src "$PY" examples/python/flask_app.py) ;;
express | fastify)
    # The npm packages of clients/node/package-lock.json (express, fastify, pg), npm ci'd once.
    NODE_PATH=$(clients/node/setup) || { echo "clients/node/setup failed"; exit 1; }
    export NODE_PATH
    service=(node "examples/node/$SERVICE.js") ;;
go)
    bin=$(examples/go/build "$BUILD/examples-go" | tail -n 1) || { echo "examples/go/build failed"; exit 1; }
    service=("$bin") ;;
esac
[ -e "${service[-1]}" ] || { echo "${service[-1]} does not exist: no $SERVICE service to test"; exit 1; }

args=(--lang "$SERVICE" --route "$ROUTE" --port "$HTTP_PORT" --proxy "$BUILD/fault_proxy")
if [ "$ROUTE" = pgbouncer ]; then
    bouncer_start
    args+=(--db-port "$IDEM_BOUNCER_PORT")
fi
"$PY" test/http/http_test.py "${args[@]}" -- "${service[@]}"
rc=$?
if [ "$ROUTE" = pgbouncer ]; then
    # The service's transactions went through PgBouncer (SHOW STATS: total_xact_count).
    xacts=$(psql -qAtX -F ' ' -h 127.0.0.1 -p "$IDEM_BOUNCER_PORT" -U postgres -d pgbouncer \
        -c 'SHOW STATS' 2>/dev/null | awk -v db="examples_$SERVICE" '$1 == db { print $2 }')
    echo "PgBouncer carried ${xacts:-no} transactions of database examples_$SERVICE"
    [ "${xacts:-0}" -gt 0 ] || rc=1
fi
exit $rc
