#!/usr/bin/env bash
# Citus scale-out benchmark (bench/RESULTS.md "## Scaling out on Citus"); run by hand, not in CI.
# Needs the citus stage's setting: inside the PostgreSQL 17 chroot (IDEM_IN_CHROOT=1), as root,
# with Citus built there (`test/chroot run 17 citus` builds and caches it).
#   ROUNDS=3 SECS=10 CLIENTS="1 8" bench/citus.sh
# 1. test/stages/citus.sh with IDEM_CITUS_KEEP=setup: coordinator + 2 workers (ports
#    IDEM_CITUS_PORT, +1, +2; default IDEM_PGPORT + 2), citus and idempotency created, nothing
#    distributed; then SELECT * FROM idempotency.idem_distribute() on the coordinator (32 shards).
# 2. "one node" = the database idem_onenode on the same coordinator server, with the extension
#    and without the citus extension (so Citus plans nothing there): same binaries, same
#    postgresql.conf, same machine, no distributed table.
# 3. pgbench -n -M simple: in simple mode pgbench writes each :variable into the query text, so
#    the scope reaches Citus as a constant ('tenant-42'), which function delegation needs
#    (-M prepared would send it as a parameter). New keys over 1,000 tenants (scopes), spread
#    over the 32 shards. Variants, alternating order per round, each TRUNCATE'd first:
#      one_claim    one node, SELECT * FROM idempotency.idem_claim(scope, key)                 (a)
#      citus_claim  coordinator, the same statement: delegated to the owning worker  (b)
#      one_tx       one node, BEGIN; claim; idem_complete; COMMIT
#      citus_tx     coordinator, the same transaction: runs on the coordinator, each
#                   statement routed to the shard (single shard: one-phase commit)  (c)
#      citus_pair   coordinator, claim and complete as two delegated calls           (d)
#      citus_2pc    coordinator, BEGIN; claim in tenant t; claim in tenant u; COMMIT: on
#                   two workers half the time, which Citus commits with two-phase commit
#                   (the probe below shows both kinds)
# VARIANTS="..." runs a subset (the ratios then print 0.00 for the missing ones).
# Prints median tps (min-max over rounds), p50/p99 from the pooled pgbench -l logs of all
# rounds, the ratios, and the CPU time per transaction spent by each
# node's backends (from /proc, sampled while pgbench runs; "?" where no round gave a sample).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-10}
CLIENTS=${CLIENTS:-"1 8"}
export IDEM_CITUS_PORT=${IDEM_CITUS_PORT:-$((${IDEM_PGPORT:-25329} + 2))}
P=$IDEM_CITUS_PORT
BASE=/tmp/idem-citus-$P
WORK=$(mktemp -d)
chmod 777 "$WORK"
cleanup() {
    [ -n "${IDEM_BENCH_KEEP:-}" ] || test/stages/citus.sh stop
    [ -n "${IDEM_BENCH_KEEP:-}" ] && echo "kept: $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
q() { # q PORT DB SQL
    PGOPTIONS='-c client_min_messages=warning' psql -X -qtA -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres -d "$2" -c "$3"
}

echo "## setup ($(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg))"
IDEM_CITUS_KEEP=setup test/stages/citus.sh >"$WORK/setup.log" 2>&1 || { cat "$WORK/setup.log"; exit 1; }
grep -E 'ready|registered' "$WORK/setup.log"
q "$P" postgres "SELECT * FROM idempotency.idem_distribute()" >/dev/null
echo "distributed: $(q "$P" postgres "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'idempotency.records'::regclass") shards of idempotency.records over $(q "$P" postgres "SELECT count(*) FROM citus_get_active_worker_nodes()") workers"
q "$P" postgres "DROP DATABASE IF EXISTS idem_onenode" >/dev/null
q "$P" postgres "CREATE DATABASE idem_onenode" >/dev/null
q "$P" idem_onenode "CREATE EXTENSION idempotency"
echo "one node: database idem_onenode on the coordinator, citus extension there: $(q "$P" idem_onenode "SELECT count(*) FROM pg_extension WHERE extname = 'citus'")"

# Which way does each style go? Citus prints the commands it sends to workers.
probe() { # label SQL
    echo "$1: $(PGOPTIONS='-c citus.log_remote_commands=on -c client_min_messages=notice' \
        psql -X -qtA -h 127.0.0.1 -p "$P" -U postgres -d postgres -c "$2" 2>&1 | sed -n 's/^NOTICE:  issuing //p' |
        cut -c 1-90 | tr '\n' '|')"
}
probe "delegated claim sends" "SELECT * FROM idempotency.idem_claim('tenant-1', 'probe-1')"
probe "transaction claim sends" "BEGIN; SELECT * FROM idempotency.idem_claim('tenant-1', 'probe-2'); COMMIT;"
# citus_2pc picks two tenants at random: on two workers half the time (two-phase commit), on one
# worker otherwise (one phase). Show both on a pair of each kind.
owner() { q "$P" postgres "SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = get_shard_id_for_distribution_column('idempotency.records', 'tenant-$1')"; }
same=2 other=2
while [ "$(owner $same)" != "$(owner 1)" ]; do same=$((same + 1)); done
while [ "$(owner $other)" = "$(owner 1)" ]; do other=$((other + 1)); done
for u in $same $other; do
    probe "two claims, tenant-1 and tenant-$u (worker :$(owner 1), :$(owner "$u")), send" \
        "BEGIN; SELECT * FROM idempotency.idem_claim('tenant-1', 'probe-3'); SELECT * FROM idempotency.idem_claim('tenant-$u', 'probe-3'); COMMIT;" |
        grep -oE '^[^|]*send|(PREPARE TRANSACTION|COMMIT PREPARED|COMMIT)\b' | tr '\n' ' '
    echo
done

V='\set t random(1, 1000)
\set u random(1, 1000)
\set k random(1, 2000000000)'
CLAIM="SELECT * FROM idempotency.idem_claim('tenant-:t', 'k:client_id-:k');"
COMPLETE="SELECT idempotency.idem_complete('tenant-:t', 'k:client_id-:k', 1, 'r', '{\"ok\": true}', 201);"
printf '%s\n%s\n' "$V" "$CLAIM" >"$WORK/claim.sql"
printf '%s\nBEGIN;\n%s\n%s\nCOMMIT;\n' "$V" "$CLAIM" "$COMPLETE" >"$WORK/tx.sql"
printf '%s\n%s\n%s\n' "$V" "$CLAIM" "$COMPLETE" >"$WORK/pair.sql"
printf "%s\nBEGIN;\n%s\nSELECT * FROM idempotency.idem_claim('tenant-:u', 'k:client_id-:k');\nCOMMIT;\n" "$V" "$CLAIM" >"$WORK/2pc.sql"
VARIANTS=${VARIANTS:-"one_claim citus_claim one_tx citus_tx citus_pair citus_2pc"}
db_of() { case $1 in one_*) echo idem_onenode ;; *) echo postgres ;; esac; }
file_of() { case $1 in *_claim) echo claim.sql ;; *_tx) echo tx.sql ;; *_pair) echo pair.sql ;; *_2pc) echo 2pc.sql ;; esac; }

# CPU ticks (utime + stime) of each backend of the postmaster on port $1: "pid ticks" lines.
pm_of() { head -n 1 "$BASE/$1/data/postmaster.pid"; }
snap() {
    for n in coordinator worker1 worker2; do
        local pm
        pm=$(pm_of $n)
        cat /proc/[0-9]*/stat 2>/dev/null | awk -v pp="$pm" -v n=$n '$4 == pp {print n, $1, $14 + $15}'
    done
    date +%s.%N
}
cpu_of() { # before after tps -> "coordinator µs worker1 µs worker2 µs" of CPU per transaction
    awk -v tps="$3" 'FNR == 1 {f++} NF == 1 {t[f] = $1; next} f == 1 {a[$1 " " $2] = $3; next}
        ($1 " " $2) in a {d[$1] += $3 - a[$1 " " $2]}
        END {if (!(1 in t) || !(2 in t)) exit; secs = t[2] - t[1]; for (n in d) printf "%s %.0f ", n, d[n] * 10000 / (tps * secs); print ""}' "$1" "$2"
}

run() { # variant clients round
    local v=$1 c=$2 r=$3 db j=1
    db=$(db_of "$v")
    [ "$c" -gt 1 ] && j=2
    q "$P" "$db" "TRUNCATE idempotency.records"
    for p in $P $((P + 1)) $((P + 2)); do q "$p" postgres "CHECKPOINT"; done
    # (a sample without its closing time line, or missing, counts for nothing: seen at 8 clients
    # under load, where it gave garbage before this check)
    (sleep 2 && snap >"$WORK/s1.$v.$c.$r.tmp" && mv "$WORK/s1.$v.$c.$r.tmp" "$WORK/s1.$v.$c.$r" &&
        sleep $((SECS - 3)) && snap >"$WORK/s2.$v.$c.$r.tmp" && mv "$WORK/s2.$v.$c.$r.tmp" "$WORK/s2.$v.$c.$r") &
    (cd "$WORK" && pgbench -n -M simple -h 127.0.0.1 -p "$P" -U postgres -d "$db" -f "$(file_of "$v")" \
        -c "$c" -j $j -T "$SECS" -l --log-prefix="log.$v.$c.$r" >"out.$v.$c.$r" 2>&1) ||
        { cat "$WORK/out.$v.$c.$r"; exit 1; }
    wait
    local tps failed
    tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$WORK/out.$v.$c.$r")
    failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$WORK/out.$v.$c.$r")
    echo "$tps" >"$WORK/tps.$v.$c.$r"
    [ "${failed:-0}" = 0 ] || echo "WARNING: $v c=$c round $r: $failed failed transactions"
    cpu_of "$WORK/s1.$v.$c.$r" "$WORK/s2.$v.$c.$r" "$tps" >"$WORK/cpu.$v.$c.$r" 2>/dev/null || :
    printf '  round %d  %-11s c=%d  tps=%s\n' "$r" "$v" "$c" "$tps"
}

echo "## $ROUNDS rounds x ${SECS}s, clients: $CLIENTS (pgbench -n -M simple)"
for r in $(seq 1 "$ROUNDS"); do
    order=$VARIANTS
    # shellcheck disable=SC2086 # VARIANTS is a list of words, split on purpose
    [ $((r % 2)) = 0 ] && order=$(echo $VARIANTS | tr ' ' '\n' | tac | tr '\n' ' ')
    for c in $CLIENTS; do
        for v in $order; do run $v "$c" "$r"; done
    done
done
echo "## load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rows in the distributed idempotency.records after the last run: $(q "$P" postgres "SELECT count(*) FROM idempotency.records")"

med() { sort -n | awk '{a[NR] = $1} END {if (NR == 0) {printf "?"; exit} printf "%.0f", (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
pct() { # prefix -> "p50 p99 n" in ms of the per-transaction latency (column 3 of pgbench -l, µs)
    cat "$WORK"/"$1".* | awk '{print $3}' | sort -n | awk '{a[NR] = $1} END {
        printf "%.2f %.2f %d\n", a[int(NR * 0.50)] / 1000, a[int(NR * 0.99)] / 1000, NR}'
}
echo "## results"
printf '| %-11s | %7s | %-20s | %8s | %8s | %-36s |\n' variant clients "median tps (min-max)" "p50 ms" "p99 ms" "CPU µs/tx: coordinator worker1 worker2"
for c in $CLIENTS; do
    for v in $VARIANTS; do
        m=$(cat "$WORK"/tps."$v"."$c".* | med)
        range=$(cat "$WORK"/tps."$v"."$c".* | sort -n | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.0f-%.0f", lo, hi}')
        read -r p50 p99 n < <(pct "log.$v.$c")
        cpu=$(for n in coordinator worker1 worker2; do
                cat "$WORK"/cpu."$v"."$c".* | awk -v n=$n '{for (i = 1; i < NF; i += 2) if ($i == n) print $(i + 1)}' | med
                echo -n " "
            done)
        printf '| %-11s | %7s | %-20s | %8s | %8s | %-36s |\n' "$v" "$c" "$m ($range)" "$p50" "$p99" "$cpu"
    done
done
echo "## ratios (median of per-round ratios, min-max; same run)"
ratio() { # a b clients
    for r in $(seq 1 "$ROUNDS"); do
        awk -v a="$(cat "$WORK/tps.$1.$3.$r")" -v b="$(cat "$WORK/tps.$2.$3.$r")" 'BEGIN {printf "%.3f\n", a / b}'
    done | sort -n | awk '{a[NR] = $1} END {printf "%.2f (%.2f-%.2f)", a[int((NR + 1) / 2)], a[1], a[NR]}'
}
for c in $CLIENTS; do
    echo "c=$c  (b)/(a) citus_claim/one_claim = $(ratio citus_claim one_claim "$c")   (c) citus_tx/one_tx = $(ratio citus_tx one_tx "$c")   (d) citus_pair/one_tx = $(ratio citus_pair one_tx "$c")   citus_2pc/citus_tx = $(ratio citus_2pc citus_tx "$c")"
done
