#!/usr/bin/env bash
# What exactly-once costs an HTTP request: the example services' POST
# /v1/payments (examples/, each a user of its client package in clients/) three ways, side by
# side in one run, on a throwaway cluster of its own (port 54396, or IDEM_BENCH_PGPORT):
#   on      the package's middleware (IDEMPOTENCY=on): idem_http_begin, the handler's INSERT,
#           idem_http_end, in one transaction
#   manual  the same handler with the exactly-once record written by hand in the service
#           (IDEMPOTENCY=manual: INSERT INTO manual_keys ... ON CONFLICT DO NOTHING, the handler's
#           INSERT, UPDATE manual_keys with the answer, in one transaction; examples/schema.sql)
#   off     the same handler without idempotency (IDEMPOTENCY=off: BEGIN; INSERT; COMMIT)
#   bench/http.sh     env: ROUNDS=5 SECS=10 WARMUP=2 CLIENTS=8 SERVICES="fastapi flask express fastify go"
#                          SC="on off" PREPARE=off FSYNC=on VARIANTS="on manual off"
#                          MODE=single (or two-phase: VARIANTS="on off", manual has no two-phase) OUT=/tmp/...
# Each round runs every variant once (the order reversed every other round), on emptied tables
# after a CHECKPOINT and a WARMUP-second wrk run that is not measured:
# wrk -c CLIENTS -t 2 -d SECS --latency with bench/http/payments.lua (a new Idempotency-Key per
# request: every request is a new payment on every variant). After each run it checks that every
# answer was 2xx, that payments were written, and that each variant kept one record per payment
# where it keeps them (on: idempotency.records, manual: manual_keys) and none elsewhere. Prints
# markdown tables for bench/RESULTS.md: requests/s, p50/p99 from wrk, the ratios on / manual (goal
# >= 0.9) and on / off (for information), and the CPU time per request (utime + stime from /proc
# around the wrk run, exited children included) of the service's processes and of the PostgreSQL
# server's (the CPU column: their sum). At high load CPU per request rises too (fewer requests per wakeup, colder caches):
# compare variants of one run, never runs.
# PREPARE="off on": each service also with named prepared statements on every variant (the
# services' PREPARE=on, examples/README.md; direct connections), grouped beside "off".
# Needs root or the postgres user (test/pgcluster), wrk, and the examples' packages.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-10}
WARMUP=${WARMUP:-2}
CLIENTS=${CLIENTS:-8}
SERVICES=${SERVICES:-fastapi flask express fastify go}
SC=${SC:-on off}
PREPARE=${PREPARE:-off}
FSYNC=${FSYNC:-on}
MODE=${MODE:-single}
VARIANTS=${VARIANTS:-$([ "$MODE" = two-phase ] && echo on off || echo on manual off)}
OUT=${OUT:-/tmp/idem-http-$$}
HTTP_PORT=${HTTP_PORT:-18950}
mkdir -p "$OUT"
command -v wrk >/dev/null || { echo "bench/http.sh: wrk is missing (apt-get install wrk)" >&2; exit 1; }
PY=/usr/bin/python3 # Debian's, which sees python3-psycopg (a pyenv python3 on PATH would not)

bench_cluster "${IDEM_BENCH_PGPORT:-54396}" "$FSYNC"
createdb bench
export PGDATABASE=bench
psql -Xq -v ON_ERROR_STOP=1 -f examples/schema.sql
q() { psql -XAtq -v ON_ERROR_STOP=1 -c "$1"; }

GO_BIN=
[[ " $SERVICES " == *" go "* ]] && GO_BIN=$(examples/go/build "$OUT/go")
# The npm packages of the Node services (express, fastify, pg), npm ci'd once.
if [[ " $SERVICES " == *" express "* || " $SERVICES " == *" fastify "* ]]; then
    NODE_PATH=$(clients/node/setup)
    export NODE_PATH
fi
# The service's command line, one arm per service (as in test/stages/examples.sh).
service_cmd() {
    case $1 in
    fastapi) echo "env PYTHONPATH=clients/python/src $PY examples/python/fastapi_app.py" ;;
    flask) echo "env PYTHONPATH=clients/python/src $PY examples/python/flask_app.py" ;;
    express) echo "node examples/node/express.js" ;;
    fastify) echo "node examples/node/fastify.js" ;;
    go) echo "$GO_BIN" ;;
    esac
}

# start_service SERVICE IDEMPOTENCY SC PREPARE: the service on HTTP_PORT, its database sessions
# with synchronous_commit = SC, prepared statements on or off; waits for its "listening on" line.
SVC='' SVC_LOG=''
start_service() {
    SVC_LOG=$OUT/service.$1.$2.$3.$4.$(date +%s%N).log # a new file: no stale "listening on" line
    # shellcheck disable=SC2091 # service_cmd prints the service's command line: run it
    PORT=$HTTP_PORT IDEMPOTENCY=$2 POOL_SIZE=$CLIENTS PGOPTIONS="-c synchronous_commit=$3" PREPARE=$4 \
        $(service_cmd "$1") >"$SVC_LOG" 2>&1 &
    SVC=$!
    for _ in $(seq 1 100); do
        grep -q '^listening on' "$SVC_LOG" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "bench/http.sh: $1 did not start" >&2
    cat "$SVC_LOG" >&2
    exit 1
}
# ticks PID...: the CPU time (clock ticks) of those processes that still exist: utime + stime,
# and cutime + cstime, their children's that have exited (a backend whose connection the service
# dropped, e.g. pgx when wrk's end cancels a request's context: counted by the postmaster).
ticks() {
    local p sum=0
    for p in "$@"; do
        [ -r "/proc/$p/stat" ] && sum=$((sum + $(sed 's/.*) //' "/proc/$p/stat" | awk '{ print $12 + $13 + $14 + $15 }')))
    done
    echo "$sum"
}
HZ=$(getconf CLK_TCK)
# The service's processes; the server's (the postmaster and its children, backends included).
svc_pids() { echo "$SVC" $(pgrep -P "$SVC"); }
pg_pids() { local pm; pm=$(head -n 1 "$IDEM_PGDIR/data/postmaster.pid"); echo "$pm" $(pgrep -P "$pm"); }
# us_per REQUESTS TICKS: microseconds of CPU per request.
us_per() { awk -v n="$1" -v t="$2" -v hz="$HZ" 'BEGIN { printf "%.0f", (n > 0 ? t / hz * 1e6 / n : 0) }'; }

stop_service() { [ -z "$SVC" ] || { kill "$SVC" 2>/dev/null; wait "$SVC" 2>/dev/null; SVC=; } || true; }
trap 'stop_service; test/pgcluster stop >/dev/null 2>&1' EXIT

# wrk's latency distribution in ms ("50%  1.23ms" / "us" / "s").
ms() { awk -v p="$1" '$1 == p { v = $2; u = v; gsub(/[0-9.]/, "", u); gsub(/[a-z]/, "", v);
                                  print (u == "us" ? v / 1000 : u == "s" ? v * 1000 : v) }' "$2"; }

path=/v1/payments
[ "$MODE" = two-phase ] && path="/v1/payments?mode=two-phase"
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(pg_config --version), fsync=$FSYNC, $ROUNDS rounds x $SECS s, $CLIENTS clients, mode $MODE, prepared $PREPARE"
echo "# $(bench_build); $(wrk -v 2>&1 | head -n 1 | cut -c1-40)"
: >"$OUT/http.txt"
: >"$OUT/cpu.txt"
for sc in $SC; do
    for svc in $SERVICES; do
        for prep in $PREPARE; do
            for r in $(seq 1 "$ROUNDS"); do
                # shellcheck disable=SC2086 # the variants are words
                for v in $(bench_order "$r" $VARIANTS); do
                    q "TRUNCATE payments, provider_charges, manual_keys, idempotency.records"
                    q "CHECKPOINT"
                    start_service "$svc" "$v" "$sc" "$prep"
                    # A warm-up, not measured: the pool's connections, the JIT of node, the caches.
                    wrk -c "$CLIENTS" -t 2 -d "${WARMUP}s" -s bench/http/payments.lua \
                        "http://127.0.0.1:$HTTP_PORT$path" >"$OUT/$sc.$svc.$prep.$v.$r.warmup"
                    # shellcheck disable=SC2046 # the pid lists are words, split on purpose
                    s0=$(ticks $(svc_pids)) p0=$(ticks $(pg_pids))
                    wrk -c "$CLIENTS" -t 2 -d "${SECS}s" --latency -s bench/http/payments.lua \
                        "http://127.0.0.1:$HTTP_PORT$path" >"$OUT/$sc.$svc.$prep.$v.$r.wrk"
                    # shellcheck disable=SC2046
                    s1=$(ticks $(svc_pids)) p1=$(ticks $(pg_pids))
                    stop_service
                    f=$OUT/$sc.$svc.$prep.$v.$r.wrk
                    rps=$(awk '/^Requests\/sec:/ { print $2 }' "$f")
                    bad=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$f")
                    errs=$(grep -c 'Socket errors' "$f" || true)
                    rows=$(q "SELECT count(*) FROM payments")
                    records=$(q "SELECT count(*) FROM idempotency.records")
                    keys=$(q "SELECT count(*) FROM manual_keys WHERE status = 201")
                    want_records=0 want_keys=0
                    [ "$v" = on ] && want_records=$rows
                    [ "$v" = manual ] && want_keys=$rows
                    if [ -n "${bad:-}" ] || [ "$errs" != 0 ] || [ "$rows" = 0 ] ||
                        [ "$records" != "$want_records" ] || [ "$keys" != "$want_keys" ]; then
                        echo "bench/http.sh: $sc $svc prepared $prep $v: failed requests (non-2xx ${bad:-0}, socket errors $errs, payments $rows, records $records, manual_keys $keys)" >&2
                        cat "$f" "$SVC_LOG" >&2
                        exit 1
                    fi
                    n=$(awk '/ requests in / { print $1 }' "$f")
                    svc_us=$(us_per "$n" $((s1 - s0))) pg_us=$(us_per "$n" $((p1 - p0)))
                    echo "$sc:$svc:$prep $v $r $rps $(ms 50% "$f") $(ms 99% "$f") $((svc_us + pg_us))" | tee -a "$OUT/http.txt"
                    echo "$sc:$svc:$prep:service $v $r $svc_us" >>"$OUT/cpu.txt"
                    echo "$sc:$svc:$prep:postgres $v $r $pg_us" >>"$OUT/cpu.txt"
                done
            done
        done
    done
done
echo
echo "### POST /v1/payments ($MODE mode), $CLIENTS clients (wrk), $ROUNDS rounds x $SECS s, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo
python3 bench/summarise.py runs "$OUT/http.txt" --groups synchronous_commit,service,prepared --unit requests/s \
    --variants "$VARIANTS" --ratios "on/manual/0.9 on/off/0" --per request | tee "$OUT/http.md"
echo
echo "CPU µs per request (utime + stime) of the service's processes and of the PostgreSQL server's:"
echo
python3 bench/summarise.py cpu "$OUT/cpu.txt" --groups synchronous_commit,service,prepared,processes \
    --variants "$VARIANTS" --ratios "on/manual/0 on/off/0" | tee -a "$OUT/http.md"
