#!/usr/bin/env bash
# What exactly-once costs a request's SQL, without the HTTP service around it: pgbench
# on a throwaway cluster of its own (port 26394, or IDEM_BENCH_PGPORT), CLIENTS clients, the
# request's transaction three ways (bench/pgbench/http_*.sql, the values of http.vars):
#   http_plain          BEGIN, the handler's INSERT ... RETURNING, COMMIT (no idempotency)
#   http_bare           the exactly-once record a careful user writes by hand: the key row
#                       INSERT ... ON CONFLICT DO NOTHING, the handler's INSERT, the response
#                       stored by UPDATE (bench_bare.records, the definition of idempotency.records)
#   http_exactly_once   the claim, the INSERT and idem_complete as clients/go sends them
# each round in alternating order, per synchronous_commit setting (SC) and query mode (MODES:
# prepared = named statements; extended = unnamed ones, as pgx, node-postgres and psycopg send
# them by default and PgBouncer's transaction pooling requires). Ratios: exactly_once / plain
# (the goal, 0.9, is for the whole HTTP request: bench/http.sh), bare / plain (what any
# record kept in the same transaction costs) and exactly_once / bare (ours against the hand-written
# SQL; goal 1.0).
#   bench/http_sql.sh   env: ROUNDS=5 SECS=8 CLIENTS=8 SC="on off" MODES="prepared extended"
#                            FSYNC=on KEEP_LOGS=0 OUT=/tmp/...
# Needs root or the postgres user (test/pgcluster; backend CPU from /proc).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-8}
CLIENTS=${CLIENTS:-8}
SC=${SC:-on off}
MODES=${MODES:-prepared extended}
FSYNC=${FSYNC:-on}
OUT=${OUT:-/tmp/idem-http-sql-$$}
mkdir -p "$OUT"
B=bench/pgbench

bench_cluster "${IDEM_BENCH_PGPORT:-26394}" "$FSYNC"
createdb bench
psql -Xq -v ON_ERROR_STOP=1 -d bench -f $B/setup.sql
psql -Xq -v ON_ERROR_STOP=1 -d bench -f examples/schema.sql >/dev/null 2>&1
read -r -a vars <$B/http.vars
[ "$(id -u)" = 0 ] && chown -R postgres "$OUT" 2>/dev/null || true

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(pg_config --version), fsync=$FSYNC, $ROUNDS rounds x $SECS s, $CLIENTS clients, load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/tps.txt"
echo "# $(bench_build); bench scripts of $(git log -1 --format='%h %s' 2>/dev/null | cut -c1-60)" | tee -a "$OUT/tps.txt"
VARIANTS="http_plain http_bare http_exactly_once"
RATIOS="http_exactly_once/http_plain/0.9 http_bare/http_plain/0 http_exactly_once/http_bare/1.0"
# Every run starts from empty tables (the payments, the records of both sides).
reset_tables() {
    psql -Xq -d bench -c "TRUNCATE payments, bench_bare.records" \
        -c "DELETE FROM idempotency.records WHERE key NOT LIKE 'r%'" \
        -c "VACUUM idempotency.records, bench_bare.records, payments" -c "CHECKPOINT"
}
for mode in $MODES; do
    for sc in $SC; do
        for r in $(seq 1 "$ROUNDS"); do
            # shellcheck disable=SC2086 # VARIANTS is a list of words, split on purpose
            for v in $(bench_order "$r" $VARIANTS); do
                reset_tables
                res=$(PGOPTIONS="-c synchronous_commit=$sc" \
                    bench_run "http.$mode.$sc.$v.$r" "$CLIENTS" "$B/$v.sql" -M "$mode" "${vars[@]}")
                echo "$mode:$sc $v $r $res" | tee -a "$OUT/tps.txt"
            done
        done
    done
done
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
python3 bench/summarise.py runs "$OUT/tps.txt" --groups "query mode,synchronous_commit" --unit TPS \
    --variants "$VARIANTS" --ratios "$RATIOS" | tee "$OUT/summary.md"
echo "results in $OUT"
