#!/usr/bin/env bash
#: stage  citus
#: about  coordinator + 2 workers, Citus built from ../shared/thirdparty (SKIPPED without it)
#: needs  install deps:citus
#: runs   named matrix:17
#: order  120
# Scale-out on Citus: a coordinator and two workers, each a throwaway cluster of
# this machine's PostgreSQL (16-18) with shared_preload_libraries = 'citus,pg_cron,idempotency'
# (Citus must come first), trust auth on 127.0.0.1, max_prepared_transactions for Citus's
# two-phase commit. Citus is built from ../shared/thirdparty/citus-*.tar.gz (relative to the
# repository root; IDEM_CITUS_TARBALL overrides) once and cached in IDEM_CITUS_CACHE (default
# /var/cache/idem-citus): a second run installs nothing, a run that finds the installed
# citus.so missing or different from the cached build installs it again, a new tarball is
# built anew. test/chroot copies the tarball into the chroot, so `test/run-all --pg 17 citus`
# (or `test/chroot run 17 citus`) runs it in the PostgreSQL 17 chroot.
#
# It sets the cluster up as a user would (docs/citus.md "The three commands"): CREATE
# EXTENSION citus on every node, the workers registered on the coordinator, CREATE EXTENSION
# idempotency on the coordinator (Citus runs it on the workers itself; the stage checks that it
# did), then SELECT * FROM idempotency.idem_distribute(). Every row must then land in the shard that owns
# its scope (or consumer), on the worker that holds that shard, and none in a shell table (the
# relation itself, counted with pgstattuple on every node); then every outcome on every worker,
# a 40-way race, both call styles, the inbox, the purge and the outbox (the sections below say
# what each checks).
#
# Exit status: 0 passed, 1 failed, 77 skipped (no tarball, a major Citus does not support, or
# outside a chroot without IDEM_CITUS_INSTALL=1: it installs Citus into this machine's
# PostgreSQL). test/run-all reports 77 as SKIPPED, never as passed; IDEM_REQUIRE_CITUS=1 (for a
# CI that has the tarball) turns a skip into a failure.
#   test/stages/citus.sh          the stage (test/run-all citus runs it)
#   IDEM_CITUS_KEEP=1 ...         leave the three clusters running for a look (prints how)
#   test/stages/citus.sh stop     stop and remove them
# Ports: IDEM_CITUS_PORT (default IDEM_PGPORT + 2) for the coordinator, the next two for the
# workers; cluster directories under /tmp/idem-citus-<port>.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
PORT0=${IDEM_CITUS_PORT:-$((${IDEM_PGPORT:-25329} + 2))}
PORTS=("$PORT0" "$((PORT0 + 1))" "$((PORT0 + 2))")
NAMES=(coordinator worker1 worker2)
BASE=/tmp/idem-citus-$PORT0
CACHE=${IDEM_CITUS_CACHE:-/var/cache/idem-citus}
BIN=$(pg_config --bindir)
MAJOR=$(pg_config --version | sed -n 's/^PostgreSQL \([0-9]*\).*/\1/p')

say() { echo "citus: $*"; }
fail() {
    echo "citus: FAIL: $*" >&2
    [ -n "${IDEM_CITUS_KEEP:-}" ] && [ -d "$BASE" ] &&
        echo "citus: clusters kept for a look (ports ${PORTS[*]}); stop: test/stages/citus.sh stop" >&2
    exit 1
}
skip() {
    if [ -n "${IDEM_REQUIRE_CITUS:-}" ]; then fail "cannot run, and IDEM_REQUIRE_CITUS is set: $*"; fi
    printf '\n%s\n' "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
    echo "!!! citus: SKIPPED, NOT RUN: $*"
    echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
    exit 77
}
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
# shellcheck source=test/lib.sh
. test/lib.sh # as_pg
# q NODE SQL: one statement on node 0 (coordinator), 1 or 2 (workers), unaligned, no headers.
q() {
    PGOPTIONS='-c client_min_messages=warning' psql -X -qtA -v ON_ERROR_STOP=1 -h 127.0.0.1 \
        -p "${PORTS[$1]}" -U postgres -d postgres -c "$2"
}

stop_all() {
    for i in 0 1 2; do
        local dir=$BASE/${NAMES[$i]}
        [ -f "$dir/data/PG_VERSION" ] && as_pg "$BIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1
    done
    rm -rf "$BASE"
}
if [ "${1:-}" = stop ]; then
    stop_all
    exit 0
fi

# --- Citus: find the tarball, build once, install ------------------------------------------------
tarball=${IDEM_CITUS_TARBALL:-$(printf '%s\n' "$ROOT"/../shared/thirdparty/citus-*.tar.gz | sort -V | tail -n 1)}
[ -n "$tarball" ] && [ -f "$tarball" ] ||
    skip "no Citus source: ${IDEM_CITUS_TARBALL:-$(cd "$ROOT/.." && pwd)/shared/thirdparty/citus-*.tar.gz} is absent (the repository's ../shared/thirdparty; or set IDEM_CITUS_TARBALL)"
case "$MAJOR" in
16 | 17 | 18) ;;
*) skip "Citus 14 needs PostgreSQL 16-18, this is $MAJOR (run: test/run-all --pg 17 citus)" ;;
esac
if [ -z "${IDEM_IN_CHROOT:-}" ] && [ -z "${IDEM_CITUS_INSTALL:-}" ]; then
    skip "would install Citus into this machine's PostgreSQL $MAJOR; run it in a chroot (test/run-all --pg 17 citus) or set IDEM_CITUS_INSTALL=1"
fi

version=$(basename "$tarball" .tar.gz)
version=${version#citus-}
sum=$(sha256sum "$tarball" | cut -c 1-12)
src=$CACHE/citus-$version-pg$MAJOR-$sum
pkglib=$(pg_config --pkglibdir)
t0=$(date +%s.%N)
if [ ! -f "$src/.idem-built" ]; then
    [ "$(id -u)" = 0 ] || fail "building Citus into $CACHE needs root"
    say "building Citus $version for PostgreSQL $MAJOR in $src (once; ~75 s on 2 idle cores)"
    rm -rf "$src" && mkdir -p "$src" || fail "cannot create $src"
    tar -C "$src" --strip-components=1 -xzf "$tarball" || fail "cannot unpack $tarball"
    (cd "$src" && ./configure --without-libcurl >"$src/configure.log" 2>&1) ||
        { tail -n 30 "$src/configure.log" >&2; fail "Citus configure failed (test/install-deps citus installs its packages)"; }
    (cd "$src" && make -j2 >"$src/make.log" 2>&1) || { tail -n 30 "$src/make.log" >&2; fail "Citus build failed"; }
    touch "$src/.idem-built"
fi
if ! cmp -s "$src/src/backend/distributed/citus.so" "$pkglib/citus.so" ||
    [ ! -f "$(pg_config --sharedir)/extension/citus.control" ]; then
    [ "$(id -u)" = 0 ] || fail "installing Citus into $pkglib needs root"
    say "installing Citus $version from $src"
    (cd "$src" && make install >"$src/install.log" 2>&1) || { tail -n 30 "$src/install.log" >&2; fail "Citus make install failed"; }
fi
say "Citus $version ready for PostgreSQL $MAJOR ($(since "$t0") s)"

# --- three clusters -------------------------------------------------------------------------
stop_all
if [ -z "${IDEM_CITUS_KEEP:-}" ]; then
    trap stop_all EXIT
fi
mkdir -p "$BASE" && chown postgres: "$BASE"
for i in 0 1 2; do
    dir=$BASE/${NAMES[$i]}
    mkdir -p "$dir" && chown postgres: "$dir"
    as_pg "$BIN/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync -E UTF8 --locale=C \
        >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; fail "initdb ${NAMES[$i]}"; }
    cat >>"$dir/data/postgresql.conf" <<CONF
port = ${PORTS[$i]}
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
shared_preload_libraries = 'citus,pg_cron,idempotency'
cron.database_name = 'postgres'
max_connections = 300
max_prepared_transactions = 300
max_worker_processes = 32
shared_buffers = 128MB
fsync = off
full_page_writes = off
max_wal_size = 4GB
log_min_messages = warning
log_line_prefix = '%m [%p] ${NAMES[$i]} '
max_locks_per_transaction = 256
CONF
done
t0=$(date +%s.%N)
for i in 0 1 2; do
    dir=$BASE/${NAMES[$i]}
    as_pg "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null ||
        { tail -n 30 "$dir/server.log" >&2; fail "${NAMES[$i]} did not start"; }
done

# CREATE EXTENSION citus on every node (each node needs its own), then the workers join.
for i in 0 1 2; do q $i "CREATE EXTENSION citus" || fail "CREATE EXTENSION citus on ${NAMES[$i]}"; done
q 0 "SELECT citus_set_coordinator_host('127.0.0.1', ${PORTS[0]})" >/dev/null || fail "citus_set_coordinator_host"
for i in 1 2; do
    q 0 "SELECT citus_add_node('127.0.0.1', ${PORTS[$i]})" >/dev/null || fail "citus_add_node ${NAMES[$i]}"
done
workers=$(q 0 "SELECT count(*) FROM citus_get_active_worker_nodes()")
[ "$workers" = 2 ] || fail "expected 2 active workers, got $workers"
say "coordinator :${PORTS[0]}, workers :${PORTS[1]} :${PORTS[2]} up and registered ($(since "$t0") s)"

# CREATE EXTENSION idempotency on the coordinator only: Citus propagates it (IF NOT EXISTS,
# with its schema) to every worker in the metadata; a node added later gets it from
# citus_add_node. It must be there on each worker, or delegated calls would fail.
q 0 "CREATE EXTENSION idempotency" || fail "CREATE EXTENSION idempotency"
for i in 1 2; do
    v=$(q $i "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'")
    [ -n "$v" ] || fail "Citus did not propagate CREATE EXTENSION idempotency to ${NAMES[$i]}"
    say "${NAMES[$i]} has idempotency $v (propagated by Citus)"
done

if [ -n "${IDEM_CITUS_KEEP:-}" ] && [ "${IDEM_CITUS_KEEP}" = setup ]; then
    say "clusters kept, nothing distributed: psql -h 127.0.0.1 -U postgres -p ${PORTS[0]} (workers ${PORTS[1]}, ${PORTS[2]}); stop: test/stages/citus.sh stop"
    exit 0
fi

# --- idempotency.idem_distribute() (docs/citus.md) ---------------------------------------------------------
# records by scope; the inbox and its ordering guard by consumer, co-located (one shard group
# holds a consumer's events and entities, so idem_inbox_* stay single-shard); the outbox by
# topic in a group of its own; the per-key functions delegated by scope / consumer, and
# idem_outbox_next by topic.
out=$(q 0 "SELECT object || ': ' || action FROM idempotency.idem_distribute()") || fail "idempotency.idem_distribute()"
# shellcheck disable=SC2001 # a prefix on every line of $out
echo "$out" | sed 's/^/citus:   /'
n_dist=$(echo "$out" | grep -c ': distributed by ')
n_deleg=$(echo "$out" | grep -c ': delegated by ')
[ "$n_dist" = 4 ] && [ "$n_deleg" = 12 ] ||
    fail "idempotency.idem_distribute() should distribute 4 tables and delegate 12 functions, did $n_dist and $n_deleg"
again=$(q 0 "SELECT count(*) FILTER (WHERE action NOT LIKE 'unchanged%') || ' ' || count(*) FROM idempotency.idem_distribute()") ||
    fail "idempotency.idem_distribute() a second time"
[ "$again" = "0 16" ] || fail "a second idempotency.idem_distribute() should change nothing (0 of 16 changed), got '$again'"
say "a second idempotency.idem_distribute() changed nothing"
for i in 1 2; do
    err=$(q $i "SELECT * FROM idempotency.idem_distribute()" 2>&1) && fail "idempotency.idem_distribute() on ${NAMES[$i]} should be refused"
    echo "$err" | grep -q 'coordinator' || fail "idempotency.idem_distribute() on ${NAMES[$i]}: unexpected error: $err"
done
say "idempotency.idem_distribute() on a worker is refused"
# (citus_tables and citus_shards leave out tables that belong to an extension: read pg_dist_*)
say "distributed: $(q 0 "SELECT string_agg(p.logicalrelid::regclass || ' ' || pg_catalog.column_to_column_name(p.logicalrelid, p.partkey)
     || ' (' || (SELECT count(*) FROM pg_dist_shard s WHERE s.logicalrelid = p.logicalrelid) || ' shards, colocation ' || p.colocationid || ')', ', '
     ORDER BY p.logicalrelid::regclass::text) FROM pg_dist_partition p")"

# One claim, delegated (SELECT ... FROM f(constant scope, ...) outside a transaction block).
scope=tenant-1/orders
outcome=$(q 0 "SELECT outcome || ' ' || attempt FROM idempotency.idem_claim('$scope', 'key-1')") || fail "idem_claim"
say "idempotency.idem_claim('$scope', 'key-1') on the coordinator answered: $outcome"
[ "$outcome" = "claimed 1" ] || fail "expected 'claimed 1', got '$outcome'"

# Where did the row go? The shard that owns the scope, on the worker that holds it, must have
# it; no shell table (the relation idempotency.records itself, on any node) may hold a row.
shard=$(q 0 "SELECT get_shard_id_for_distribution_column('idempotency.records', '$scope')")
owner_port=$(q 0 "SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = $shard")
shard_rel=$(q 0 "SELECT shard_name('idempotency.records'::regclass, $shard)")
owner=0
for i in 1 2; do [ "${PORTS[$i]}" = "$owner_port" ] && owner=$i; done
[ $owner != 0 ] || fail "shard $shard is on port $owner_port, not on a worker"
in_shard=$(q $owner "SELECT count(*) FROM $shard_rel")
in_dist=$(q 0 "SELECT count(*) FROM idempotency.records")
looked=$(q 0 "SELECT count(*) FROM idempotency.idem_lookup('$scope', 'key-1')")
# pgstattuple reads the pages of the relation itself (its OID), never a shard; created on the
# coordinator, Citus creates it on the workers too.
q 0 "CREATE EXTENSION IF NOT EXISTS pgstattuple" >/dev/null || fail "CREATE EXTENSION pgstattuple"
shell=()
for i in 0 1 2; do
    shell[i]=$(q $i "SELECT tuple_count FROM pgstattuple('idempotency.records')")
done
say "shard $shard_rel on ${NAMES[$owner]}: $in_shard row(s); count(*) over the distributed table: $in_dist; idem_lookup: $looked row(s)"
say "rows in the shell table idempotency.records: coordinator ${shell[0]}, worker1 ${shell[1]}, worker2 ${shell[2]}"
if [ "$in_shard" != 1 ] || [ "${shell[0]}${shell[1]}${shell[2]}" != 000 ] || [ "$in_dist" != 1 ] || [ "$looked" != 1 ]; then
    lost=
    for i in 0 1 2; do
        [ "${shell[$i]}" != 0 ] && lost="$lost ${NAMES[$i]}"
    done
    [ -n "$lost" ] ||
        fail "the delegated claim answered '$outcome' but its row is neither in shard $shard_rel nor in a shell table"
    fail "the delegated claim answered '$outcome' but its row is not in shard $shard_rel: it went into the shell table idempotency.records of${lost}, where no query on the distributed table, no idem_lookup and no purge will ever see it, and a claim of the same key in a coordinator transaction claims it again (silent data loss; idempotency.idem_distribute() and the shard-aware paths are to fix it)"
fi

# --- the cluster as a user runs it -----------------------------------------
# qv NODE SQL: like q, but errors are printed with their SQLSTATE (stderr into stdout).
qv() {
    local out
    out=$(PGOPTIONS='-c client_min_messages=warning' psql -X -qtA -v ON_ERROR_STOP=1 -v VERBOSITY=verbose \
        -h 127.0.0.1 -p "${PORTS[$1]}" -U postgres -d postgres -c "$2" 2>&1)
    if grep -q '^ERROR:' <<<"$out"; then
        sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\): .*/\1/p' <<<"$out" | head -n 1
    else
        echo "$out"
    fi
}
# expect WHAT GOT WANT
expect() { [ "$2" = "$3" ] || fail "$1: expected '$3', got '$2'"; }
# shell_rows TABLE: the rows in the relation itself (never a shard) on each node, "c w1 w2".
shell_rows() {
    local r=()
    for i in 0 1 2; do r[i]=$(q $i "SELECT tuple_count FROM pgstattuple('idempotency.$1')"); done
    echo "${r[*]}"
}
# shard_rows TABLE: the rows in all shards of TABLE, per worker: "w1 w2".
shard_rows() {
    local r=()
    for i in 1 2; do
        r[i]=$(q 0 "SELECT coalesce(sum(result::bigint), 0) FROM run_command_on_placements('idempotency.$1', 'SELECT count(*) FROM %s') c
                     WHERE c.nodeport = ${PORTS[$i]}")
    done
    echo "${r[1]} ${r[2]}"
}
# scope_on WORKER PREFIX: the first PREFIX-N whose records shard lives on that worker.
scope_on() {
    q 0 "SELECT '$2-' || g FROM generate_series(1, 1000) g
         WHERE (SELECT nodeport FROM pg_dist_shard_placement
                WHERE shardid = get_shard_id_for_distribution_column('idempotency.records', '$2-' || g)) = ${PORTS[$1]}
         ORDER BY g LIMIT 1"
}

# 240 scopes, one delegated claim each: every row in a shard, none in a shell table.
t0=$(date +%s.%N)
for n in $(seq 1 240); do echo "SELECT outcome FROM idempotency.idem_claim('tenant-$n/orders', 'bulk-1');"; done |
    PGOPTIONS='-c client_min_messages=warning' psql -X -qtA -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "${PORTS[0]}" \
        -U postgres -d postgres >"$BASE/bulk.out" || fail "240 delegated claims"
expect "240 delegated claims over 240 scopes" "$(grep -c '^claimed$' "$BASE/bulk.out")" 240
read -r w1 w2 <<<"$(shard_rows records)"
expect "rows in the records shards (241 claims)" "$((w1 + w2))" 241
[ "$w1" -gt 0 ] && [ "$w2" -gt 0 ] || fail "the scopes should spread over both workers: $w1 / $w2"
expect "rows in the shell tables idempotency.records (coordinator worker1 worker2)" "$(shell_rows records)" "0 0 0"
say "240 scopes claimed in $(since "$t0") s: shards on worker1 $w1 row(s), worker2 $w2; the shell tables 0 0 0"

# Every outcome and refusal on each worker, delegated (autocommit SELECT with a constant scope).
for i in 1 2; do
    s=$(scope_on $i outcomes)
    [ -n "$s" ] || fail "no scope found on ${NAMES[$i]}"
    w="${NAMES[$i]} ($s)"
    expect "$w claim" "$(qv 0 "SELECT outcome || ' ' || attempt FROM idempotency.idem_claim('$s', 'k1', '\\x01')")" "claimed 1"
    expect "$w claim again" "$(qv 0 "SELECT outcome || ' ' || attempt FROM idempotency.idem_claim('$s', 'k1', '\\x01')")" "in_progress 1"
    expect "$w heartbeat" "$(qv 0 "SELECT idempotency.idem_heartbeat('$s', 'k1', 1, '1 minute') > now()")" "t"
    expect "$w complete" "$(qv 0 "SELECT idempotency.idem_complete('$s', 'k1', 1, 'r1', '{\"ok\": 1}', 201)")" "t"
    expect "$w complete again (same result)" "$(qv 0 "SELECT idempotency.idem_complete('$s', 'k1', 1, 'r1', '{\"ok\": 1}', 201)")" "f"
    expect "$w replay" "$(qv 0 "SELECT outcome || ' ' || resource_id || ' ' || response_status FROM idempotency.idem_claim('$s', 'k1', '\\x01')")" "replayed r1 201"
    expect "$w mismatch" "$(qv 0 "SELECT outcome FROM idempotency.idem_claim('$s', 'k1', '\\x02')")" "mismatch"
    expect "$w complete with another result" "$(qv 0 "SELECT idempotency.idem_complete('$s', 'k1', 1, 'r2')")" "IK003"
    expect "$w complete of an unknown key" "$(qv 0 "SELECT idempotency.idem_complete('$s', 'nope', 1)")" "IK001"
    expect "$w claim with a 1 s lease" "$(qv 0 "SELECT outcome FROM idempotency.idem_claim('$s', 'k2', lease => '1 second')")" "claimed"
    sleep 1.2
    expect "$w reclaim after the lease" "$(qv 0 "SELECT outcome || ' ' || attempt FROM idempotency.idem_claim('$s', 'k2')")" "reclaimed 2"
    expect "$w the old attempt's complete" "$(qv 0 "SELECT idempotency.idem_complete('$s', 'k2', 1)")" "IK002"
    expect "$w fail of the new attempt" "$(qv 0 "SELECT idempotency.idem_fail('$s', 'k2', 2, retryable => true)")" "t"
    expect "$w claim after a retryable failure" "$(qv 0 "SELECT outcome || ' ' || attempt FROM idempotency.idem_claim('$s', 'k2')")" "claimed 3"
    expect "$w lookup" "$(qv 0 "SELECT status || ' ' || attempt FROM idempotency.idem_lookup('$s', 'k2')")" "processing 3"
    shard=$(q 0 "SELECT shard_name('idempotency.records'::regclass, get_shard_id_for_distribution_column('idempotency.records', '$s'))")
    expect "$w rows of the scope in its shard $shard on the worker" "$(q $i "SELECT count(*) FROM $shard WHERE scope = '$s'")" 2
    say "${NAMES[$i]}: claimed, in_progress, heartbeat, complete, replayed, mismatch, IK003, IK001, reclaimed, IK002, fail (retryable), claimed attempt 3, lookup; both rows in $shard"
done
expect "rows in the shell tables idempotency.records" "$(shell_rows records)" "0 0 0"

# A 40-way race on one key through the coordinator: exactly one claimed.
for n in $(seq 1 40); do
    q 0 "SELECT outcome FROM idempotency.idem_claim('race/tenant', 'one-key', '\\x01')" >"$BASE/race.$n" 2>&1 &
done
wait
claimed=$(cat "$BASE"/race.* | grep -c '^claimed$')
inprog=$(cat "$BASE"/race.* | grep -c '^in_progress$')
[ "$claimed" = 1 ] && [ "$inprog" = 39 ] ||
    fail "40-way race on one key: $claimed claimed, $inprog in_progress (expected 1 and 39): $(cat "$BASE"/race.* | sort | uniq -c | tr '\n' ' ')"
say "40-way race on one key: 1 claimed, 39 in_progress"

# Both call styles: a coordinator transaction (the function runs on the coordinator, its
# statements are routed to the shard) with a business table co-located by the same value.
q 0 "CREATE TABLE orders (tenant text, order_id text, amount integer, PRIMARY KEY (tenant, order_id))" >/dev/null ||
    fail "CREATE TABLE orders"
q 0 "SELECT create_distributed_table('orders', 'tenant', colocate_with := 'idempotency.records')" >/dev/null ||
    fail "create_distributed_table('orders', 'tenant')"
for i in 1 2; do
    s=$(scope_on $i tx)
    w="${NAMES[$i]} ($s)"
    got=$(PGOPTIONS='-c client_min_messages=warning' psql -X -qtA -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "${PORTS[0]}" -U postgres -d postgres <<SQL 2>&1
BEGIN;
SELECT outcome FROM idempotency.idem_claim('$s', 'o1', '\\x01');
INSERT INTO orders VALUES ('$s', 'o1', 100);
SELECT idempotency.idem_complete('$s', 'o1', 1, 'o1', '{"order": "o1"}', 201);
COMMIT;
BEGIN;
SELECT outcome FROM idempotency.idem_claim('$s', 'o2');
SELECT idempotency.idem_fail('$s', 'o2', 1, retryable => false);
COMMIT;
SQL
    )
    # shellcheck disable=SC2086,SC2116 # $(echo $got): its words on one line
    expect "$w coordinator transaction" "$(echo $got)" "claimed t claimed t"
    expect "$w delegated replay of the transaction's claim" "$(qv 0 "SELECT outcome || ' ' || response_status FROM idempotency.idem_claim('$s', 'o1', '\\x01')")" "replayed 201"
    expect "$w delegated claim of the transaction's failed key" "$(qv 0 "SELECT outcome FROM idempotency.idem_claim('$s', 'o2')")" "replayed"
    # never two owners: transaction then delegated, delegated then transaction
    q 0 "BEGIN; SELECT idempotency.idem_claim('$s', 'o3'); COMMIT;" >/dev/null || fail "$w claim o3 in a transaction"
    expect "$w delegated claim after a transaction's claim" "$(qv 0 "SELECT outcome FROM idempotency.idem_claim('$s', 'o3')")" "in_progress"
    expect "$w delegated claim" "$(qv 0 "SELECT outcome FROM idempotency.idem_claim('$s', 'o4')")" "claimed"
    got=$(q 0 "BEGIN; SELECT outcome FROM idempotency.idem_claim('$s', 'o4'); COMMIT;") || fail "$w claim o4 in a transaction"
    expect "$w transaction's claim after a delegated claim" "$got" "in_progress"
    expect "$w orders" "$(q 0 "SELECT count(*) FROM orders WHERE tenant = '$s'")" 1
    say "${NAMES[$i]}: coordinator transaction (claim, insert into a co-located table, complete / fail) and delegated calls on the same keys: one owner each"
done
expect "rows in the shell tables idempotency.records" "$(shell_rows records)" "0 0 0"

# The inbox: dedup per consumer, the queue verbs, delegated by consumer.
for i in 1 2; do
    c=$(scope_on $i consumer)
    w="${NAMES[$i]} ($c)"
    expect "$w receive" "$(qv 0 "SELECT idempotency.idem_inbox_receive('$c', 'evt-1', '\\x01')")" "new"
    expect "$w receive again" "$(qv 0 "SELECT idempotency.idem_inbox_receive('$c', 'evt-1', '\\x01')")" "duplicate"
    expect "$w receive another payload" "$(qv 0 "SELECT idempotency.idem_inbox_receive('$c', 'evt-1', '\\x02')")" "mismatch"
    expect "$w another consumer, same event" "$(qv 0 "SELECT idempotency.idem_inbox_receive('$c-other', 'evt-1', '\\x01')")" "new"
    expect "$w entity ordering" "$(qv 0 "SELECT idempotency.idem_inbox_receive('$c', 'evt-2', entity_key => 'e', entity_seq => 5)")" "new"
    expect "$w older event of the entity" "$(qv 0 "SELECT idempotency.idem_inbox_receive('$c', 'evt-3', entity_key => 'e', entity_seq => 4)")" "stale"
    expect "$w enqueue" "$(qv 0 "SELECT idempotency.idem_inbox_receive('$c', 'job-1', enqueue => true)")" "new"
    expect "$w enqueue" "$(qv 0 "SELECT idempotency.idem_inbox_receive('$c', 'job-2', enqueue => true)")" "new"
    expect "$w next" "$(qv 0 "SELECT string_agg(event_id || ' ' || attempt, ',' ORDER BY event_id) FROM idempotency.idem_inbox_next('$c', 10)")" "job-1 1,job-2 1"
    expect "$w done" "$(qv 0 "SELECT idempotency.idem_inbox_done('$c', 'job-1', 1)")" "done"
    expect "$w fail" "$(qv 0 "SELECT idempotency.idem_inbox_fail('$c', 'job-2', 1, retryable => false)")" "failed"
    say "${NAMES[$i]}: inbox new, duplicate, mismatch, per-consumer, stale, next, done, fail"
done
expect "rows in the shell tables idempotency.inbox" "$(shell_rows inbox)" "0 0 0"
expect "rows in the shell tables idempotency.inbox_entities" "$(shell_rows inbox_entities)" "0 0 0"
read -r w1 w2 <<<"$(shard_rows inbox)"
expect "rows in the inbox shards" "$((w1 + w2))" 12
say "inbox: 12 rows in shards (worker1 $w1, worker2 $w2), none in the shell tables"

# Purge: CALL idempotency.idem_purge_loop() on the coordinator runs idem_purge_shards on every worker
# (bounded SKIP LOCKED batches over the worker's shard placements); idem_purge, which cannot
# commit between workers, refuses a distributed table with a hint. Then pg_cron on the
# coordinator schedules the same CALL (idem_schedule_purge, every 2 seconds) and it purges.
# expired_rows PREFIX: claims 2 keys and 1 inbox entry with a 10 ms TTL in a scope on each worker.
expired_rows() {
    for i in 1 2; do
        s=$(scope_on $i "$1")
        for k in old-1 old-2; do
            expect "${NAMES[$i]} ($s) short-lived claim" "$(qv 0 "SELECT outcome FROM idempotency.idem_claim('$s', '$k', lease => '10 ms', ttl => '10 ms')")" claimed
            expect "${NAMES[$i]} ($s) complete" "$(qv 0 "SELECT idempotency.idem_complete('$s', '$k', 1)")" t
        done
        expect "${NAMES[$i]} ($s) short-lived inbox entry" "$(qv 0 "SELECT idempotency.idem_inbox_receive('$s', 'old-evt', ttl => '10 ms')")" new
    done
    sleep 0.2
}
# left PREFIX: the rows of PREFIX-* scopes / consumers left in the shards, "records inbox".
left() {
    echo "$(q 0 "SELECT count(*) FROM idempotency.records WHERE scope LIKE '$1-%'") $(q 0 "SELECT count(*) FROM idempotency.inbox WHERE consumer LIKE '$1-%'")"
}
expired_rows purge
expect "idempotency.idem_purge() on a distributed table" "$(qv 0 "SELECT idempotency.idem_purge()")" 0A000
before=$(q 0 "SELECT count(*) FROM idempotency.records")
expect "expired rows on the workers before the purge" "$(left purge)" "4 2"
expect "CALL idempotency.idem_purge_loop() on the coordinator" "$(qv 0 "CALL idempotency.idem_purge_loop()")" 6
expect "expired rows left" "$(left purge)" "0 0"
expect "records left" "$(q 0 "SELECT count(*) FROM idempotency.records")" "$((before - 4))"
expect "a second CALL idempotency.idem_purge_loop()" "$(qv 0 "CALL idempotency.idem_purge_loop(batch_size => 1)")" 0
say "purge: idempotency.idem_purge() refused with 0A000; CALL idempotency.idem_purge_loop() on the coordinator deleted the 4 expired records and 2 inbox entries on both workers, nothing live"
q 0 "CREATE EXTENSION IF NOT EXISTS pg_cron" >/dev/null || fail "CREATE EXTENSION pg_cron on the coordinator"
job=$(qv 0 "SELECT idempotency.idem_schedule_purge('2 seconds')")
[[ "$job" =~ ^[0-9]+$ ]] || fail "idempotency.idem_schedule_purge('2 seconds') on the coordinator: $job"
expired_rows cron
for n in $(seq 1 30); do
    [ "$(left cron)" = "0 0" ] && break
    sleep 0.5
done
expect "expired rows left after pg_cron's purge" "$(left cron)" "0 0"
runs=$(q 0 "SELECT count(*) FILTER (WHERE status = 'succeeded') || ' ' || count(*) FILTER (WHERE status = 'failed') FROM cron.job_run_details WHERE jobid = $job")
expect "pg_cron runs (succeeded failed)" "${runs#* }" 0
expect "idempotency.idem_unschedule_purge()" "$(qv 0 "SELECT idempotency.idem_unschedule_purge()")" t
say "pg_cron on the coordinator: job $job (idempotency.idem_schedule_purge('2 seconds')) purged both workers' shards (${runs% *} run(s) succeeded, none failed)"

# --- The outbox (docs/citus.md "The outbox") -----------------------------------------
# idempotency.outbox is distributed by topic in a co-location group of its own; idem_outbox_next
# is delegated by topic; idem_outbox_emit runs on the coordinator (its key lock and its sequence
# number there, the INSERT routed to the topic's shard) and is refused on a worker; done, fail
# and requeue run on the coordinator, routed to one shard by their topic, or by the topic they
# look up without one. Two topics, one on each worker. The settings of the caller's session
# apply to what runs on the coordinator: done keeps events 1 s (idempotency.outbox_ttl), so the
# purge at the end finds them.
# topic_on NODE PREFIX: the first PREFIX-n whose outbox shard is on that worker.
topic_on() {
    q 0 "SELECT '$2-' || g FROM generate_series(1, 1000) g
         WHERE (SELECT nodeport FROM pg_dist_shard_placement
                WHERE shardid = get_shard_id_for_distribution_column('idempotency.outbox', '$2-' || g)) = ${PORTS[$1]}
         ORDER BY g LIMIT 1"
}
# qo NODE SQL: qv with the outbox settings of this section.
qo() {
    local out
    out=$(PGOPTIONS='-c client_min_messages=warning -c idempotency.outbox_ttl=1s -c idempotency.retry_backoff_base=1h' \
        psql -X -qtA -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -h 127.0.0.1 -p "${PORTS[$1]}" -U postgres -d postgres -c "$2" 2>&1)
    if grep -q '^ERROR:' <<<"$out"; then
        sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\): .*/\1/p' <<<"$out" | head -n 1
    else
        echo "$out"
    fi
}
# counter NODE NAME: an idempotency.idem_counters() value of one node (each node counts what runs there).
counter() { q "$1" "SELECT value FROM idempotency.idem_counters() WHERE counter = '$2'"; }
# id_of T N: the id of topic T's event with payload n = N.
id_of() { q 0 "SELECT event_id FROM idempotency.outbox WHERE topic = '$1' AND payload->>'n' = '$2'"; }
# handed T BATCH: idempotency.idem_outbox_next(T, BATCH) (autocommit: delegated), the payloads' n (in emit order).
handed() { qo 0 "SELECT coalesce(string_agg(payload->>'n', ','), '') FROM idempotency.idem_outbox_next('$1', $2)"; }

oc=$(q 0 "SELECT p.colocationid FROM pg_dist_partition p WHERE p.logicalrelid = 'idempotency.outbox'::regclass")
rc=$(q 0 "SELECT p.colocationid FROM pg_dist_partition p WHERE p.logicalrelid = 'idempotency.records'::regclass")
[ -n "$oc" ] && [ "$oc" != "$rc" ] || fail "the outbox should have a co-location group of its own: outbox $oc, records $rc"
expect "outbox functions delegated (by topic)" \
    "$(q 0 "SELECT string_agg(p.proname || ' ' || coalesce(o.distribution_argument_index::text, '-'), ', ' ORDER BY p.proname)
            FROM pg_proc p LEFT JOIN pg_dist_object o ON o.classid = 'pg_proc'::regclass AND o.objid = p.oid
            WHERE p.proname LIKE 'idem_outbox_%'")" \
    "idem_outbox_done -, idem_outbox_done_batch -, idem_outbox_emit -, idem_outbox_emit -, idem_outbox_emit -, idem_outbox_fail -, idem_outbox_fail_batch -, idem_outbox_next 0, idem_outbox_requeue -"
t1=$(topic_on 1 topic)
t2=$(topic_on 2 topic)
[ -n "$t1" ] && [ -n "$t2" ] || fail "no topic found on each worker: '$t1' '$t2'"
T=("" "$t1" "$t2")

# Emit on the coordinator: per topic a transaction with the first events of keys A and B, then
# two more of A, one of B, one without a key (n = 1..6, in emit order).
for i in 1 2; do
    t=${T[$i]}
    got=$(PGOPTIONS='-c client_min_messages=warning' psql -X -qtA -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "${PORTS[0]}" -U postgres -d postgres <<SQL 2>&1
BEGIN;
SELECT idempotency.idem_outbox_emit('$t', '{"n": 1}'::jsonb, 'A') IS NOT NULL;
SELECT idempotency.idem_outbox_emit('$t', '{"n": 2}'::jsonb, 'B') IS NOT NULL;
COMMIT;
SQL
    )
    # shellcheck disable=SC2086,SC2116 # $(echo $got): its words on one line
    expect "$t emit in a coordinator transaction" "$(echo $got)" "t t"
    expect "$t emit A 3" "$(qo 0 "SELECT idempotency.idem_outbox_emit('$t', '{\"n\": 3}'::jsonb, 'A') IS NOT NULL")" t
    expect "$t emit A 4" "$(qo 0 "SELECT idempotency.idem_outbox_emit('$t', '{\"n\": 4}', 'A') IS NOT NULL")" t
    expect "$t emit B 5" "$(qo 0 "SELECT idempotency.idem_outbox_emit('$t', '{\"n\": 5}'::jsonb, 'B') IS NOT NULL")" t
    expect "$t emit without a key 6" "$(qo 0 "SELECT idempotency.idem_outbox_emit('$t', '{\"n\": 6}'::jsonb) IS NOT NULL")" t
    expect "$t events in emit order (seq)" "$(q 0 "SELECT string_agg(payload->>'n', ',' ORDER BY seq) FROM idempotency.outbox WHERE topic = '$t'")" "1,2,3,4,5,6"
    shard=$(q 0 "SELECT shard_name('idempotency.outbox'::regclass, get_shard_id_for_distribution_column('idempotency.outbox', '$t'))")
    expect "$t rows in its shard $shard on ${NAMES[$i]}" "$(q $i "SELECT count(*) FROM $shard WHERE topic = '$t'")" 6
done
expect "rows in the shell tables idempotency.outbox" "$(shell_rows outbox)" "0 0 0"
expect "idem_outbox_emit on worker1" "$(qv 1 "SELECT idempotency.idem_outbox_emit('$t1', '{}'::jsonb, 'A')")" 0A000
expect "idem_outbox_emit on worker2" "$(qv 2 "SELECT idempotency.idem_outbox_emit('$t2', '{}'::jsonb)")" 0A000
expect "emits counted (coordinator worker1 worker2)" \
    "$(counter 0 outbox_emitted) $(counter 1 outbox_emitted) $(counter 2 outbox_emitted)" "12 0 0"
say "outbox: 6 events emitted on the coordinator into $t1 (shard on worker1) and $t2 (worker2), in emit order, none in a shell table; emit refused on a worker (0A000)"

# Two relays on different connections: relay 1 takes one event in a coordinator transaction and
# holds its lock; relay 2 (autocommit, delegated) meanwhile gets the first event of B and the one
# without a key; A's later events wait for A's first, B's for B's. Then one event of a key at a
# time, in emit order, as the earlier ones are done (with the topic, without, with NULL).
for i in 1 2; do
    t=${T[$i]}
    rm -f "$BASE/relay1.out"
    { PGOPTIONS='-c client_min_messages=warning' psql -X -qtA -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "${PORTS[0]}" -U postgres -d postgres <<SQL >"$BASE/relay1.out" 2>&1; } &
BEGIN;
SELECT string_agg(payload->>'n', ',') FROM idempotency.idem_outbox_next('$t', 1);
SELECT pg_sleep(3);
COMMIT;
SQL
    r1=$!
    for n in $(seq 1 100); do [ -s "$BASE/relay1.out" ] && break; sleep 0.05; done
    expect "$t relay 1 (coordinator transaction) next(1)" "$(head -n 1 "$BASE/relay1.out")" 1
    expect "$t relay 2 next(10) while relay 1 holds its event" "$(handed "$t" 10)" "2,6"
    got=$(PGOPTIONS='-c client_min_messages=debug1' psql -X -qtA -h 127.0.0.1 -p "${PORTS[0]}" -U postgres -d postgres \
        -c "SELECT count(*) FROM idempotency.idem_outbox_next('$t', 10)" 2>&1)
    grep -q 'pushing down the function call' <<<"$got" || fail "$t: idem_outbox_next was not delegated: $got"
    wait $r1 || fail "$t relay 1: $(cat "$BASE/relay1.out")"
    expect "$t next while 1 and 2 are leased" "$(handed "$t" 10)" ""
    e1=$(id_of "$t" 1); e2=$(id_of "$t" 2); e3=$(id_of "$t" 3); e4=$(id_of "$t" 4); e5=$(id_of "$t" 5); e6=$(id_of "$t" 6)
    expect "$t done of a stale attempt (with the topic)" "$(qo 0 "SELECT idempotency.idem_outbox_done('$e1', 2, '$t')")" IK002
    expect "$t done of a stale attempt (without)" "$(qo 0 "SELECT idempotency.idem_outbox_done('$e1', 2)")" IK002
    expect "$t done 1 with the topic" "$(qo 0 "SELECT idempotency.idem_outbox_done('$e1', 1, '$t')")" "done"
    expect "$t done 1 again" "$(qo 0 "SELECT idempotency.idem_outbox_done('$e1', 1)")" IK003
    expect "$t next after 1 is done" "$(handed "$t" 10)" 3
    expect "$t done 2 without the topic" "$(qo 0 "SELECT idempotency.idem_outbox_done('$e2', 1)")" "done"
    expect "$t next after 2 is done" "$(handed "$t" 10)" 5
    expect "$t done 3 with a NULL topic" "$(qo 0 "SELECT idempotency.idem_outbox_done('$e3', 1, NULL)")" "done"
    expect "$t next after 3 is done" "$(handed "$t" 10)" 4
    expect "$t done_batch of 4, 5 (with the topic) and of 1, done already" \
        "$(qo 0 "SELECT count(*) FROM idempotency.idem_outbox_done_batch(ARRAY['$e4', '$e5', '$e1']::uuid[], ARRAY[1, 1, 1], '$t')")" 2
    expect "$t fail_batch of 4, done already" \
        "$(qo 0 "SELECT count(*) FROM idempotency.idem_outbox_fail_batch(ARRAY['$e4']::uuid[], ARRAY[1], false, 'late')")" 0
    expect "$t done_batch of 6 (without the topic)" \
        "$(qo 0 "SELECT count(*) FROM idempotency.idem_outbox_done_batch(ARRAY['$e6']::uuid[], ARRAY[1])")" 1
    expect "$t statuses of 1-6" "$(q 0 "SELECT string_agg(status, ',' ORDER BY payload->>'n') FROM idempotency.outbox WHERE topic = '$t'")" \
        "done,done,done,done,done,done"
    expect "$t next when all are done" "$(handed "$t" 10)" ""
    expect "$t done of an unknown event (without the topic)" "$(qo 0 "SELECT idempotency.idem_outbox_done('$(q 0 "SELECT idempotency.idem_uuid_v7()")', 1)")" IK001
    say "outbox $t (${NAMES[$i]}): relay 1 in a coordinator transaction got 1, relay 2 (delegated) meanwhile 2,6; then 3, 5, 4 one at a time as 1, 2, 3 were done (with the topic, without, NULL), 4-6 by done_batch (fail_batch of a done event left out); IK002, IK003, IK001"
done

# Per-key order across workers under two relays: 24 events per topic over keys K1-K3, emitted in
# 4 coordinator transactions; two relays (separate processes, a connection per call) drain both
# topics, 2 events per next, relay 1 done with the topic, relay 2 without. Each event is handed
# out once, at attempt 1, and only when every earlier event of its key is done (each relay
# looks right after the hand-out, and delivers for 20 ms before its done).
for i in 1 2; do
    t=${T[$i]}
    for b in 0 6 12 18; do
        sql="BEGIN;"
        for j in 1 2 3 4 5 6; do
            n=$((100 + b + j))
            sql="$sql SELECT idempotency.idem_outbox_emit('$t', '{\"n\": $n}'::jsonb, 'K$((n % 3 + 1))');"
        done
        q 0 "$sql COMMIT;" >/dev/null || fail "$t: emits in a transaction"
    done
done
relay() { # N topic|notopic: "got topic key n attempt" per event into $BASE/relay.N, "early ..."
    local empty=0 got t id key n attempt u d   # when an earlier event of its key was not done
    while [ $empty -lt 3 ]; do
        got=0
        for t in "$t1" "$t2"; do
            while IFS='|' read -r id key n attempt; do
                [ -n "$id" ] || continue
                got=1
                echo "got $t $key $n $attempt"
                # every earlier event of the key is done (done is final: a later look sees it too)
                u=$(q 0 "SELECT count(*) FROM idempotency.outbox o WHERE o.topic = '$t' AND o.key = '$key' AND o.status <> 'done'
                         AND o.seq < (SELECT e.seq FROM idempotency.outbox e WHERE e.topic = '$t' AND e.event_id = '$id')")
                [ "$u" = 0 ] || echo "early $t $key $n: $u earlier event(s) not done"
                sleep 0.02 # the delivery
                if [ "$2" = topic ]; then
                    d=$(qo 0 "SELECT idempotency.idem_outbox_done('$id', $attempt, '$t')")
                else
                    d=$(qo 0 "SELECT idempotency.idem_outbox_done('$id', $attempt)")
                fi
                [ "$d" = "done" ] || echo "not-done $t $n $d"
            done <<<"$(q 0 "SELECT event_id, key, payload->>'n', attempt FROM idempotency.idem_outbox_next('$t', 2)")"
        done
        if [ $got = 0 ]; then empty=$((empty + 1)); sleep 0.1; else empty=0; fi
    done >"$BASE/relay.$1"
}
t0=$(date +%s.%N)
relay 1 topic &
p1=$!
relay 2 notopic &
p2=$!
wait $p1 $p2
grep -h 'not-done\|early' "$BASE"/relay.[12] >&2 && fail "two relays: a done was refused or an event was handed out before an earlier event of its key was done"
n1=$(grep -c '^got ' "$BASE/relay.1")
n2=$(grep -c '^got ' "$BASE/relay.2")
expect "events handed out to both relays" "$((n1 + n2))" 48
expect "distinct events handed out" "$(grep -h '^got ' "$BASE"/relay.[12] | awk '{ print $2, $4 }' | sort -u | wc -l)" 48
expect "events handed out at an attempt other than 1" "$(grep -h '^got ' "$BASE"/relay.[12] | awk '$5 != 1' | wc -l)" 0
[ "$n1" -gt 0 ] && [ "$n2" -gt 0 ] || fail "both relays should have got events: $n1 and $n2"
expect "events of the relays' topics not done" "$(q 0 "SELECT count(*) FROM idempotency.outbox WHERE topic IN ('$t1', '$t2') AND status <> 'done'")" 0
# done follows the hand-out, which follows the earlier event's done: done times rise with seq
expect "per key, done in emit order (inversions)" \
    "$(q 0 "SELECT count(*) FROM (SELECT updated_at < lag(updated_at) OVER (PARTITION BY topic, key ORDER BY seq) AS inv
            FROM idempotency.outbox WHERE topic IN ('$t1', '$t2') AND key IS NOT NULL) x WHERE inv")" 0
say "outbox: two relays drained 48 events of $t1 and $t2 in $(since "$t0") s (relay 1 $n1, relay 2 $n2): each once, attempt 1, per key one at a time in emit order"

# dedup_key, fail, requeue, a delayed event; then idem_outbox_stats on the coordinator.
d1=$(qo 0 "SELECT idempotency.idem_outbox_emit('$t2', '{\"n\": \"paid\"}'::jsonb, dedup_key => 'order:1:paid')")
got=$(PGOPTIONS='-c client_min_messages=warning' psql -X -qtA -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "${PORTS[0]}" -U postgres -d postgres \
    -c "BEGIN" -c "SELECT idempotency.idem_outbox_emit('$t2', '{\"n\": \"paid-again\"}'::jsonb, dedup_key => 'order:1:paid')" -c "COMMIT" 2>&1)
expect "$t2 the same dedup_key in a transaction" "$got" "$d1"
expect "$t2 the same dedup_key again" "$(qo 0 "SELECT idempotency.idem_outbox_emit('$t2', '{\"n\": \"paid-3\"}'::jsonb, dedup_key => 'order:1:paid')")" "$d1"
d2=$(qo 0 "SELECT idempotency.idem_outbox_emit('$t1', '{\"n\": \"paid\"}'::jsonb, dedup_key => 'order:1:paid')")
[ -n "$d2" ] && [ "$d2" != "$d1" ] || fail "$t1: the dedup_key of another topic should be a new event: $d2 (first $d1)"
expect "rows of dedup_key order:1:paid" "$(q 0 "SELECT string_agg(topic || ' ' || (payload->>'n'), ', ' ORDER BY topic) FROM idempotency.outbox WHERE dedup_key = 'order:1:paid'")" \
    "$(printf '%s paid\n%s paid\n' "$t1" "$t2" | sort | paste -sd, | sed 's/,/, /g')"
expect "dedups counted (coordinator worker1 worker2)" \
    "$(counter 0 outbox_deduplicated) $(counter 1 outbox_deduplicated) $(counter 2 outbox_deduplicated)" "2 0 0"
expect "$t2 delayed emit" "$(qo 0 "SELECT idempotency.idem_outbox_emit('$t2', '{\"n\": \"later\"}'::jsonb, deliver_after => '1 hour') IS NOT NULL")" t
expect "$t1 next: the dedup event" "$(handed "$t1" 10)" paid
expect "$t1 fail (terminal, without the topic)" "$(qo 0 "SELECT idempotency.idem_outbox_fail('$d2', 1, retryable => false, error => 'rejected')")" dead
expect "$t1 requeue without the topic" "$(qo 0 "SELECT idempotency.idem_outbox_requeue('$d2')")" pending
expect "$t1 requeue of a pending event" "$(qo 0 "SELECT idempotency.idem_outbox_requeue('$d2', '$t1')")" 55000
expect "$t1 next after the requeue" "$(qo 0 "SELECT attempt FROM idempotency.idem_outbox_next('$t1', 10)")" 2
expect "$t1 fail of a stale attempt" "$(qo 0 "SELECT idempotency.idem_outbox_fail('$d2', 1)")" IK002
expect "$t1 fail (retryable, with the topic: 1 h backoff of this session)" "$(qo 0 "SELECT idempotency.idem_outbox_fail('$d2', 2, topic => '$t1')")" pending
expect "$t2 next: the dedup event" "$(handed "$t2" 10)" paid
expect "$t2 fail (terminal, with the topic)" "$(qo 0 "SELECT idempotency.idem_outbox_fail('$d1', 1, false, 'gone', '$t2')")" dead
expect "$t2 requeue of an unknown event" "$(qo 0 "SELECT idempotency.idem_outbox_requeue('$(q 0 "SELECT idempotency.idem_uuid_v7()")')")" IK001
stats() {
    q 0 "SELECT string_agg(concat_ws(' ', topic, pending, waiting, leased, dead, done, oldest_pending_age IS NOT NULL), ', ' ORDER BY topic)
         FROM idempotency.idem_outbox_stats WHERE topic IN ('$t1', '$t2')"
}
# topic pending waiting leased dead done has-lag
want_stats=$(printf '%s 1 1 0 0 30 t\n%s 1 1 0 1 30 t\n' "$t1" "$t2" | sort | paste -sd, | sed 's/,/, /g')
expect "idem_outbox_stats on the coordinator" "$(stats)" "$want_stats"
expect "done counted (coordinator worker1 worker2)" "$(counter 0 outbox_done) $(counter 1 outbox_done) $(counter 2 outbox_done)" "60 0 0"
say "outbox: dedup_key (one event per topic, 2 deduplicated on the coordinator), fail / requeue with and without the topic, the caller's backoff; idem_outbox_stats: $(stats)"

# Purge: the 60 done events are past their 1 s retention; CALL idempotency.idem_purge_loop() on the
# coordinator deletes them in the workers' shards (idem_purge_shards) and nothing else.
sleep 1.2
before=$(q 0 "SELECT count(*) FROM idempotency.records")
expect "CALL idempotency.idem_purge_loop(): done outbox events past their retention" "$(qv 0 "CALL idempotency.idem_purge_loop(batch_size => 7)")" 60
expect "outbox rows left (topic status)" \
    "$(q 0 "SELECT string_agg(topic || ' ' || status, ', ' ORDER BY topic, status) FROM idempotency.outbox WHERE topic IN ('$t1', '$t2')")" \
    "$(printf '%s pending\n%s dead\n%s pending\n' "$t1" "$t2" "$t2" | sort | paste -sd, | sed 's/,/, /g')"
expect "records after the outbox purge" "$(q 0 "SELECT count(*) FROM idempotency.records")" "$before"
expect "idem_outbox_stats after the purge" "$(stats)" \
    "$(printf '%s 1 1 0 0 0 t\n%s 1 1 0 1 0 t\n' "$t1" "$t2" | sort | paste -sd, | sed 's/,/, /g')"
expect "rows in the shell tables idempotency.outbox" "$(shell_rows outbox)" "0 0 0"
say "outbox purge: CALL idempotency.idem_purge_loop() deleted the 60 done events on both workers; pending and dead kept"

# A worker killed (pg_ctl -m immediate) and restarted mid-load. Two clients run the same 80 keys
# (spread over both workers) through the coordinator: claim with a 2 s lease, then complete
# when claimed or reclaimed. Worker2 dies after ~1 s and comes back 2 s later; calls meanwhile
# fail. Then the fault suite's invariants: one effect per key (at most one acknowledged
# complete), no acknowledged completion lost (idem_lookup says completed), and every orphan is
# reclaimable once its lease has passed (a new claim answers replayed, claimed or reclaimed,
# never in_progress or an error).
load() { # CLIENT: one line "key claim complete" per key into $BASE/load.CLIENT
    local k c a d
    for n in $(seq 1 80); do
        k=crash-$n
        read -r c a <<<"$(qv 0 "SELECT outcome || ' ' || attempt FROM idempotency.idem_claim('crash-$n', 'k', lease => '2 seconds')" | head -n 1)"
        d=-
        if [ "$c" = claimed ] || [ "$c" = reclaimed ]; then
            d=$(qv 0 "SELECT idempotency.idem_complete('crash-$n', 'k', $a, 'client-$1')" | head -n 1)
        fi
        echo "$k ${c:-error} ${d:-error}"
        sleep 0.02
    done >"$BASE/load.$1"
}
load 1 &
l1=$!
load 2 &
l2=$!
sleep 1
as_pg "$BIN/pg_ctl" -D "$BASE/worker2/data" -m immediate -w stop >/dev/null || fail "kill worker2"
sleep 2
as_pg "$BIN/pg_ctl" -D "$BASE/worker2/data" -l "$BASE/worker2/server.log" -w -t 60 start >/dev/null ||
    { tail -n 30 "$BASE/worker2/server.log" >&2; fail "worker2 did not restart"; }
wait $l1 $l2
failed_calls=$(cat "$BASE"/load.* | grep -c ' error\| [0-9A-Z]\{5\}$\| [0-9A-Z]\{5\} ')
acked=$(cat "$BASE"/load.* | awk '$3 == "t"' | wc -l)
sleep 2.2
effects=$(cat "$BASE"/load.* | awk '$3 == "t" { n[$1]++ } END { m = 0; for (k in n) if (n[k] > m) m = n[k]; print m }')
[ "$effects" -le 1 ] || fail "worker restart: a key has $effects acknowledged completes"
lost=0
while read -r k; do
    st=$(q 0 "SELECT status FROM idempotency.idem_lookup('$k', 'k')")
    [ "$st" = completed ] || { lost=$((lost + 1)); echo "citus: $k acknowledged but $st" >&2; }
done < <(cat "$BASE"/load.* | awk '$3 == "t" { print $1 }' | sort -u)
expect "worker restart: acknowledged completions lost" "$lost" 0
stuck=0
for n in $(seq 1 80); do
    o=$(qv 0 "SELECT outcome FROM idempotency.idem_claim('crash-$n', 'k')")
    case "$o" in replayed | claimed | reclaimed) ;; *) stuck=$((stuck + 1)); echo "citus: crash-$n after the restart: $o" >&2 ;; esac
done
expect "worker restart: keys not reclaimable after their lease" "$stuck" 0
expect "rows in the shell tables idempotency.records" "$(shell_rows records)" "0 0 0"
say "worker2 killed and restarted under load: $failed_calls call(s) failed meanwhile, $acked completes acknowledged, none lost, at most one per key, every key replayed or reclaimable"

# idem_stats reports the cluster
expect "idem_stats over the cluster" "$(q 0 "SELECT sum(processing + completed + failed + expired) FROM idempotency.idem_stats")" \
    "$(q 0 "SELECT count(*) FROM idempotency.records")"

# idem_stuck and idem_stats report the whole cluster: one operation left processing past its
# lease in a scope on each worker is listed once by idempotency.idem_stuck() on the coordinator, and counted
# as stuck by idem_stats.
stuck_scopes=""
for i in 1 2; do
    s=$(scope_on $i stuck)
    expect "${NAMES[$i]} ($s) claim left processing" "$(qv 0 "SELECT outcome FROM idempotency.idem_claim('$s', 'orphan', lease => '10 ms')")" claimed
    stuck_scopes="$stuck_scopes $s"
done
sleep 0.2
expect "idempotency.idem_stuck() on the coordinator" "$(q 0 "SELECT string_agg(scope || '/' || key, ' ' ORDER BY scope) FROM idempotency.idem_stuck() WHERE scope LIKE 'stuck-%'")" \
    "$(for s in $stuck_scopes; do echo "$s/orphan"; done | sort | paste -sd' ')"
expect "idem_stats: stuck over the cluster" "$(q 0 "SELECT sum(stuck) FROM idempotency.idem_stats WHERE scope LIKE 'stuck-%'")" 2
say "idempotency.idem_stuck() and idem_stats on the coordinator list the stuck operation of each worker ($stuck_scopes )"

# Upgrading a distributed cluster from 0.7 (the frozen fixture test/upgrade/idempotency--0.7.sql,
# in the nodes' extension directory for this part only: test/upgrade/scripts): ALTER EXTENSION
# idempotency UPDATE on the coordinator (Citus runs it on the workers too) brings every node to
# 2.0.0 (through 1.0.0 and 1.1.0; 0.7's functions are in public, 2.0.0's in schema idempotency): the purge procedures pin their search path, idem_schedule_purge gains
# run_as, the tenants' bindings table, idem_stuck in C. idem_claim and the other delegated functions are not
# recreated, so their delegation stands; the delegated calls answer as before.
q 0 "DROP TABLE orders" >/dev/null || fail "DROP TABLE orders"
q 0 "DROP EXTENSION idempotency CASCADE" >/dev/null || fail "DROP EXTENSION idempotency"
test/upgrade/scripts add || fail "test/upgrade/scripts add"
trap 'test/upgrade/scripts remove; [ -n "${IDEM_CITUS_KEEP:-}" ] || stop_all' EXIT
q 0 "CREATE EXTENSION idempotency VERSION '0.7'" || fail "CREATE EXTENSION idempotency VERSION '0.7'"
expect "versions 0.7 (coordinator worker1 worker2)" \
    "$(for i in 0 1 2; do q $i "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'"; done | paste -sd' ')" "0.7 0.7 0.7"
expect "public.idem_distribute() of 0.7: 4 tables, 12 functions" \
    "$(q 0 "SELECT count(*) FILTER (WHERE action LIKE 'distributed%') || ' ' || count(*) FILTER (WHERE action LIKE 'delegated%') FROM public.idem_distribute()")" "4 12"
s=$(scope_on 1 upgrade)
c=$(scope_on 2 upgrade)
ut=upgrade-topic
expect "0.7: claim (delegated)" "$(qv 0 "SELECT outcome FROM public.idem_claim('$s', 'k7', '\\x07')")" claimed
expect "0.7: complete with body and headers" "$(qv 0 "SELECT public.idem_complete('$s', 'k7', 1, 'r7', NULL, 201, '{\"id\":7}', '{\"Location\": \"/r/7\"}')")" t
expect "0.7: queued inbox entry" "$(qv 0 "SELECT public.idem_inbox_receive('$c', 'job', enqueue => true)")" new
expect "0.7: emit" "$(qv 0 "SELECT public.idem_outbox_emit('$ut', '{\"n\": 1}'::jsonb, 'A') IS NOT NULL")" t
expect "0.7: idem_stuck is PL/pgSQL" "$(q 0 "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.oid = 'public.idem_stuck(interval)'::regprocedure")" plpgsql
expect "ALTER EXTENSION idempotency UPDATE" "$(qv 0 "ALTER EXTENSION idempotency UPDATE")" ""
test/upgrade/scripts remove || fail "test/upgrade/scripts remove"
expect "versions 2.0.0 (coordinator worker1 worker2)" \
    "$(for i in 0 1 2; do q $i "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'"; done | paste -sd' ')" "2.0.0 2.0.0 2.0.0"
expect "routines left in public (coordinator worker1 worker2)" \
    "$(for i in 0 1 2; do q $i "SELECT count(*) FROM pg_proc WHERE proname LIKE 'idem\_%' AND pronamespace = 'public'::regnamespace"; done | paste -sd' ')" "0 0 0"
expect "the purge procedures pin their search path (coordinator worker1 worker2)" \
    "$(for i in 0 1 2; do q $i "SELECT count(*) FROM pg_proc WHERE proname IN ('idem_purge_loop', 'idem_purge_shards') AND prosrc LIKE '%set_config(''search_path'', ''pg_catalog, pg_temp'', true)%'"; done | paste -sd' ')" "2 2 2"
expect "the bindings table and idem_stuck in C (coordinator worker1 worker2)" \
    "$(for i in 0 1 2; do q $i "SELECT to_regclass('idempotency.bindings') IS NOT NULL AND (SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.oid = 'idempotency.idem_stuck(interval)'::regprocedure) = 'c'"; done | paste -sd' ')" "t t t"
expect "idempotency.idem_distribute() after the update (nothing changed)" \
    "$(q 0 "SELECT count(*) FROM idempotency.idem_distribute() WHERE action NOT LIKE 'unchanged%'")" 0
expect "2.0.0: a 0.7 record replays (delegated)" \
    "$(qv 0 "SELECT outcome || ' ' || convert_from(response_body, 'UTF8') || ' ' || (response_headers->>'Location') FROM idempotency.idem_claim('$s', 'k7', '\\x07')")" 'replayed {"id":7} /r/7'
expect "2.0.0: claim and complete (delegated)" \
    "$(qv 0 "SELECT outcome FROM idempotency.idem_claim('$s', 'k8')")$(qv 0 "SELECT idempotency.idem_complete('$s', 'k8', 1, 'r8')")" "claimedt"
expect "2.0.0: inbox next" "$(qv 0 "SELECT event_id || ' ' || attempt FROM idempotency.idem_inbox_next('$c', 10)")" "job 1"
expect "2.0.0: outbox next" "$(qv 0 "SELECT payload->>'n' FROM idempotency.idem_outbox_next('$ut', 10)")" 1
say "0.7 -> 2.0.0 (through 1.0.0 and 1.1.0) on the cluster: every node at 2.0.0 (every routine moved out of public, the purge procedures pinned, the bindings table, idem_stuck in C), the delegation unchanged; a 0.7 record replays its exact body, a new key is claimed and completed, the inbox and outbox rows of 0.7 are handed out"

# --- still to come ---------------------------------------------------------
# - a shard moved (citus_move_shard_placement, block_writes) mid-load

if [ -n "${IDEM_CITUS_KEEP:-}" ]; then
    say "clusters kept: psql -h 127.0.0.1 -U postgres -p ${PORTS[0]} (workers ${PORTS[1]}, ${PORTS[2]}); stop: test/stages/citus.sh stop"
fi
say "ok"
