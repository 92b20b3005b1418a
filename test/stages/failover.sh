#!/usr/bin/env bash
#: stage  failover
#: about  a streaming standby equal to the primary (amcheck clean), failovers under load: synchronous loses nothing acknowledged, asynchronous measured, pg_rewind
#: needs  install programs
#: runs   host chroot
#: order  200
# The failover stage: the extension's writes on a primary with a streaming standby,
# and failovers under load. Two clusters of its own (the shared test cluster is not touched):
# node0 and node1 on ports IDEM_FAILOVER_PORT and the next (default IDEM_PGPORT + 5, + 6), in
# /tmp/idem-failover-PORT, initdb --data-checksums (pg_rewind), the extension preloaded as
# test/pgcluster does. The load is build/failover_test (test/programs/failover_test.cpp): claims
# in both modes with their effect, replays, idem_fail, the inbox inline and queued, webhooks,
# the outbox with a relay, purge; it records what the server acknowledged. Proves:
#  a. after a load, the standby (once it has replayed the primary's current LSN) holds the same
#     rows as the primary in every table of schema idempotency and the effect tables (count and
#     md5 of the ordered rows);
#  b. amcheck is clean on both: bt_index_check(heapallindexed) of every index, verify_heapam of
#     every table;
#  c. a failover with synchronous replication under load (the primary's postmaster and its
#     processes SIGKILLed, the standby promoted, the clients following through a multi-host
#     conninfo with target_session_attrs=read-write) loses nothing acknowledged: the standby was
#     synchronous at the kill, and the invariants of failover_test --expect sync (completions,
#     replays, in-flight keys, effects exactly once, idem_fail, inbox, outbox order) hold on the
#     new primary;
#  d. pg_rewind brings the old primary back as a standby of the new one; it catches up, then
#     a and b again;
#  e. the same failover with asynchronous replication (the default) is MEASURED, not asserted:
#     acknowledged completions lost and lost keys that a retry claims again (FIGURE lines).
# Rounds alternate c and e (IDEM_FAILOVER_ROUNDS, default 4: sync, async, sync, async), each
# followed by d. IDEM_FAILOVER_PLANT plants a fault (the stage must then FAIL): async (no
# synchronous replication in the sync rounds), double-effect (failover_test --break), diverge (a
# row changed on the primary while the standby's replay is paused, before the comparison),
# corrupt (bytes of an index page of the rewound node overwritten, before amcheck).
# Needs root or the postgres user, pg_config's server programs and build/failover_test
# (IDEM_BUILD: the build directory). Exit 0 pass, 1 fail, 77 cannot run here.
set -euo pipefail
cd "$(dirname "$0")/../.."
PORT0=${IDEM_FAILOVER_PORT:-$((${IDEM_PGPORT:-25329} + 5))}
DIR=/tmp/idem-failover-$PORT0
BIN=$(pg_config --bindir)
PROG=${IDEM_BUILD:-$(pwd)/build}/failover_test
ROUNDS=${IDEM_FAILOVER_ROUNDS:-4}
LOAD_SECONDS=${IDEM_FAILOVER_SECONDS:-8}
KILL_AFTER=4
PLANT=${IDEM_FAILOVER_PLANT:-}
export PGOPTIONS='-c client_min_messages=warning'
CONNINFO="host=127.0.0.1,127.0.0.1 port=$PORT0,$((PORT0 + 1)) user=postgres dbname=failover target_session_attrs=read-write connect_timeout=2 sslmode=disable gssencmode=disable"
failures=0
figures=()

# shellcheck source=test/lib.sh
. test/lib.sh # as_pg
port() { echo $((PORT0 + $1)); }
data() { echo "$DIR/n$1/data"; }
q() { # node, sql...: one value per line
    local n=$1
    shift
    psql -qAtX -v ON_ERROR_STOP=1 -h "$DIR" -p "$(port "$n")" -U postgres -d failover "$@"
}
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}
pg_ctl_node() { # node, pg_ctl args...
    local n=$1
    shift
    as_pg "$BIN/pg_ctl" -D "$(data "$n")" -o "-p $(port "$n")" -l "$DIR/n$n.log" "$@" >/dev/null
}

cleanup() {
    for n in 0 1; do
        if [ -f "$(data $n)/postmaster.pid" ]; then
            as_pg "$BIN/pg_ctl" -D "$(data $n)" -m immediate -w stop >/dev/null 2>&1 || true
        fi
    done
    rm -rf "$DIR"
}

# The primary: initdb with checksums, the settings of test/pgcluster that matter here, WAL for
# a standby and pg_rewind (full_page_writes on). Port and role come from pg_ctl -o and
# postgresql.auto.conf, which pg_rewind overwrites with the source's.
init_primary() {
    mkdir -p "$DIR/n0" "$DIR/n1"
    [ "$(id -u)" = 0 ] && chown -R postgres: "$DIR"
    as_pg "$BIN/initdb" -D "$(data 0)" -U postgres --auth=trust --no-sync -E UTF8 --locale=C \
        --data-checksums >"$DIR/initdb.log" 2>&1 || { cat "$DIR/initdb.log"; return 1; }
    cat >>"$(data 0)/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DIR'
shared_preload_libraries = '${IDEM_PRELOAD:-pg_cron,idempotency}'
cron.database_name = 'postgres'
max_connections = 100
wal_level = replica
max_wal_senders = 8
wal_keep_size = '1GB'
hot_standby = on
full_page_writes = on
fsync = off
synchronous_commit = on
shared_buffers = 128MB
max_wal_size = 2GB
log_min_messages = warning
log_line_prefix = '%m [%p] '
CONF
    pg_ctl_node 0 -w -t 60 start || { tail -20 "$DIR/n0.log"; return 1; }
    psql -qAtX -h "$DIR" -p "$(port 0)" -U postgres -d postgres -c "CREATE DATABASE failover"
    q 0 -c "CREATE EXTENSION idempotency" -c "CREATE EXTENSION amcheck"
    "$PROG" --conninfo "host=$DIR port=$(port 0) user=postgres dbname=failover" --setup
}

# Node n follows node p: standby.signal and a postgresql.auto.conf with primary_conninfo only
# (no synchronous_standby_names copied from the primary).
follow() { # n, p
    local conf
    conf="$(data "$1")/postgresql.auto.conf"
    printf '%s\n' "# written by test/stages/failover.sh" \
        "primary_conninfo = 'host=127.0.0.1 port=$(port "$2") user=postgres application_name=node$1'" \
        >"$conf"
    touch "$(data "$1")/standby.signal"
    [ "$(id -u)" = 0 ] && chown postgres: "$conf" "$(data "$1")/standby.signal"
    return 0
}

make_standby() { # n, p: pg_basebackup of p
    as_pg "$BIN/pg_basebackup" -D "$(data "$1")" -h 127.0.0.1 -p "$(port "$2")" -U postgres \
        -X stream -c fast --no-sync
    follow "$1" "$2"
    pg_ctl_node "$1" -w -t 60 start || { tail -20 "$DIR/n$1.log"; return 1; }
}

# Synchronous (sync) or asynchronous (async) replication of primary p to standby s; waits until
# the standby streams in that state.
replication() { # p, s, sync|async
    if [ "$3" = sync ]; then
        q "$1" -c "ALTER SYSTEM SET synchronous_standby_names = 'node$2'"
    else
        q "$1" -c "ALTER SYSTEM RESET synchronous_standby_names"
    fi
    q "$1" -c "SELECT pg_reload_conf()" >/dev/null
    local state
    for _ in $(seq 1 300); do
        state=$(q "$1" -c "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'node$2' AND state = 'streaming'")
        [ "$state" = "$3" ] && return 0
        sleep 0.1
    done
    fail "node$2 does not stream from node$1 in state $3 (state: '${state:-none}')"
    return 1
}

# Waits until standby s has replayed primary p's current LSN; prints how long it took.
catch_up() { # p, s
    local lsn t0
    lsn=$(q "$1" -c "SELECT pg_current_wal_lsn()")
    t0=$(date +%s%N)
    for _ in $(seq 1 600); do
        if [ "$(q "$2" -c "SELECT coalesce(pg_last_wal_replay_lsn() >= '$lsn', false)")" = t ]; then
            echo "node$2 replayed node$1's LSN $lsn in $((($(date +%s%N) - t0) / 1000000)) ms"
            return 0
        fi
        sleep 0.1
    done
    fail "node$2 did not replay node$1's LSN $lsn within 60 s"
    return 1
}

# a: every table of schema idempotency and public, row count and md5 of the ordered rows, on
# primary p and standby s.
compare() { # p, s
    local t a b same=0 differ=0
    for t in $(q "$1" -c "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p') AND n.nspname IN ('idempotency', 'public') ORDER BY 1"); do
        local sql="SELECT count(*) || ' rows, md5 ' || coalesce(md5(string_agg(t::text, E'\\n' ORDER BY t::text)), '-') FROM $t t"
        a=$(q "$1" -c "$sql")
        b=$(q "$2" -c "$sql")
        if [ "$a" = "$b" ]; then
            same=$((same + 1))
            printf '  %-32s %s on both\n' "$t" "$a"
        else
            differ=$((differ + 1))
            printf '  %-32s DIFFERENT: node%s %s, node%s %s\n' "$t" "$1" "$a" "$2" "$b"
        fi
    done
    echo "equality: $same tables the same, $differ different (node$1 primary, node$2 standby)"
    if [ $differ != 0 ] || [ $same -lt 8 ]; then fail "the standby's rows differ from the primary's"; fi
}

# b: amcheck on node n: every btree index of the two schemas with heapallindexed, every table
# with verify_heapam.
amcheck() { # n, role
    local out
    if ! out=$(q "$1" -c "SELECT count(bt_index_check(i.indexrelid, true)) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam JOIN pg_namespace n ON n.oid = c.relnamespace WHERE am.amname = 'btree' AND i.indisvalid AND n.nspname IN ('idempotency', 'public')" \
        -c "SELECT count(DISTINCT c.oid) || ' ' || count(v.blkno) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace LEFT JOIN LATERAL verify_heapam(c.oid) v ON true WHERE c.relkind = 'r' AND n.nspname IN ('idempotency', 'public')" 2>&1); then
        echo "amcheck node$1 ($2): ERROR ${out//$'\n'/ }"
        fail "amcheck on node$1 ($2)"
        return 0
    fi
    local idx tables problems
    idx=$(sed -n 1p <<<"$out")
    read -r tables problems <<<"$(sed -n 2p <<<"$out")"
    echo "amcheck node$1 ($2): $idx indexes bt_index_check(heapallindexed) clean, $tables tables verify_heapam: $problems problems"
    if [ "$idx" -lt 8 ] || [ "$tables" -lt 8 ] || [ "$problems" != 0 ]; then fail "amcheck on node$1 ($2)"; fi
}

check_pair() { # p, s, when
    echo "--- $3: node$1 primary, node$2 standby"
    catch_up "$1" "$2" || return 1
    if [ "$PLANT" = diverge ]; then # planted: the standby stops replaying, the primary changes a row
        q "$2" -c "SELECT pg_wal_replay_pause()" >/dev/null
        q "$1" -c "UPDATE idempotency.records SET response_status = 599 WHERE ctid = (SELECT min(ctid) FROM idempotency.records WHERE status = 'completed')"
        echo "PLANTED: node$2's replay paused, one record changed on node$1"
    fi
    if [ "$PLANT" = corrupt ] && [ "$3" != "after the first load" ]; then
        local f
        f=$(q "$2" -c "SELECT pg_relation_filepath('idempotency.records_pkey')")
        pg_ctl_node "$2" -m fast -w stop
        printf 'corrupted' | dd of="$(data "$2")/$f" bs=1 seek=$((8192 + 5000)) conv=notrunc status=none
        pg_ctl_node "$2" -w -t 60 start
        echo "PLANTED: 9 bytes of block 1 of idempotency.records_pkey ($f) overwritten on node$2"
    fi
    compare "$1" "$2"
    amcheck "$1" primary
    amcheck "$2" standby
    [ "$PLANT" = diverge ] && q "$2" -c "SELECT pg_wal_replay_resume()" >/dev/null
    return 0
}

# SIGKILL of node n's postmaster and every process of it (a lost machine).
kill_node() { # n
    local pm kids
    pm=$(head -n 1 "$(data "$1")/postmaster.pid")
    kids=$(ps -o pid= --ppid "$pm" | tr -d ' ' | tr '\n' ' ')
    # shellcheck disable=SC2086 # the children's pids, one word each
    kill -9 "$pm" $kids
    while kill -0 "$pm" 2>/dev/null; do sleep 0.05; done
}

# One failover round: load on p, SIGKILL of p after KILL_AFTER s, s promoted; the load's checks
# on s; then p rewound and following s, and check_pair.
round() { # r, p, s, sync|async
    local r=$1 p=$2 s=$3 mode=$4 repl=$4 extra=() out rc lag t0
    [ "$PLANT" = async ] && repl=async
    [ "$PLANT" = double-effect ] && [ "$r" = 1 ] && extra=(--break)
    echo
    echo "=== round $r: $mode replication (node$p -> node$s), SIGKILL of node$p after ${KILL_AFTER} s of load"
    [ "$repl" != "$mode" ] && echo "PLANTED: asynchronous replication in a synchronous round"
    replication "$p" "$s" "$repl" || return 1
    # A recent checkpoint common to both: less WAL for pg_rewind's crash recovery and copy.
    q "$p" -c CHECKPOINT
    out="$DIR/round$r.out"
    "$PROG" --conninfo "$CONNINFO" --seconds "$LOAD_SECONDS" --tag "r$r" --expect "$mode" \
        "${extra[@]}" >"$out" 2>&1 &
    local pid=$!
    sleep "$KILL_AFTER"
    lag=$(q "$p" -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn) || ' bytes not flushed, ' || pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) || ' bytes not replayed, ' || sync_state FROM pg_stat_replication" 2>&1 || true)
    kill_node "$p"
    if [ "$mode" = sync ] && [ "${lag##*, }" != sync ]; then
        fail "round $r: the standby was not synchronous when node$p was killed (${lag:-no standby})"
    fi
    t0=$(date +%s%N)
    pg_ctl_node "$s" -w -t 60 promote
    echo "node$p killed (standby behind by ${lag:-?}); node$s promoted in $((($(date +%s%N) - t0) / 1000000)) ms"
    rc=0
    wait "$pid" || rc=$?
    cat "$out"
    grep -q '^FIGURE ' "$out" && figures+=("$(grep '^FIGURE ' "$out")")
    [ $rc = 0 ] || fail "round $r ($mode): failover_test's invariants (exit $rc)"
    # d: the old primary rewound and following the new one. The promoted node writes its new
    # timeline into pg_control at its end-of-recovery checkpoint, which runs in the background:
    # without this CHECKPOINT pg_rewind may read the old timeline and find nothing to rewind.
    q "$s" -c CHECKPOINT
    t0=$(date +%s%N)
    if ! as_pg "$BIN/pg_rewind" --no-sync --target-pgdata="$(data "$p")" \
        --source-server="host=127.0.0.1 port=$(port "$s") user=postgres dbname=postgres" \
        >"$DIR/rewind$r.log" 2>&1; then
        cat "$DIR/rewind$r.log"
        fail "pg_rewind of node$p against node$s"
        return 1
    fi
    echo "pg_rewind of node$p against node$s: $(tail -n 1 "$DIR/rewind$r.log") ($((($(date +%s%N) - t0) / 1000000)) ms)"
    follow "$p" "$s"
    # 180 s: under a machine loaded far past its cores (a run of 2026-12-04 at load 20) the
    # rewound node took longer than 60 s to reach a consistent state and accept connections.
    pg_ctl_node "$p" -w -t 180 start || { tail -40 "$DIR/n$p.log"; fail "node$p does not start as a standby"; return 1; }
    replication "$s" "$p" async || return 1
    check_pair "$s" "$p" "after round $r's rewind"
}

main() {
    [ -x "$PROG" ] || { echo "failover: $PROG is missing (build the client programs)"; return 1; }
    for b in initdb pg_ctl pg_basebackup pg_rewind; do
        [ -x "$BIN/$b" ] || { echo "FAILOVER STAGE CANNOT RUN HERE: $BIN/$b is missing"; return 77; }
    done
    local t0=$SECONDS
    cleanup
    trap cleanup EXIT
    echo "node0 on port $(port 0), node1 on port $(port 1), in $DIR; $("$BIN/postgres" --version)"
    init_primary
    make_standby 1 0
    replication 0 1 sync
    echo
    echo "=== load without failover (synchronous replication)"
    "$PROG" --conninfo "$CONNINFO" --seconds 6 --tag r0 --expect sync || fail "the load's invariants"
    check_pair 0 1 "after the first load" || return 1
    local r p=0 s=1 mode
    for r in $(seq 1 "$ROUNDS"); do
        mode=$([ $((r % 2)) = 1 ] && echo sync || echo async)
        round "$r" "$p" "$s" "$mode" || break
        local x=$p
        p=$s s=$x
    done
    echo
    echo "=== figures"
    printf '%s\n' "${figures[@]}"
    echo "failover: $failures failures, $((SECONDS - t0)) s"
    [ $failures = 0 ]
}

main "$@"
