#!/usr/bin/env bash
# Cost of the inbox (issue 18), pgbench on a throwaway cluster of its own (port 54394, or
# IDEM_BENCH_PGPORT; the cluster directory /tmp/idem-pg-$PORT is removed first and at the end).
#   bench/inbox.sh    env: ROUNDS=5 SECS=10 CLIENTS=8 FSYNC=on PARTS=receive SC="off on" NOTES=0
#                          KEEP_LOGS=0 OUT=/tmp/...
# Part receive: for each synchronous_commit setting and each round, runs every variant once in
# alternating order (pgbench -n -M prepared -c CLIENTS -j 2 -T SECS), each on truncated tables
# after a CHECKPOINT, new event ids only:
#   inbox_receive         SELECT idem_inbox_receive('billing', $id)                  (inline)
#   inbox_receive_queued  SELECT idem_inbox_receive('billing', $id, enqueue => true)
#   processed_event       INSERT INTO processed_event (event_id, consumer_group)
#                         VALUES ($id, 'billing') ON CONFLICT DO NOTHING  (the textbook table)
# goal: each receive >= 0.95 x processed_event, sc off and on.
# NOTES=1 adds variants for information (no goal): inbox_insert_bare(_queued) (the rows
# idem_inbox_receive writes, inserted by hand into a copy of idempotency.inbox).
# p50/p99: the latency of every transaction from the pgbench -l log of each run; the tables give
# the median over the rounds. Prints markdown tables for bench/RESULTS.md; raw figures and the
# pgbench outputs are kept in $OUT. Needs root or the postgres user (test/pgcluster).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-10}
CLIENTS=${CLIENTS:-8}
FSYNC=${FSYNC:-on}
PARTS=${PARTS:-receive}
SC=${SC:-off on}
NOTES=${NOTES:-0}
OUT=${OUT:-/tmp/idem-inbox-$$}
mkdir -p "$OUT"
B=bench/pgbench
SUMMARISE=bench/summarise.py

bench_cluster "${IDEM_BENCH_PGPORT:-54394}" "$FSYNC"
createdb bench
psql -Xq -v ON_ERROR_STOP=1 -d bench -f $B/inbox_setup.sql
q() { psql -XAtq -v ON_ERROR_STOP=1 -d bench -c "$1"; }

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(pg_config --version), fsync=$FSYNC, $ROUNDS rounds x $SECS s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $(bench_build); bench scripts of $(git log -1 --format='%h %s' 2>/dev/null | cut -c1-60)"

if [[ " $PARTS " == *" receive "* ]]; then
    VARIANTS="inbox_receive inbox_receive_queued processed_event"
    RATIOS="inbox_receive/processed_event/0.95 inbox_receive_queued/processed_event/0.95"
    if [ "$NOTES" = 1 ]; then
        VARIANTS="$VARIANTS inbox_insert_bare inbox_insert_bare_queued"
        RATIOS="$RATIOS inbox_insert_bare/processed_event/0 inbox_insert_bare_queued/processed_event/0
                inbox_receive/inbox_insert_bare/0 inbox_receive_queued/inbox_insert_bare_queued/0"
    fi
    : >"$OUT/receive.txt"
    echo "## receive: $CLIENTS clients, new event ids (rows: sc variant round tps p50_ms p99_ms)"
    for sc in $SC; do
        for r in $(seq 1 "$ROUNDS"); do
            for v in $(bench_order "$r" $VARIANTS); do
                q "TRUNCATE idempotency.inbox, bench_bare.processed_event, bench_bare.inbox"
                q "CHECKPOINT"
                res=$(PGOPTIONS="-c synchronous_commit=$sc" bench_run "receive.$sc.$v.$r" "$CLIENTS" "$B/$v.sql")
                echo "$sc $v $r $res" | tee -a "$OUT/receive.txt"
            done
        done
    done
    echo
    echo "### receive: $CLIENTS clients, pgbench -M prepared, $ROUNDS rounds x $SECS s, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    python3 $SUMMARISE runs "$OUT/receive.txt" --groups synchronous_commit --unit TPS \
        --variants "$VARIANTS" --ratios "$RATIOS" | tee "$OUT/receive.md"
    echo
fi

echo "results in $OUT"
