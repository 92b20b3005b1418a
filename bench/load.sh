#!/usr/bin/env bash
# Load and cost of idempotency.idem_claim, pgbench on a throwaway cluster of its own (port
# 54395, or IDEM_BENCH_PGPORT; the cluster directory /tmp/idem-pg-$PORT is removed first).
#   bench/load.sh     env: ROUNDS=5 SECS=10 CLIENTS=8 FSYNC=on CPU_ROUNDS=5 CPU_SECS=5
#                          MEMORY_CLAIMS=1000000 MEMORY_SCRIPT=claim_new NOTES=0 SQL_PATH=1
#                          KEEP_LOGS=0 FUNCTION_SCAN=1
#                          (ROUNDS, CPU_ROUNDS or MEMORY_CLAIMS = 0 skips that part)
# For each synchronous_commit setting (off, on) and each round, runs every variant once, in
# alternating order, for SECS seconds with CLIENTS clients (-M prepared), and reports the
# median TPS of each variant, p50/p99 latency (pgbench -l), and the ratios:
#   idem_claim on new keys / bare INSERT ... ON CONFLICT DO NOTHING of the same row, one clock
#       read (now(), DEFAULT now())                                                  (goal >= 0.95)
#   idem_claim on new keys / the PL/pgSQL claim of bench/plpgsql_claim.sql           (goal >= 1.15)
#   idem_claim replays of completed keys / bare primary-key SELECT of the five columns a
#       replay needs (status, fingerprint, resource_id, response, response_status)  (goal >= 0.9)
# NOTES=1 adds the older baselines for information: insert_new_clock (four
# clock_timestamp() per row) and select_replay_star (SELECT *).
# Throughput on a shared 2-core machine is noisy, so each variant's backend CPU time per
# transaction is also measured (one client; /proc/<backend>/stat), a cost that does not depend on
# the other load. Then one backend performs MEMORY_CLAIMS claims of new keys (pgbench -c1, one connection) and
# its private resident memory (RssAnon; VmRSS also counts the shared buffers it touches) is read
# from /proc after a warm-up and at the end.
# test/pgcluster sets fsync = off; FSYNC=on (default) turns it on so that synchronous_commit = on
# costs a real WAL flush. Needs root or the postgres user (reads /proc/<backend>/status).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-10}
CLIENTS=${CLIENTS:-8}
FSYNC=${FSYNC:-on}
MEMORY_CLAIMS=${MEMORY_CLAIMS:-1000000}
MEMORY_SCRIPT=${MEMORY_SCRIPT:-claim_new}
CPU_ROUNDS=${CPU_ROUNDS:-5}
CPU_SECS=${CPU_SECS:-5}
NOTES=${NOTES:-0}
OUT=${OUT:-/tmp/idem-load-$$}
mkdir -p "$OUT"
B=bench/pgbench

bench_cluster "${IDEM_BENCH_PGPORT:-54395}" "$FSYNC"
createdb bench
psql -Xq -v ON_ERROR_STOP=1 -d bench -f $B/setup.sql

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(pg_config --version), fsync=$FSYNC, $ROUNDS rounds x $SECS s, $CLIENTS clients, load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/tps.txt"
echo "# $(bench_build); bench scripts of $(git log -1 --format='%h %s' 2>/dev/null | cut -c1-60)" | tee -a "$OUT/tps.txt"
# A variant ending in _sql runs the same script with idempotency.direct_access = off (the claim
# inserts and reads through SPI statements instead of the access methods).
VARIANTS="claim_new insert_new plpgsql_new claim_replay select_replay"
# The ratios reported (ours/baseline/goal; goal 0 = for information), for both summaries.
RATIOS="claim_new/insert_new/0.95 claim_new/plpgsql_new/1.15 claim_replay/select_replay/0.9"
# SQL_PATH=0 leaves the _sql variants out (the goals are the direct path's; fewer variants per
# round leave room for more, shorter rounds, which share this machine's noise out more evenly).
if [ "${SQL_PATH:-1}" = 1 ]; then
    VARIANTS="$VARIANTS claim_new_sql claim_replay_sql"
    RATIOS="$RATIOS claim_new_sql/insert_new/0.95 claim_replay_sql/select_replay/0.9
        claim_new/claim_new_sql/0 claim_replay/claim_replay_sql/0"
fi
# FUNCTION_SCAN=1 (default) adds the replay planned as a function scan (idempotency.claim_scan =
# off), for information: what idem_claim's custom scan (src/records_claim_scan.cpp) gains.
if [ "${FUNCTION_SCAN:-1}" = 1 ]; then
    VARIANTS="$VARIANTS claim_replay_fscan"
    RATIOS="$RATIOS claim_replay_fscan/select_replay/0 claim_replay/claim_replay_fscan/0"
fi
if [ "$NOTES" = 1 ]; then
    VARIANTS="$VARIANTS insert_new_clock select_replay_star"
    RATIOS="$RATIOS claim_new/insert_new_clock/0 claim_replay/select_replay_star/0"
fi
variant_opt() {
    case "$1" in
    *_sql) echo "-c idempotency.direct_access=off" ;;
    *_fscan) echo "-c idempotency.claim_scan=off" ;;
    esac
}
# The pgbench script of variant $1: the name without its _sql or _fscan.
variant_script() { local v=${1%_sql}; echo "$B/${v%_fscan}.sql"; }
# Every run starts from the same tables: the rows the previous runs inserted (new keys in
# idempotency.records, bench_bare.records, bench_pl.records) are removed and vacuumed away, so
# that a variant never searches a primary key that the others have grown (the replays of
# idempotency.records would otherwise descend an index of every earlier claim_new's keys, while
# bench_bare.replay keeps its 100,000).
reset_tables() {
    psql -Xq -d bench -c "DELETE FROM idempotency.records WHERE key NOT LIKE 'r%'" \
        -c "TRUNCATE bench_bare.records, bench_pl.records" -c "VACUUM idempotency.records" \
        -c "CHECKPOINT"
}
for sc in off on; do
    for r in $(seq 1 "$ROUNDS"); do
        # shellcheck disable=SC2086 # VARIANTS is a list of words, split on purpose
        for v in $(bench_order "$r" $VARIANTS); do
            reset_tables
            res=$(PGOPTIONS="-c synchronous_commit=$sc $(variant_opt "$v")" \
                bench_run "load.$sc.$v.$r" "$CLIENTS" "$(variant_script "$v")")
            echo "$sc $v $r $res" | tee -a "$OUT/tps.txt"
        done
    done
done

if [ "$ROUNDS" -gt 0 ]; then
    echo
    echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    python3 bench/summarise.py runs "$OUT/tps.txt" --groups synchronous_commit --unit TPS \
        --variants "$VARIANTS" --ratios "$RATIOS" | tee "$OUT/summary.md"
fi

# Backend CPU per transaction (load-independent cost): one client, the backend's utime+stime
# from /proc/<pid>/stat (sampled every 0.1 s, last sample before exit) / transactions.
if [ "$CPU_ROUNDS" -gt 0 ]; then
    set +e
    : >"$OUT/cpu.txt"
    for sc in off on; do
        for r in $(seq 1 "$CPU_ROUNDS"); do
            order=$VARIANTS
            # shellcheck disable=SC2086 # VARIANTS is a list of words, split on purpose
            [ $((r % 2)) = 0 ] && order=$(echo $VARIANTS | tr ' ' '\n' | tac | tr '\n' ' ')
            for v in $order; do
                PGOPTIONS="-c synchronous_commit=$sc $(variant_opt "$v")" pgbench -n -M prepared -c 1 \
                    -T "$CPU_SECS" -f "$(variant_script "$v")" bench >"$OUT/cpu-run.txt" 2>&1 &
                pgb=$!
                pid=""
                for _ in $(seq 1 200); do # this run's backend (not the previous one, exiting)
                    pid=$(psql -XAtd bench -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' ORDER BY backend_start DESC LIMIT 1")
                    [ -n "$pid" ] && [ "$pid" != "${prev_pid:-}" ] && [ -e /proc/"$pid" ] && break
                    sleep 0.05
                done
                prev_pid=$pid
                ticks=0
                while kill -0 $pgb 2>/dev/null; do
                    t=$(awk '{print $14 + $15}' /proc/"$pid"/stat 2>/dev/null) && [ -n "$t" ] && ticks=$t
                    sleep 0.1
                done
                n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$OUT/cpu-run.txt")
                echo "$sc $v $r $(awk -v t="$ticks" -v n="${n:-0}" -v hz="$(getconf CLK_TCK)" \
                    'BEGIN { if (n > 0) printf "%.2f", t * 1e6 / hz / n; else print 0 }')" | tee -a "$OUT/cpu.txt"
            done
        done
    done
    python3 bench/summarise.py cpu "$OUT/cpu.txt" --groups synchronous_commit \
        --variants "$VARIANTS" --ratios "$RATIOS" | tee "$OUT/cpu-summary.md"
    set -e
fi

if [ "$MEMORY_CLAIMS" -gt 0 ]; then
    set +e # the backend may exit between two samples
    echo
    echo "memory: one backend, $MEMORY_CLAIMS claims of new keys ($MEMORY_SCRIPT.sql, pgbench -c1 -t $MEMORY_CLAIMS, synchronous_commit=off)"
    PGOPTIONS="-c synchronous_commit=off" pgbench -n -M prepared -c 1 -t "$MEMORY_CLAIMS" \
        -f "$B/$MEMORY_SCRIPT.sql" bench >"$OUT/memory-pgbench.txt" 2>&1 &
    pgb=$!
    pid=""
    for _ in $(seq 1 100); do
        pid=$(psql -XAtd bench -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench'" | head -1)
        [ -n "$pid" ] && break
        sleep 0.1
    done
    rss() { awk '/^(VmRSS|RssAnon):/ {printf "%s=%s ", $1, $2}' /proc/"$pid"/status 2>/dev/null; }
    anon() { awk '/^RssAnon:/ {print $2}' /proc/"$pid"/status 2>/dev/null; }
    # Warm-up: 3 s (>= 10,000 claims at the single-client rate measured here).
    sleep 3
    base=$(anon); echo "after warm-up (~3 s): $(rss)" | tee "$OUT/memory.txt"
    last=$base
    while kill -0 $pgb 2>/dev/null; do
        a=$(anon); [ -n "$a" ] && { last=$a; lastline=$(rss); }
        sleep 0.2
    done
    echo "last sample before exit: $lastline" | tee -a "$OUT/memory.txt"
    grep -E "number of transactions actually processed|^tps" "$OUT/memory-pgbench.txt" | tee -a "$OUT/memory.txt"
    echo "RssAnon growth: $((last - base)) kB" | tee -a "$OUT/memory.txt"
fi
echo "results in $OUT"
