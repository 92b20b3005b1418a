# shellcheck shell=bash
# bench/lib.sh: what the pgbench benchmarks share (sourced by bench/load.sh and bench/inbox.sh,
# from the top of the work tree). The summaries are bench/summarise.py.

# bench_cluster PORT FSYNC: a throwaway cluster of its own (test/pgcluster, /tmp/idem-pg-PORT,
# removed first and again on exit) with the installed extension preloaded and fsync = FSYNC
# (test/pgcluster sets it off; on, synchronous_commit = on costs a real WAL flush); exports
# PGHOST, PGPORT, PGUSER.
bench_cluster() {
    export IDEM_PGPORT=$1
    export IDEM_PGDIR=/tmp/idem-pg-$IDEM_PGPORT
    test/pgcluster stop >/dev/null 2>&1 || true
    eval "$(test/pgcluster start)"
    export PGHOST PGPORT PGUSER
    trap 'test/pgcluster stop >/dev/null 2>&1' EXIT
    psql -Xq -c "ALTER SYSTEM SET fsync = $2"
    local as_pg=""
    [ "$(id -u)" = 0 ] && as_pg="runuser -u postgres --"
    $as_pg "$(pg_config --bindir)/pg_ctl" -D "$IDEM_PGDIR/data" -l "$IDEM_PGDIR/server.log" -w \
        restart >/dev/null
}

# bench_build: the installed module and extension version the run measures (the module's time
# and the start of its md5, to tell which build of the work tree it was).
bench_build() {
    local so
    so=$(pg_config --pkglibdir)/idempotency.so
    echo "idempotency $(psql -XAtq -d bench -c "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'"), $so of $(date -u -r "$so" +%FT%TZ), md5 $(md5sum "$so" | cut -c1-12)"
}

# bench_order ROUND VARIANT...: the variants in order on odd rounds, reversed on even ones.
bench_order() {
    local r=$1
    shift
    if [ $((r % 2)) = 0 ]; then printf '%s\n' "$@" | tac | tr '\n' ' '; else echo "$*"; fi
}

# bench_cpu_sample: the time, then "pid ticks" (utime + stime, /proc/<pid>/stat) of every
# pgbench backend of the database bench (root or the postgres user).
bench_cpu_sample() {
    local pids p
    pids=$(psql -XAtq -d bench -c "SELECT pid FROM pg_stat_activity WHERE datname = 'bench' AND application_name = 'pgbench'")
    date +%s.%N
    for p in $pids; do
        awk -v p="$p" '{print p, $14 + $15}' /proc/"$p"/stat 2>/dev/null || true
    done
}

# bench_run NAME CLIENTS SCRIPT [pgbench option...]: one run of SCRIPT on the database bench,
# pgbench -n -M prepared -c CLIENTS -j min(2, CLIENTS) -T $SECS with the caller's PGOPTIONS and
# a per-transaction log ($OUT/NAME.log.*, removed after reading unless KEEP_LOGS=1). Prints
# "TPS P50_MS P99_MS CPU_US": the percentiles of every transaction's latency, from the log, and
# the CPU time of the pgbench backends per transaction between 1 s after the start and 1 s
# before the end (sampled from /proc; "-" when SECS < 4), which depends far less on the other
# load of the machine than TPS does. Stops the benchmark with pgbench's output when a client
# aborted or a transaction failed.
bench_run() {
    local name=$1 clients=$2 script=$3
    shift 3
    local j=2 out="$OUT/$name.out" tps failed p50 p99 cpu sampler=""
    [ "$clients" -lt 2 ] && j=1
    rm -f "$OUT/$name".cpu.*
    if [ "$SECS" -ge 4 ]; then
        (sleep 1 && bench_cpu_sample >"$OUT/$name.cpu.1" && sleep $((SECS - 2)) &&
            bench_cpu_sample >"$OUT/$name.cpu.2") &
        sampler=$!
    fi
    if ! pgbench -n -M prepared -c "$clients" -j $j -T "$SECS" -l --log-prefix="$OUT/$name.log" \
        "$@" -f "$script" bench >"$out" 2>&1; then
        echo "pgbench failed: $name ($script)" >&2
        tail -20 "$out" >&2
        exit 1
    fi
    [ -z "$sampler" ] || wait "$sampler" || true
    tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$out")
    failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out")
    if [ -z "$tps" ] || [ "${failed:-0}" != 0 ]; then
        echo "pgbench: $name ($script): no tps or ${failed:-?} failed transactions" >&2
        tail -20 "$out" >&2
        exit 1
    fi
    read -r p50 p99 _ cpu < <(python3 bench/summarise.py latency "$OUT/$name.log" "$OUT/$name.cpu.1" "$OUT/$name.cpu.2")
    [ "${KEEP_LOGS:-0}" = 1 ] || rm -f "$OUT/$name".log.*
    echo "$tps $p50 $p99 $cpu"
}

# bench_load_pgmq QUEUE VARIANTS: the optional peer pgmq, its SQL from PGMQ_DIR (default
# ../shared/thirdparty/pgmq, the shared third-party tree beside the work tree), loaded into the
# database bench with a queue QUEUE; sets PGMQ to the directory. Without it: says loudly (stdout
# and stderr) that VARIANTS are skipped, leaves PGMQ empty and returns 1.
bench_load_pgmq() {
    local dir=${PGMQ_DIR:-../shared/thirdparty/pgmq}
    # shellcheck disable=SC2034 # PGMQ is read by the script that sources this file
    PGMQ=""
    if [ ! -f "$dir/pgmq.sql" ]; then
        echo "### SKIPPED: pgmq not found ($dir/pgmq.sql): $2 not run" | tee /dev/stderr
        return 1
    fi
    psql -Xq -v ON_ERROR_STOP=1 -d bench -f "$dir/pgmq.sql" -c "SELECT pgmq.create('$1')" >/dev/null
    # shellcheck disable=SC2034 # likewise
    PGMQ=$dir
}
