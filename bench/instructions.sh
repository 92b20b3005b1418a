#!/usr/bin/env bash
# Instructions per call of bench/load.sh's statements (valgrind callgrind): deterministic where
# throughput and CPU time on this shared machine are not.
#   bench/instructions.sh [SCRIPT...]   default: claim_replay select_replay claim_new insert_new
#                                       (SCRIPT_fscan: SCRIPT with idempotency.claim_scan = off;
#                                       SCRIPT_sql: with idempotency.direct_access = off)
#                                       env: IDEM_BENCH_PGPORT (54396), OUT, MODE (pgbench -M:
#                                       prepared, or extended: unnamed statements, as drivers send)
#   MODE=extended bench/instructions.sh http_plain http_claim http_claim_star http_exactly_once
#   MODE=extended bench/instructions.sh http_plain http_manual http_contract
#                                       an HTTP request's statements (bench/pgbench/http_*.sql)
#   bench/instructions.sh claim_tx claim_complete claim_tx_sql claim_complete_sql
#                                       idem_complete's cost, direct and by SQL: the difference
#                                       of each pair (the SQL pair's claim is by SQL too)
#   TENANT=1 BINDINGS=N bench/instructions.sh claim_replay claim_new
#                                       the statements as a member of role idem_bench_tenant
#                                       (not a superuser), with N scope bindings (docs/tenants.md):
#                                       'bench' bound to that role, N - 1 other prefixes to another
#   bench/instructions.sh inbox_receive inbox_receive_queued processed_event
#                                       (bench/inbox.sh's statements, on inbox_setup.sql; not
#                                       mixed with the others in one call)
# A throwaway cluster of its own (bench/lib.sh, bench/pgbench/setup.sql or inbox_setup.sql), then the postmaster
# under callgrind (autovacuum off). For each script, tables as bench/load.sh resets them, one
# pgbench client (-M prepared, synchronous_commit off) runs it 1,000 times in one backend, then
# 3,000 times in another; per call = (instructions of the second backend - those of the first) /
# 2,000: connection start, the first calls' catalog and plan caching and the exit cancel out.
# Per-function figures: callgrind_annotate $OUT/SCRIPT.3000 (or .1000). Needs valgrind and root
# or the postgres user; takes a minute or two per script.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SCRIPTS=${*:-claim_replay select_replay claim_new insert_new}
OUT=${OUT:-/tmp/idem-instructions-$$}
B=bench/pgbench
command -v valgrind >/dev/null || { echo "bench/instructions.sh: needs valgrind" >&2; exit 2; }
mkdir -p "$OUT"

bench_cluster "${IDEM_BENCH_PGPORT:-54396}" off
createdb bench
case " $SCRIPTS " in
*" inbox_"* | *" processed_event"*) setup=inbox_setup.sql ;;
*) setup=setup.sql ;;
esac
psql -Xq -v ON_ERROR_STOP=1 -d bench -f $B/$setup
# The http_ scripts write the examples' payments table, with the values of http.vars.
vars=()
case " $SCRIPTS " in
*" http_"*)
    psql -Xq -v ON_ERROR_STOP=1 -d bench -f examples/schema.sql >/dev/null
    read -r -a vars <$B/http.vars ;;
esac
role_opt=""
if [ "${TENANT:-0}" = 1 ]; then
    psql -Xq -v ON_ERROR_STOP=1 -d bench <<'SQL'
DROP ROLE IF EXISTS idem_bench_tenant;
DROP ROLE IF EXISTS idem_bench_other;
CREATE ROLE idem_bench_tenant NOLOGIN;
CREATE ROLE idem_bench_other NOLOGIN;
GRANT EXECUTE ON FUNCTION idempotency.idem_claim(text, text, bytea, interval, interval, boolean) TO idem_bench_tenant;
SQL
    psql -Xq -v ON_ERROR_STOP=1 -d bench -v n="${BINDINGS:-0}" <<'SQL'
SELECT idempotency.idem_bind('scope', 'bench', 'idem_bench_tenant') WHERE :n > 0;
SELECT idempotency.idem_bind('scope', 'tenant:' || i || '/', 'idem_bench_other') FROM generate_series(2, :n) i;
SQL
    role_opt="-c role=idem_bench_tenant"
fi
as_pg=""
[ "$(id -u)" = 0 ] && { as_pg="runuser -u postgres --"; chown postgres "$OUT"; }
bin=$(pg_config --bindir)
$as_pg "$bin/pg_ctl" -D "$IDEM_PGDIR/data" -w stop >/dev/null
(cd / && $as_pg valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.%p" "$bin/postgres" \
    -D "$IDEM_PGDIR/data" -c autovacuum=off >"$OUT/postmaster.log" 2>&1 &)
for _ in $(seq 1 120); do pg_isready -q && break; sleep 1; done

# total NAME: the instructions callgrind counted in the dump NAME.
total() {
    callgrind_annotate "$1" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

echo "# $(date -u +%FT%TZ) $(pg_config --version); $(bench_build); TENANT=${TENANT:-0} BINDINGS=${BINDINGS:-0}" | tee "$OUT/instructions.txt"
for s in $SCRIPTS; do
    for n in 1000 3000; do
        case $s in
        inbox_* | processed_event*)
            psql -Xq -d bench -c "TRUNCATE idempotency.inbox, bench_bare.processed_event, bench_bare.inbox" \
                -c "CHECKPOINT" ;;
        *)
            psql -Xq -d bench -c "DELETE FROM idempotency.records WHERE key NOT LIKE 'r%'" \
                -c "TRUNCATE bench_bare.records, bench_pl.records" -c "VACUUM idempotency.records" \
                -c "DO \$\$ BEGIN TRUNCATE payments, manual_keys; EXCEPTION WHEN undefined_table THEN END \$\$" \
                -c "CHECKPOINT" ;;
        esac
        opt=""
        script=${s%_fscan}
        [ "$script" != "$s" ] && opt="-c idempotency.claim_scan=off"
        [ "${s%_sql}" != "$s" ] && { script=${s%_sql}; opt="-c idempotency.direct_access=off"; }
        PGOPTIONS="-c synchronous_commit=off $opt $role_opt" pgbench -n -M "${MODE:-prepared}" -c 1 -t $n "${vars[@]}" -f "$B/$script.sql" \
            bench >"$OUT/$s.$n.out" 2>&1 &
        pgb=$!
        pid=""
        while [ -z "$pid" ] && kill -0 $pgb 2>/dev/null; do
            pid=$(psql -XAtd bench -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench'")
            sleep 0.2
        done
        wait $pgb || { echo "pgbench failed: $s" >&2; tail "$OUT/$s.$n.out" >&2; exit 1; }
        [ -n "$pid" ] || { echo "no backend seen for $s" >&2; exit 1; }
        for _ in $(seq 1 100); do [ -s "$OUT/cg.$pid" ] && break; sleep 0.2; done
        sleep 1 # the dump is written as the backend exits
        mv "$OUT/cg.$pid" "$OUT/$s.$n"
    done
    a=$(total "$OUT/$s.1000")
    b=$(total "$OUT/$s.3000")
    echo "$s $(((b - a) / 2000)) instructions per call" | tee -a "$OUT/instructions.txt"
done
echo "results in $OUT"
