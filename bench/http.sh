#!/usr/bin/env bash
# What exactly-once costs an HTTP request (issue 19): the example services' POST /v1/payments
# (examples/), each with the extension (idem_claim, INSERT, idem_complete in one transaction)
# against the same service with IDEMPOTENCY=off (BEGIN; INSERT; COMMIT), side by side in one
# run, on a throwaway cluster of its own (port 54396, or IDEM_BENCH_PGPORT).
#   bench/http.sh     env: ROUNDS=5 SECS=10 CLIENTS=8 LANGS="python go" SC="on off" FSYNC=on
#                          MODE=single (or two-phase) OUT=/tmp/...
# Each round runs every variant once (alternating order), on emptied tables after a CHECKPOINT:
# wrk -c CLIENTS -t 2 -d SECS --latency with bench/http/payments.lua (a new Idempotency-Key per
# request: every request is a new payment on both sides). Prints markdown tables for
# bench/RESULTS.md (requests/s, p50/p99 from wrk); goal: exactly_once >= 0.75 x plain.
# Needs root or the postgres user (test/pgcluster), wrk, and the examples' packages.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-10}
CLIENTS=${CLIENTS:-8}
LANGS=${LANGS:-python go}
SC=${SC:-on off}
FSYNC=${FSYNC:-on}
MODE=${MODE:-single}
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
[[ " $LANGS " == *" go "* ]] && GO_BIN=$(examples/go/build "$OUT/go")
service_cmd() {
    case $1 in
    python) echo "$PY examples/python/payments.py" ;;
    go) echo "$GO_BIN" ;;
    node) echo "node examples/node/payments.js" ;;
    esac
}

# start_service LANG IDEMPOTENCY SC: the service on HTTP_PORT, its database sessions with
# synchronous_commit = SC; waits for its "listening on" line.
SVC='' SVC_LOG=''
start_service() {
    SVC_LOG=$OUT/service.$1.$2.$3.$(date +%s%N).log # a new file: no stale "listening on" line
    # shellcheck disable=SC2091 # service_cmd prints the service's command line: run it
    PORT=$HTTP_PORT IDEMPOTENCY=$2 POOL_SIZE=$CLIENTS PGOPTIONS="-c synchronous_commit=$3" \
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
stop_service() { [ -z "$SVC" ] || { kill "$SVC" 2>/dev/null; wait "$SVC" 2>/dev/null; SVC=; } || true; }
trap 'stop_service; test/pgcluster stop >/dev/null 2>&1' EXIT

# wrk's latency distribution in ms ("50%  1.23ms" / "us" / "s").
ms() { awk -v p="$1" '$1 == p { v = $2; u = v; gsub(/[0-9.]/, "", u); gsub(/[a-z]/, "", v);
                                  print (u == "us" ? v / 1000 : u == "s" ? v * 1000 : v) }' "$2"; }

path=/v1/payments
[ "$MODE" = two-phase ] && path="/v1/payments?mode=two-phase"
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(pg_config --version), fsync=$FSYNC, $ROUNDS rounds x $SECS s, $CLIENTS clients, mode $MODE"
echo "# $(bench_build); $(wrk -v 2>&1 | head -n 1 | cut -c1-40)"
: >"$OUT/http.txt"
for sc in $SC; do
    for lang in $LANGS; do
        for r in $(seq 1 "$ROUNDS"); do
            for v in $(bench_order "$r" exactly_once plain); do
                q "TRUNCATE payments, provider_charges, idempotency.records"
                q "CHECKPOINT"
                start_service "$lang" "$([ "$v" = plain ] && echo off || echo on)" "$sc"
                wrk -c "$CLIENTS" -t 2 -d "${SECS}s" --latency -s bench/http/payments.lua \
                    "http://127.0.0.1:$HTTP_PORT$path" >"$OUT/$sc.$lang.$v.$r.wrk"
                stop_service
                f=$OUT/$sc.$lang.$v.$r.wrk
                rps=$(awk '/^Requests\/sec:/ { print $2 }' "$f")
                bad=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$f")
                errs=$(grep -c 'Socket errors' "$f" || true)
                rows=$(q "SELECT count(*) FROM payments")
                records=$(q "SELECT count(*) FROM idempotency.records")
                want=$rows
                [ "$v" = plain ] && want=0
                if [ -n "${bad:-}" ] || [ "$errs" != 0 ] || [ "$rows" = 0 ] || [ "$records" != "$want" ]; then
                    echo "bench/http.sh: $sc $lang $v: failed requests (non-2xx ${bad:-0}, socket errors $errs, payments $rows, records $records)" >&2
                    cat "$f" "$SVC_LOG" >&2
                    exit 1
                fi
                echo "$sc:$lang $v $r $rps $(ms 50% "$f") $(ms 99% "$f") -" | tee -a "$OUT/http.txt"
            done
        done
    done
done
echo
echo "### POST /v1/payments ($MODE mode), $CLIENTS clients (wrk), $ROUNDS rounds x $SECS s, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo
python3 bench/summarise.py runs "$OUT/http.txt" --groups synchronous_commit,language --unit requests/s \
    --variants "exactly_once plain" --ratios "exactly_once/plain/0.75" | tee "$OUT/http.md"
