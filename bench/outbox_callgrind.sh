#!/usr/bin/env bash
# Instructions per call of the outbox's pgbench scripts, deterministic where the
# throughput of bench/outbox.sh is not: a throwaway cluster of its own (port 54399, or
# IDEM_BENCH_PGPORT) whose postmaster runs under valgrind --tool=callgrind (autovacuum off), one
# pgbench client, synchronous_commit off; per script the backend's instructions of a run of N3
# transactions minus those of a run of N1, divided by the calls between them (emit: 1,000
# emits; relay: 10 batches of 100 on a queue of 4,000 events over 1,000 keys, or none with
# KEYS=0, per event). The pgmq scripts need pgmq's SQL in PGMQ_DIR (../shared/thirdparty/pgmq)
# and are skipped, loudly, without it.
#   bench/outbox_callgrind.sh [SCRIPT...]   default: every emit and relay script of bench/outbox.sh
# Needs valgrind, root or the postgres user. Slow: about a minute per script.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SCRIPTS=${*:-outbox_emit outbox_insert_bare outbox_insert_bare_lock outbox_emit_dedup
    outbox_insert_bare_dedup outbox_emit_plpgsql outbox_relay_idem outbox_relay_idem_batch outbox_relay_plpgsql
    outbox_relay_pgmq_archive outbox_relay_pgmq_delete}
OUT=${OUT:-/tmp/idem-outbox-cg-$$}
mkdir -p "$OUT"
bench_cluster "${IDEM_BENCH_PGPORT:-54399}" on
createdb bench
psql -Xq -v ON_ERROR_STOP=1 -d bench -f bench/pgbench/outbox_setup.sql
PGMQ_DIR=${PGMQ_DIR:-../shared/thirdparty/pgmq}
if [ -f "$PGMQ_DIR/pgmq.sql" ]; then
    psql -Xq -v ON_ERROR_STOP=1 -d bench -f "$PGMQ_DIR/pgmq.sql" \
        -c "SELECT pgmq.create('orders')" >/dev/null
else
    echo "# pgmq: $PGMQ_DIR/pgmq.sql not found: the outbox_relay_pgmq_* scripts are SKIPPED" >&2
    SCRIPTS=$(echo "$SCRIPTS" | tr ' ' '\n' | grep -v pgmq | tr '\n' ' ')
fi
as_pg=""
[ "$(id -u)" = 0 ] && as_pg="runuser -u postgres --" && chown postgres "$OUT"
BIN=$(pg_config --bindir)
$as_pg "$BIN/pg_ctl" -D "$IDEM_PGDIR/data" -m fast -w stop >/dev/null
(cd / && $as_pg valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.%p" "$BIN/postgres" \
    -D "$IDEM_PGDIR/data" -c autovacuum=off >"$OUT/postmaster.log" 2>&1 &)
for _ in $(seq 1 120); do pg_isready -q && break; sleep 1; done
q() { psql -XAtq -v ON_ERROR_STOP=1 -d bench -c "$1" >/dev/null; }
# KEYS=0: the relay_idem scripts' events have no key (no per-key order to keep).
KEY="'k' || (i % ${KEYS:-1000})"
[ "${KEYS:-1000}" = 0 ] && KEY=NULL
PAYLOAD="'{\"order\":\"o-1842\",\"amount\":4200,\"currency\":\"EUR\",\"customer\":\"c-77\"}'::jsonb"

# instructions SCRIPT N: the program total of the backend of one pgbench -t N run of SCRIPT.
instructions() {
    case $1 in
    outbox_relay_idem*)
        q "TRUNCATE idempotency.outbox"
        q "SELECT count(idempotency.idem_outbox_emit('orders', $PAYLOAD, key => $KEY)) FROM generate_series(1, 4000) i"
        q "VACUUM ANALYZE idempotency.outbox" ;;
    outbox_relay_plpgsql)
        q "TRUNCATE bench_o.outbox"
        q "SELECT count(bench_o.emit('orders', $PAYLOAD, 'k' || (i % 1000))) FROM generate_series(1, 4000) i"
        q "VACUUM ANALYZE bench_o.outbox" ;;
    outbox_relay_pgmq_*)
        q "TRUNCATE pgmq.q_orders, pgmq.a_orders"
        q "SELECT pgmq.send_batch('orders', array_agg($PAYLOAD)) FROM generate_series(1, 4000) i"
        q "VACUUM ANALYZE pgmq.q_orders" ;;
    *) q "TRUNCATE idempotency.outbox, bench_bare.outbox, bench_o.outbox" ;;
    esac
    q "CHECKPOINT"
    PGOPTIONS='-c synchronous_commit=off' pgbench -n -M prepared -c 1 -t "$2" -f "bench/pgbench/$1.sql" \
        bench >"$OUT/$1.$2.out" 2>&1 &
    local pgb=$! pid=""
    while [ -z "$pid" ]; do
        sleep 0.3
        pid=$(psql -XAtq -d bench -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench'")
    done
    wait $pgb || { echo "pgbench failed: $1" >&2; tail "$OUT/$1.$2.out" >&2; exit 1; }
    while [ ! -s "$OUT/cg.$pid" ]; do sleep 0.5; done
    sleep 1
    mv "$OUT/cg.$pid" "$OUT/$1.$2.cg"
    callgrind_annotate "$OUT/$1.$2.cg" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

echo "# $(date -u +%FT%TZ) $(bench_build)"
echo "| script | instructions per call |"
echo "|---|---:|"
for s in $SCRIPTS; do
    case $s in
    outbox_relay_*) n1=5 n3=15 per=100 unit=event ;;
    *) n1=500 n3=1500 per=1 unit=emit ;;
    esac
    a=$(instructions "$s" $n1)
    b=$(instructions "$s" $n3)
    echo "| $s | $(( (b - a) / ((n3 - n1) * per) )) per $unit |"
done
echo "results in $OUT"
