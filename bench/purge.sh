#!/usr/bin/env bash
# Purge benchmark (bench/RESULTS.md "## Purge"); run by hand, not in CI.
#   eval "$(test/pgcluster start)"; bench/purge.sh [rows] [seconds] [clients]
# 1. claim throughput (new keys: claim + complete) with and without an index on expires_at
#    (the index a purge by expires_at would want; it makes every idem_complete a non-HOT update)
# 2. purge throughput: CALL idempotency.idem_purge_loop() on <rows> (default 1,000,000) expired records
# 3. claim latency p50/p99 under pgbench, without and then with a purge loop running beside it,
#    in the same run on the same table (<rows> expired records seeded before each phase)
set -euo pipefail
ROWS=${1:-1000000}
SECS=${2:-20}
CLIENTS=${3:-4}
BATCH=${IDEM_PURGE_BATCH:-1000}
PAUSE=${IDEM_PURGE_PAUSE:-0}
DB=idem_bench_purge
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
q() { PGOPTIONS='-c client_min_messages=warning' psql -X -qtA -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }

PGOPTIONS='-c client_min_messages=warning' psql -X -qtA -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB" >/dev/null
q "CREATE EXTENSION idempotency"
cat >"$WORK/claim.sql" <<'SQL'
\set k random(1, 2000000000)
SELECT idempotency.idem_claim('bench', 'k' || :client_id || '-' || :k);
SELECT idempotency.idem_complete('bench', 'k' || :client_id || '-' || :k, 1, 'r', '{"ok": true}', 201);
SQL

SEEDS=0
seed() { # n expired records (completed, TTL ended a day ago)
    SEEDS=$((SEEDS + 1))
    q "INSERT INTO idempotency.records (scope, key, status, attempt, resource_id, response,
            response_status, created_at, updated_at, expires_at)
        SELECT 'old', 'k$SEEDS-' || g, 'completed', 1, 'r' || g, '{\"ok\": true}', 201,
               now() - interval '2 days', now() - interval '2 days', now() - interval '1 day'
        FROM generate_series(1, $1) g"
    q "VACUUM ANALYZE idempotency.records"
    q "CHECKPOINT"
}
pct() { # file -> "p50 p99" of the per-transaction latency (µs, column 3 of pgbench -l)
    cat "$1".[0-9]* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {
        printf "%.2f %.2f %d\n", a[int(NR*0.50)]/1000, a[int(NR*0.99)]/1000, NR}'
}

[ "${IDEM_SKIP_INDEX:-0}" = 1 ] || {
echo "## claim throughput with and without an index on expires_at (${SECS}s, $CLIENTS clients)"
for idx in none expires_at none expires_at; do
    q "TRUNCATE idempotency.records"
    q "DROP INDEX IF EXISTS idempotency.bench_expires_at"
    [ $idx = expires_at ] && q "CREATE INDEX bench_expires_at ON idempotency.records (expires_at)"
    q "CHECKPOINT"
    q "SELECT pg_stat_reset()" >/dev/null
    tps=$(pgbench -n -d $DB -f "$WORK/claim.sql" -c "$CLIENTS" -j 2 -T "$SECS" 2>&1 |
          sed -n 's/^tps = \([0-9.]*\).*/\1/p')
    sleep 1
    hot=$(q "SELECT round(100.0 * n_tup_hot_upd / greatest(n_tup_upd, 1)) FROM pg_stat_user_tables
             WHERE relid = 'idempotency.records'::regclass")
    echo "index=$idx tps=$tps hot_updates=${hot}%"
done
q "TRUNCATE idempotency.records"
q "DROP INDEX IF EXISTS idempotency.bench_expires_at"
}

echo "## purge throughput ($ROWS expired records, batch $BATCH)"
seed "$ROWS"
start=$(date +%s.%N)
deleted=$(q "CALL idempotency.idem_purge_loop(batch_size => $BATCH, max_duration => '1 hour')")
end=$(date +%s.%N)
awk -v d="$deleted" -v s="$start" -v e="$end" \
    'BEGIN {printf "deleted=%d seconds=%.2f rows_per_s=%.0f\n", d, e - s, d / (e - s)}'

echo "## claim latency without and with a concurrent purge (${SECS}s each, $CLIENTS clients)"
q "TRUNCATE idempotency.records"
seed "$ROWS"
(cd "$WORK" && pgbench -n -d $DB -f claim.sql -c "$CLIENTS" -j 2 -T "$SECS" -l --log-prefix=base \
    >base.txt 2>&1) || { cat "$WORK/base.txt"; exit 1; }
grep -E "^(number of failed|tps)" "$WORK/base.txt"
read -r p50 p99 n < <(pct "$WORK/base")
echo "without purge: p50=${p50}ms p99=${p99}ms transactions=$n"
seed "$ROWS"
(
    end=$(($(date +%s) + SECS))
    total=0
    while [ "$(date +%s)" -lt $end ]; do
        d=$(q "CALL idempotency.idem_purge_loop(batch_size => $BATCH, pause => '$PAUSE', max_duration => '${SECS}s')")
        total=$((total + d))
        [ "$d" = 0 ] && sleep 0.2
    done
    echo "$total" >"$WORK/purged"
) &
purger=$!
(cd "$WORK" && pgbench -n -d $DB -f claim.sql -c "$CLIENTS" -j 2 -T "$SECS" -l --log-prefix=purge \
    >purge.txt 2>&1) || { cat "$WORK/purge.txt"; exit 1; }
grep -E "^(number of failed|tps)" "$WORK/purge.txt"
wait $purger
read -r q50 q99 m < <(pct "$WORK/purge")
echo "with purge:    p50=${q50}ms p99=${q99}ms transactions=$m purged=$(cat "$WORK/purged")"
awk -v a="$p99" -v b="$q99" 'BEGIN {printf "p99 ratio (with/without) = %.2f (goal <= 1.5)\n", b / a}'
psql -X -qtA -d postgres -c "DROP DATABASE $DB WITH (FORCE)" >/dev/null
