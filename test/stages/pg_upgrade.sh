#!/usr/bin/env bash
#: stage  pg_upgrade
#: about  15 -> 17 (copy) and 17 -> 18 (--link) in the chroots, --check first; amcheck, replays, the relay's order, the bindings, the purge job
#: needs  -
#: runs   host
#: order  220
# The pg_upgrade stage: a cluster with the extension and data in every state is
# upgraded to the next major with `pg_upgrade --check`, then `pg_upgrade`, the way
# docs/operations.md "Major upgrades" tells a DBA to, and the upgraded cluster is checked:
#   15 -> 17 in the trixie chroot, copy mode (the old cluster stays usable: the rollback path);
#   17 -> 18 in the forky chroot, --link (hard links: seconds for any size, the old cluster is
#   given up once the new one starts).
# Then, as the DBA does: pg_upgrade's update_extensions.sql (pg_cron 1.4 -> 1.6 from 15), vacuumdb
# as its last message suggests.
# Before: in database shop (also pg_cron's, cron.database_name), records completed (jsonb,
# status, resource id, exact body bytes and headers), failed retryable and not, processing under
# a live and under an expired lease; inbox deliveries done, stale (the entity guard), queued and
# leased; outbox events of four keys and none, some relayed, some pending, one with a dedup_key;
# a tenant's binding (idem_bind); a purge job (idem_schedule_purge, run as a purge role) and
# records, inbox entries and outbox events past their retention; database idem_catalog holds the
# extension alone. After: every table of schema idempotency (and cron.job) row for row the same
# (count and md5), the same states; amcheck clean (bt_index_check with heapallindexed on every
# btree index of the schema, verify_heapam on every table); idem_catalog's extension catalog
# (test/upgrade/catalog.sql) the same as a fresh CREATE EXTENSION on the new major; every finished
# record replayed byte for byte; the other records claimed, in_progress and reclaimed as their
# state says; the inbox's duplicates, guard and queue; the pending events relayed per key in emit
# order, after them the events emitted on the new major; the binding refusing another role
# (42501); the purge job, run by pg_cron on the new major (its schedule moved to every second),
# succeeds as its user and purges exactly the expired rows.
# KNOWN ISSUE, 17 -> 18: Debian's 17.12 writes an attribute option (pg_attver) that forky's 18.6
# does not know; pg_upgrade fails restoring the schema after --check passed. The stage says so,
# clears the option in the old cluster and upgrades again (known_attver, below).
#
# No Debian release ships two of these majors, so the old major's server is brought into the new
# major's chroot (test/chroot's, made by `test/chroot ensure`): its Debian packages
# (postgresql-NN, postgresql-client-NN, postgresql-NN-cron, from the old release's archive: this
# machine's apt for 15, the trixie chroot's for 17) unpacked with dpkg-deb -x under
# /opt/idem-pgup/old-NN, where PostgreSQL finds its lib and share directories relative to its
# binaries; the libraries whose sonames the new release lacks (libicu72 and libldap-2.5-0 for 15
# on trixie, libicu76 and libxml2 for 17 on forky) unpacked beside them, and only those on
# LD_LIBRARY_PATH (checked: ldd finds every library, and no soname there is one the new release
# has). The extension is built for the old major in the old environment (this machine for 15, the
# trixie chroot for 17; `make install DESTDIR=`, into the old prefix only) and for the new major in
# its chroot (`make install`, as the matrix does). Nothing is installed with apt in the chroots.
# Each chroot command runs in a mount namespace of its own (unshare): its /proc and /dev mounts
# end with it and never touch a test/chroot run using the same chroot.
# Cache (IDEM_PGUP_CACHE, default /var/tmp/idem-pg-upgrade): debs-OLD-NEW/, the old majors'
# packages (downloaded once; `rm -rf` it to fetch anew), build-15/ and ext-15/, the last build for
# 15, the logs of the downloads and builds. In the chroots: /opt/idem-pgup (the old prefixes) and
# /tmp/idem-pgup-build (the tree the stage built and runs from), both made anew by each run.
# Settings: IDEM_PGUP_PAIRS (default "15:17 17:18"), IDEM_PGUP_PGPORT (default 25400: the
# clusters' ports from there, a socket in the chroot's /tmp only, no TCP), IDEM_PGUP_KEEP=1 keeps
# the clusters' directory (/tmp/idem-pgup-OLD-NEW in the chroot), IDEM_PGUP_FAULT plants a fault
# in the upgraded cluster before it is checked, to show the checks fail: lose-record (one
# completed record deleted) or reorder (two pending events of a key swapped). Needs root
# (chroot, unshare, mount), the chroots of test/chroot and Debian's archive.
# Exits non-zero on any failed check; every check prints PASS or FAIL with the values compared.
set -euo pipefail

# ---------------------------------------------------------------------------------------------
# Inside the new major's chroot: `pg_upgrade.sh inside OLD NEW MODE PORT VERSION`, run by the
# stage (below) from the copy of the tree it built in, /tmp/idem-pgup-build.
# ---------------------------------------------------------------------------------------------
inside() {
    OLD=$1 NEW=$2 MODE=$3 PO=$4 PN=$(($4 + 1)) EXT_VERSION=$5
    TAG="pg_upgrade $OLD->$NEW"
    PREFIX=/opt/idem-pgup/old-$OLD
    OLDBIN=$PREFIX/usr/lib/postgresql/$OLD/bin
    NEWBIN=/usr/lib/postgresql/$NEW/bin
    W=/tmp/idem-pgup-$OLD-$NEW
    SRC=/tmp/idem-pgup-build
    # the libraries of the old release (a multiarch directory of the unpacked packages)
    COMPAT=$(find "$PREFIX/usr/lib" -maxdepth 1 -name '*-linux-gnu' | head -n 1)
    FAILED=0
    trap stop_clusters EXIT
    rm -rf "$W"
    mkdir -p "$W"
    chown postgres: "$W"

    check_old_binaries
    make_cluster "$OLDBIN" "$W/old" "$PO"
    start "$OLDBIN" "$W/old"
    seed
    snapshot "$PO" before
    stop "$OLDBIN" "$W/old"

    make_cluster "$NEWBIN" "$W/new" "$PN"
    upgrade
    start "$NEWBIN" "$W/new"
    after_start
    [ -z "${IDEM_PGUP_FAULT:-}" ] || plant "$IDEM_PGUP_FAULT"
    snapshot "$PN" after
    compare_snapshots
    check_amcheck
    check_catalog
    check_records
    check_inbox
    check_outbox
    check_binding
    check_purge
    stop "$NEWBIN" "$W/new"
    if [ "$FAILED" = 0 ]; then say "ok ($MODE mode)"; else say "FAILED: $FAILED check(s)"; exit 1; fi
}

say() { echo "$TAG: $*"; }
fatal() { echo "$TAG: FAIL: $*"; exit 1; }
pass() { echo "$TAG: PASS: $*"; }
# check what expected actual: PASS with the value, or FAIL with both (lines joined by " / ");
# the stage goes on to the next check and fails at the end
check() {
    if [ "$2" = "$3" ]; then pass "$1: ${3//$'\n'/ / }"; else
        echo "$TAG: FAIL: $1: expected '${2//$'\n'/ / }', got '${3//$'\n'/ / }'"
        FAILED=$((FAILED + 1))
    fi
}

# same what expected-file actual-file: the two files identical, or FAIL with their differences
same() {
    if cmp -s "$2" "$3"; then pass "$1: identical ($(wc -l <"$2") lines, md5 $(md5sum <"$2" | cut -c1-32))"; else
        echo "$TAG: FAIL: $1: differences (< expected, > actual):"
        diff "$2" "$3" | head -n 40 | sed 's/^/    /'
        FAILED=$((FAILED + 1))
    fi
}

# The server's programs run as postgres (initdb and pg_upgrade refuse root), from its directory
# (pg_upgrade writes its scripts and logs to the current one); the old binaries find the
# libraries the new release lacks on LD_LIBRARY_PATH, which holds nothing else.
as_pg() { (cd "$W" && runuser -u postgres -- env LD_LIBRARY_PATH="$COMPAT" "$@"); }

# q port database sql...: psql of the new major (libpq talks to both), each -c its own transaction
q() {
    local port=$1 db=$2 args=()
    shift 2
    for s in "$@"; do args+=(-c "$s"); done
    PGOPTIONS='-c client_min_messages=warning -c TimeZone=UTC' "$NEWBIN/psql" -X -qAt \
        -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -h "$W" -p "$port" -U postgres -d "$db" "${args[@]}"
}

# qf port database file: a file of SQL, as psql -f
qf() {
    PGOPTIONS='-c client_min_messages=warning -c TimeZone=UTC' "$NEWBIN/psql" -X -qAt \
        -v ON_ERROR_STOP=1 -h "$W" -p "$1" -U postgres -d "$2" -f "$3"
}

# Every library of the old server found (llvmjit.so aside: jit = off, its LLVM is not there),
# and LD_LIBRARY_PATH holding only sonames the new release does not have.
check_old_binaries() {
    local missing=() f shadow=()
    for f in "$OLDBIN"/postgres "$OLDBIN"/pg_ctl "$OLDBIN"/initdb "$OLDBIN"/pg_controldata \
        "$OLDBIN"/pg_resetwal "$PREFIX/usr/lib/postgresql/$OLD/lib"/*.so; do
        case $f in */llvmjit.so) continue ;; esac
        while read -r lib; do missing+=("$(basename "$f"): $lib"); done < <(
            LD_LIBRARY_PATH=$COMPAT ldd "$f" | awk '/not found/ { print $1 }')
    done
    [ ${#missing[@]} = 0 ] || fatal "the old $OLD server lacks libraries: ${missing[*]}"
    for f in "$COMPAT"/*.so.*; do
        [ ! -e "/usr/lib/$(basename "$COMPAT")/$(basename "$f")" ] || shadow+=("$(basename "$f")")
    done
    [ ${#shadow[@]} = 0 ] || fatal "LD_LIBRARY_PATH would shadow the new release's ${shadow[*]}"
    pass "old $OLD binaries ($(LD_LIBRARY_PATH=$COMPAT "$OLDBIN/postgres" -V)) find every library; LD_LIBRARY_PATH holds only $(find "$COMPAT" -name '*.so.*' -printf '%f\n' | sed 's/\.so\..*//' | sort -u | tr '\n' ' ')"
}

# make_cluster bindir datadir port: the same initdb options and settings on both sides, as
# pg_upgrade needs (encoding, locale, data checksums: 18's initdb turns them on by default) and
# docs/operations.md says (shared_preload_libraries and pg_cron's settings carried over).
make_cluster() {
    as_pg "$1/initdb" -D "$2" -U postgres --auth=trust -E UTF8 --locale=C --data-checksums \
        --no-sync >"$2.initdb.log" 2>&1 || { cat "$2.initdb.log"; fatal "initdb $2"; }
    cat >>"$2/postgresql.conf" <<CONF
port = $3
listen_addresses = ''
unix_socket_directories = '$W'
shared_preload_libraries = 'pg_cron,idempotency'
cron.database_name = 'shop'
cron.use_background_workers = on
max_worker_processes = 32
jit = off
fsync = off
log_min_messages = warning
CONF
}

start() { as_pg "$1/pg_ctl" -D "$2" -l "$2.log" -w -t 60 start >/dev/null || { tail -n 30 "$2.log"; fatal "cannot start $2"; }; }
stop() { as_pg "$1/pg_ctl" -D "$2" -m fast -w -t 60 stop >/dev/null || fatal "cannot stop $2"; }

# shellcheck disable=SC2317 # run by the EXIT trap
stop_clusters() {
    local rc=$? d
    for d in "$W/old:$OLDBIN" "$W/new:$NEWBIN"; do
        if [ -f "${d%%:*}/postmaster.pid" ]; then
            as_pg "${d#*:}/pg_ctl" -D "${d%%:*}" -m immediate -w stop >/dev/null 2>&1 || true
        fi
    done
    if [ "${IDEM_PGUP_KEEP:-}" = 1 ] || [ $rc != 0 ]; then say "kept $W (in the chroot): the clusters and logs"; else
        rm -rf "$W"
    fi
}

# The data of every state, in database shop, by the extension's own calls (an UPDATE only ages
# the rows the purge must take, and a sleep lets two leases of 1 second expire).
seed() {
    q "$PO" postgres "CREATE DATABASE shop" "CREATE DATABASE idem_catalog"
    q "$PO" idem_catalog "CREATE EXTENSION idempotency"
    q "$PO" shop "CREATE EXTENSION pg_cron" "CREATE EXTENSION idempotency" \
        "CREATE ROLE pgup_tenant_a NOLOGIN" \
        "CREATE ROLE pgup_tenant_a_api NOLOGIN IN ROLE pgup_tenant_a" \
        "CREATE ROLE pgup_tenant_b_api NOLOGIN" \
        "CREATE ROLE pgup_purge LOGIN" \
        "GRANT EXECUTE ON FUNCTION idempotency.idem_claim(text, text, bytea, interval, interval, boolean)
             TO pgup_tenant_a_api, pgup_tenant_b_api" \
        "GRANT EXECUTE ON PROCEDURE idempotency.idem_purge_loop(integer, interval, boolean, interval, interval, bigint) TO pgup_purge" \
        "GRANT EXECUTE ON FUNCTION idempotency.idem_purge_batch(text, integer, tid, boolean, interval) TO pgup_purge" \
        "SELECT idempotency.idem_bind('scope', 'tenant-a/', 'pgup_tenant_a')" >/dev/null || fatal "seed: roles"
    # records: completed (single-transaction mode), with exact body bytes and headers on every
    # 10th; the fingerprint of a key is that of {"key": key}
    q "$PO" shop "BEGIN" \
        "SELECT count(*) FROM (SELECT idempotency.idem_claim('pgup', k, $(fp k)) c
                               FROM (SELECT 'done-' || g AS k FROM generate_series(1, 100) g) s OFFSET 0) c
         WHERE (c).outcome = 'claimed'" \
        "SELECT count(*) FILTER (WHERE idempotency.idem_complete('pgup', 'done-' || g, 1, 'pay-' || g,
                    jsonb_build_object('id', g, 'amount', g * 100, 'note', 'paid ' || repeat('é', g % 5)),
                    200 + g % 2,
                    CASE WHEN g % 10 = 0 THEN decode(md5(g::text), 'hex') || '\\x00ff0a'::bytea END,
                    CASE WHEN g % 10 = 0 THEN jsonb_build_object('Location', '/payments/' || g,
                                                                 'Content-Type', 'application/octet-stream') END))
         FROM generate_series(1, 100) g" "COMMIT" >/dev/null || fatal "seed: completed records"
    # failed retryable, failed for good (replays), two-phase claims under a live lease and under
    # one that expires, a tenant's completed record; records past their retention for the purge
    q "$PO" shop \
        "SELECT count(*) FILTER (WHERE (idempotency.idem_claim('pgup', 'retry-' || g, $(fp "'retry-' || g"))).outcome = 'claimed') FROM generate_series(1, 4) g" \
        "SELECT count(*) FILTER (WHERE idempotency.idem_fail('pgup', 'retry-' || g, 1, true, '{\"error\": \"timeout\"}', 503)) FROM generate_series(1, 4) g" \
        "SELECT count(*) FILTER (WHERE (idempotency.idem_claim('pgup', 'final-' || g, $(fp "'final-' || g"))).outcome = 'claimed') FROM generate_series(1, 3) g" \
        "SELECT count(*) FILTER (WHERE idempotency.idem_fail('pgup', 'final-' || g, 1, false,
                    jsonb_build_object('error', 'declined', 'n', g), 402)) FROM generate_series(1, 3) g" \
        "SELECT count(*) FILTER (WHERE (idempotency.idem_claim('pgup', 'live-' || g, $(fp "'live-' || g"), lease => '1 hour')).outcome = 'claimed') FROM generate_series(1, 2) g" \
        "SELECT count(*) FILTER (WHERE (idempotency.idem_claim('pgup', 'lease-' || g, $(fp "'lease-' || g"), lease => '1 second')).outcome = 'claimed') FROM generate_series(1, 2) g" \
        "SELECT (idempotency.idem_claim('tenant-a/orders', 't-1', '\\x01')).outcome" \
        "SELECT idempotency.idem_complete('tenant-a/orders', 't-1', 1, 'order-1')" \
        "SELECT count(*) FILTER (WHERE (idempotency.idem_claim('pgup', 'purge-' || g, '\\x02')).outcome = 'claimed') FROM generate_series(1, 300) g" \
        "SELECT count(*) FILTER (WHERE idempotency.idem_complete('pgup', 'purge-' || g, 1, 'gone-' || g)) FROM generate_series(1, 300) g" \
        "UPDATE idempotency.records SET expires_at = now() - interval '1 day' WHERE key LIKE 'purge-%'" >/dev/null ||
        fatal "seed: records"
    # inbox: inline deliveries (done), the entity guard (one new, one stale), a queue of 7 of
    # which a worker leased the first 2; entries past their retention for the purge
    q "$PO" shop \
        "SELECT count(*) FILTER (WHERE idempotency.idem_inbox_receive('pgup-billing', 'evt-' || g,
                    sha256(convert_to('body ' || g, 'UTF8'))) = 'new') FROM generate_series(1, 20) g" \
        "SELECT idempotency.idem_inbox_receive('pgup-billing', 'order-9:v3', entity_key => 'order-9', entity_seq => 3),
                idempotency.idem_inbox_receive('pgup-billing', 'order-9:v2', entity_key => 'order-9', entity_seq => 2)" \
        "SELECT count(*) FILTER (WHERE idempotency.idem_inbox_receive('pgup-queue', 'q-' || g,
                    sha256(convert_to('payload q-' || g, 'UTF8')), enqueue => true, event_type => 'order.paid',
                    payload => convert_to('payload q-' || g, 'UTF8')) = 'new') FROM generate_series(1, 7) g" \
        "SELECT count(*) FROM idempotency.idem_inbox_next('pgup-queue', 2, interval '1 hour')" \
        "SELECT count(*) FILTER (WHERE idempotency.idem_inbox_receive('pgup-purge', 'purge-evt-' || g) = 'new')
         FROM generate_series(1, 40) g" \
        "UPDATE idempotency.inbox SET expires_at = now() - interval '1 day' WHERE consumer = 'pgup-purge'" >/dev/null ||
        fatal "seed: inbox"
    # outbox: 12 events of keys k1..k4 and none, in this emit order; one relay round finishes the
    # first of each key and the keyless ones; 30 keyless events relayed and aged for the purge
    q "$PO" shop \
        "SELECT count(idempotency.idem_outbox_emit('pgup.orders', jsonb_build_object('key', k, 'n', n), key => k, dedup_key => d))
         FROM (VALUES ('k1', 1, NULL::text), ('k2', 1, NULL), ('k1', 2, NULL), ('k3', 1, NULL), ('k2', 2, NULL),
                      ('k1', 3, NULL), (NULL, 1, NULL), ('k3', 2, NULL), ('k2', 3, NULL), ('k1', 4, NULL),
                      (NULL, 2, NULL), ('k4', 1, 'pgup:k4:1')) v(k, n, d)" \
        "SELECT count(idempotency.idem_outbox_emit('pgup.old', jsonb_build_object('n', g))) FROM generate_series(1, 30) g" \
        >/dev/null || fatal "seed: outbox"
    check "before: the relay's round on $OLD" "k1:1 k2:1 k3:1 -:1 -:2 k4:1" "$(relay_round "$PO" pgup.orders)"
    relay_round "$PO" pgup.old >/dev/null
    q "$PO" shop "UPDATE idempotency.outbox SET expires_at = now() - interval '1 day' WHERE topic = 'pgup.old'"
    # the purge job, run as a role that may only purge (docs/lifecycle.md); it would run next on
    # 1 January: on the new major check_purge moves it to every second
    q "$PO" shop "SELECT idempotency.idem_schedule_purge('0 0 1 1 *', run_as => 'pgup_purge') > 0" >/dev/null ||
        fatal "seed: idem_schedule_purge"
    check "before: the binding refuses another role on $OLD" "42501" "$(claim_as "$PO" pgup_tenant_b_api t-0)"
    q "$PO" shop "SELECT pg_sleep(1.2)" >/dev/null # the 1-second leases expire
}

# fp expression: the fingerprint of the record whose key the SQL expression gives
fp() { echo "idempotency.idem_fingerprint(jsonb_build_object('key', $1))"; }

# relay_round port topic: one relay call (idem_outbox_next, its own transaction), each event
# finished (idem_outbox_done); prints key:n of each, in the order handed out
relay_round() {
    local out
    out=$(q "$1" shop "CREATE TEMP TABLE batch AS
                           SELECT * FROM idempotency.idem_outbox_next('$2', 100, interval '1 hour') WITH ORDINALITY" \
        "SELECT count(*) FILTER (WHERE idempotency.idem_outbox_done(event_id, attempt) <> 'done') FROM batch" \
        "SELECT coalesce(string_agg(coalesce(key, '-') || ':' || (payload->>'n'), ' ' ORDER BY ordinality), '') FROM batch")
    [ "$(echo "$out" | sed -n 1p)" = 0 ] || fatal "idem_outbox_done refused events of $2: $out"
    echo "$out" | sed -n 2p
}

# claim_as port role key: a claim of scope tenant-a/orders as role; prints its outcome or SQLSTATE
claim_as() {
    q "$1" shop "SET ROLE $2" "SELECT (idempotency.idem_claim('tenant-a/orders', '$3', '\\x01')).outcome" 2>&1 |
        sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p; /^[a-z_][a-z_]*$/p' | head -n 1 || true
}

# snapshot port name: what must be the same after the upgrade, in $W/name.*
snapshot() {
    local port=$1 out=$W/$2 t
    : >"$out.rows"
    for t in idempotency.records idempotency.inbox idempotency.inbox_entities idempotency.outbox \
        idempotency.bindings idempotency.outbox_key_lock cron.job; do
        echo "$t $(q "$port" shop "SELECT count(*) || ' rows, md5 ' || md5(coalesce(string_agg(x::text, E'\\n' ORDER BY x::text), ''))
                                   FROM $t x")" >>"$out.rows"
    done
    state "$port" >"$out.state"
    # the finished records and what a replay must answer: the stored result, bytes as hex
    q "$port" shop "SELECT key, resource_id, response::text, response_status, encode(response_body, 'hex'), response_headers::text
                    FROM idempotency.records WHERE scope = 'pgup' AND (key LIKE 'done-%' OR key LIKE 'final-%')
                    ORDER BY key" >"$out.finished"
    q "$port" shop "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                    JOIN pg_am a ON a.oid = c.relam
                    WHERE c.relnamespace = 'idempotency'::regnamespace AND a.amname = 'btree'" >"$out.indexes"
}

# state port: the records, inbox and outbox by state, the bindings, the purge job
state() {
    q "$1" shop "SELECT 'records: ' || string_agg(cat || ' ' || n, ', ' ORDER BY cat) FROM (
        SELECT CASE WHEN status = 'processing' THEN 'processing, lease ' ||
                         CASE WHEN lease_expires_at > now() THEN 'live' ELSE 'expired' END
                    WHEN status = 'failed' THEN 'failed ' || CASE WHEN retryable THEN 'retryable' ELSE 'final' END
                    ELSE status || CASE WHEN expires_at < now() THEN ' expired' ELSE '' END END AS cat,
               count(*) AS n FROM idempotency.records GROUP BY 1) s" \
        "SELECT 'inbox: ' || string_agg(cat || ' ' || n, ', ' ORDER BY cat) FROM (
        SELECT consumer || ' ' || status || CASE WHEN expires_at < now() THEN ' expired' ELSE '' END AS cat,
               count(*) AS n FROM idempotency.inbox GROUP BY 1) s" \
        "SELECT 'outbox: ' || string_agg(cat || ' ' || n, ', ' ORDER BY cat) FROM (
        SELECT topic || ' ' || status || CASE WHEN expires_at < now() THEN ' expired' ELSE '' END AS cat,
               count(*) AS n FROM idempotency.outbox GROUP BY 1) s" \
        "SELECT 'bindings: ' || string_agg(kind || ' ' || prefix || ' ' || role::text, ', ') FROM idempotency.bindings" \
        "SELECT 'cron.job: ' || string_agg(jobname || ' [' || schedule || '] ' || database || ' as ' || username, ', ')
         FROM cron.job"
}

EXPECTED_STATE="records: completed 101, completed expired 300, failed final 3, failed retryable 4, processing, lease expired 2, processing, lease live 2
inbox: pgup-billing done 21, pgup-billing stale 1, pgup-purge done expired 40, pgup-queue processing 2, pgup-queue received 5
outbox: pgup.old done expired 30, pgup.orders done 6, pgup.orders pending 6
bindings: scope tenant-a/ pgup_tenant_a
cron.job: idempotency-purge:shop [0 0 1 1 *] shop as pgup_purge"

# --check first (on the stopped old cluster), then the upgrade itself, both as a DBA runs them
upgrade() {
    local opts=(-b "$OLDBIN" -B "$NEWBIN" -d "$W/old" -D "$W/new" -p "$PO" -P "$PN" -s "$W" -U postgres)
    [ "$MODE" = link ] && opts+=(--link)
    check "the state on $OLD" "$EXPECTED_STATE" "$(cat "$W/before.state")"
    local t=$SECONDS
    as_pg "$NEWBIN/pg_upgrade" --check "${opts[@]}" >"$W/check.log" 2>&1 ||
        { cat "$W/check.log"; fatal "pg_upgrade --check failed"; }
    check "pg_upgrade --check" "*Clusters are compatible*" \
        "$(grep -q '^\*Clusters are compatible\*' "$W/check.log" && echo '*Clusters are compatible*')"
    if ! as_pg "$NEWBIN/pg_upgrade" "${opts[@]}" >"$W/upgrade.log" 2>&1; then
        if grep -qs 'unrecognized parameter "pg_attver"' "$W"/new/pg_upgrade_output.d/*/log/*.log; then
            known_attver
            t=$SECONDS
            as_pg "$NEWBIN/pg_upgrade" "${opts[@]}" >"$W/upgrade.log" 2>&1 || pg_upgrade_failed
        else
            pg_upgrade_failed
        fi
    fi
    check "pg_upgrade ($MODE mode, $((SECONDS - t)) s)" "Upgrade Complete" \
        "$(grep -o '^Upgrade Complete' "$W/upgrade.log" || true)"
}

pg_upgrade_failed() {
    cat "$W/upgrade.log"
    find "$W/new/pg_upgrade_output.d" -name '*.log' -exec tail -n 20 {} + 2>/dev/null
    fatal "pg_upgrade failed"
}

# KNOWN ISSUE (docs/operations.md "Major upgrades"): the minor releases of November 2026 (15.20,
# 17.12) store an attribute option pg_attver on every column they create; 18.6, forky's (August
# 2026), does not know it, and pg_upgrade, after --check said the clusters are compatible, fails
# restoring the first table ('unrecognized parameter "pg_attver"'). Until forky has an 18 of the
# same release, the stage clears the option from the old cluster's columns (the state of a column
# made before 17.12) and upgrades again. It says so; it never happens silently.
known_attver() {
    local db n total=0
    say "KNOWN ISSUE: pg_upgrade $OLD -> $NEW failed restoring the schema: 'unrecognized parameter \"pg_attver\"'" \
        "(after --check said the clusters are compatible): $("$NEWBIN/postgres" -V) predates the old $OLD's minor release"
    [ ! -e "$W/old/global/pg_control.old" ] || fatal "the old cluster was disabled (--link): no second try"
    start "$OLDBIN" "$W/old"
    for db in $(q "$PO" postgres "SELECT datname FROM pg_database WHERE datallowconn"); do
        n=$(q "$PO" "$db" "WITH u AS (UPDATE pg_catalog.pg_attribute
                                      SET attoptions = NULLIF(ARRAY(SELECT o FROM unnest(attoptions) o
                                                                    WHERE o NOT LIKE 'pg_attver=%'), '{}')
                                      WHERE attrelid >= 16384 AND attoptions::text LIKE '%pg_attver=%' RETURNING 1)
                           SELECT count(*) FROM u")
        total=$((total + n))
    done
    stop "$OLDBIN" "$W/old"
    rm -rf "$W/new"
    make_cluster "$NEWBIN" "$W/new" "$PN"
    say "KNOWN ISSUE: cleared pg_attver from $total columns of the old cluster, a new $NEW cluster, pg_upgrade again"
}

# What docs/operations.md "Major upgrades" has the DBA do once the new cluster runs: the
# extension updates pg_upgrade lists (pg_cron's), the planner's statistics.
after_start() {
    local s
    if [ -f "$W/update_extensions.sql" ]; then
        qf "$PN" postgres "$W/update_extensions.sql" >/dev/null || fatal "update_extensions.sql failed"
        say "ran pg_upgrade's update_extensions.sql: $(grep -o 'ALTER EXTENSION "[^"]*" UPDATE' "$W/update_extensions.sql" | sort -u | tr '\n' ' ')"
    fi
    # the statistics, as pg_upgrade's last message says (18 carries most of them over)
    local stats=("--analyze-in-stages")
    [ "$NEW" -lt 18 ] || stats=("--analyze-in-stages --missing-stats-only" "--analyze-only")
    for s in "${stats[@]}"; do
        grep -q -- "vacuumdb .*--all $s\$" "$W/upgrade.log" || fatal "pg_upgrade did not suggest vacuumdb --all $s"
        # shellcheck disable=SC2086 # the options: words
        "$NEWBIN/vacuumdb" -h "$W" -p "$PN" -U postgres --all $s >"$W/vacuumdb.log" 2>&1 ||
            { cat "$W/vacuumdb.log"; fatal "vacuumdb --all $s"; }
    done
    say "ran vacuumdb --all $(printf '%s, then ' "${stats[@]}" | sed 's/, then $//') (what pg_upgrade suggested)"
    local v
    v=$(q "$PN" shop "SELECT string_agg(extname || ' ' || extversion, ', ' ORDER BY extname) FROM pg_extension
                       WHERE extname IN ('idempotency', 'pg_cron')")
    check "extensions on $NEW (idempotency $EXT_VERSION on both sides, pg_cron at its default version)" \
        "idempotency $EXT_VERSION, pg_cron $(default_version pg_cron)" "$v"
}

default_version() { sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" "/usr/share/postgresql/$NEW/extension/$1.control"; }

# The planted faults (IDEM_PGUP_FAULT): what a broken upgrade could do; the checks must see it.
plant() {
    case $1 in
    lose-record) q "$PN" shop "DELETE FROM idempotency.records WHERE scope = 'pgup' AND key = 'done-7'" ;;
    # k1's pending events 3 and 4 trade places: the relay hands 4 out before 3
    reorder) q "$PN" shop "UPDATE idempotency.outbox SET payload = jsonb_set(payload, '{n}',
                               CASE payload->>'n' WHEN '3' THEN '4' ELSE '3' END::jsonb)
                           WHERE topic = 'pgup.orders' AND key = 'k1' AND payload->>'n' IN ('3', '4')" ;;
    *) fatal "unknown IDEM_PGUP_FAULT '$1' (lose-record, reorder)" ;;
    esac >/dev/null
    say "planted fault $1"
}

compare_snapshots() {
    local t
    while read -r t rest; do
        check "$t row for row" "$rest" "$(awk -v t="$t" '$1 == t { $1 = ""; sub(/^ /, ""); print }' "$W/after.rows")"
    done <"$W/before.rows"
    check "the state on $NEW" "$(cat "$W/before.state")" "$(cat "$W/after.state")"
}

# amcheck on every btree index of schema idempotency (heapallindexed: every heap tuple has its
# index entry) and verify_heapam on every table: no corruption row.
check_amcheck() {
    local out
    out=$(q "$PN" shop "CREATE EXTENSION amcheck" \
        "SELECT count(bt_index_check(c.oid, heapallindexed => true)::text)
         FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
         WHERE c.relnamespace = 'idempotency'::regnamespace AND a.amname = 'btree'" \
        "SELECT count(DISTINCT c.oid) || ' tables, ' || count(v.msg) || ' corruption rows'
         FROM pg_class c LEFT JOIN LATERAL verify_heapam(c.oid) v ON true
         WHERE c.relnamespace = 'idempotency'::regnamespace AND c.relkind = 'r'")
    check "amcheck: btree indexes checked with heapallindexed" "$(cat "$W/before.indexes")" "$(echo "$out" | head -n 1)"
    check "amcheck: verify_heapam" "$(q "$PN" shop "SELECT count(*) FROM pg_class WHERE relnamespace = 'idempotency'::regnamespace AND relkind = 'r'") tables, 0 corruption rows" \
        "$(echo "$out" | tail -n 1)"
}

# The extension's catalog in the upgraded idem_catalog = a fresh CREATE EXTENSION on the new major.
# The ACLs apart: pg_dump --binary-upgrade leaves out an ACL equal to the owner's default, so a
# table whose install script only revoked from PUBLIC (an explicit ACL of the owner's privileges
# and its pg_init_privs row on a fresh install) comes out with a NULL ACL (the same privileges)
# and no pg_init_privs row. The privileges are compared as they take effect instead (acldefault
# for a NULL ACL), and the stored differences are counted.
check_catalog() {
    q "$PN" postgres "CREATE DATABASE idem_catalog_fresh"
    q "$PN" idem_catalog_fresh "CREATE EXTENSION idempotency"
    local db n
    for db in idem_catalog_fresh idem_catalog; do
        qf "$PN" "$db" "$SRC/test/upgrade/catalog.sql" >"$W/$db.catalog"
        grep -v -e ' | acl = ' -e ' | initial privileges ' "$W/$db.catalog" >"$W/$db.catalog-noacl"
        q "$PN" "$db" "$PRIVILEGES_SQL" >"$W/$db.privileges"
    done
    same "the extension's catalog (test/upgrade/catalog.sql, ACLs apart) upgraded = a fresh CREATE EXTENSION on $NEW" \
        "$W/idem_catalog_fresh.catalog-noacl" "$W/idem_catalog.catalog-noacl"
    same "the privileges in effect on the extension's objects upgraded = fresh" \
        "$W/idem_catalog_fresh.privileges" "$W/idem_catalog.privileges"
    n=$(diff "$W/idem_catalog_fresh.catalog" "$W/idem_catalog.catalog" | grep -c '^<.* | acl = ' || true)
    say "note: $n objects of a fresh install store an explicit ACL (and pg_init_privs) where the upgraded ones have NULL, the owner's default: the same privileges"
}

# Every object of the extension with the privileges in effect (an ACL or, when NULL, the owner's
# default), grantee:privilege, * for a grant option.
PRIVILEGES_SQL="WITH objs(name, acl, kind, owner) AS (
    SELECT pg_describe_object(d.classid, d.objid, 0),
           CASE d.classid WHEN 'pg_class'::regclass THEN (SELECT relacl FROM pg_class WHERE oid = d.objid)
                          WHEN 'pg_proc'::regclass THEN (SELECT proacl FROM pg_proc WHERE oid = d.objid)
                          WHEN 'pg_type'::regclass THEN (SELECT typacl FROM pg_type WHERE oid = d.objid) END,
           CASE d.classid WHEN 'pg_class'::regclass THEN
                    (SELECT CASE relkind WHEN 'S' THEN 's' ELSE 'r' END FROM pg_class WHERE oid = d.objid)
                          WHEN 'pg_proc'::regclass THEN 'f' ELSE 'T' END::\"char\",
           CASE d.classid WHEN 'pg_class'::regclass THEN (SELECT relowner FROM pg_class WHERE oid = d.objid)
                          WHEN 'pg_proc'::regclass THEN (SELECT proowner FROM pg_proc WHERE oid = d.objid)
                          WHEN 'pg_type'::regclass THEN (SELECT typowner FROM pg_type WHERE oid = d.objid) END
    FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
    WHERE e.extname = 'idempotency' AND d.deptype = 'e'
      AND d.classid IN ('pg_class'::regclass, 'pg_proc'::regclass, 'pg_type'::regclass)
    UNION ALL
    SELECT 'schema idempotency', nspacl, 'n', nspowner FROM pg_namespace WHERE nspname = 'idempotency')
SELECT name || ' ' || coalesce((SELECT string_agg(CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                                                  || ':' || a.privilege_type || CASE WHEN a.is_grantable THEN '*' ELSE '' END,
                                                  ',' ORDER BY 1)
                                FROM aclexplode(coalesce(acl, acldefault(kind, owner))) a), '')
FROM objs ORDER BY 1"

check_records() {
    # every finished record (completed, failed for good): a claim with its fingerprint replays
    # the stored result, byte for byte
    q "$PN" shop "SELECT k, (c).outcome, (c).resource_id, (c).response::text, (c).response_status,
                         encode((c).response_body, 'hex'), (c).response_headers::text
                  FROM (SELECT k, idempotency.idem_claim('pgup', k, $(fp k)) AS c
                        FROM (SELECT 'done-' || g AS k FROM generate_series(1, 100) g
                              UNION ALL SELECT 'final-' || g FROM generate_series(1, 3) g) keys OFFSET 0) s
                  ORDER BY k" >"$W/replays"
    check "replays: outcomes" "replayed 103" "$(cut -d'|' -f2 "$W/replays" | sort | uniq -c | awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1 }')"
    cut -d'|' -f1,3- "$W/replays" >"$W/replayed"
    same "replays: the results stored on $OLD (resource id, response, status, body bytes, headers)" \
        "$W/before.finished" "$W/replayed"
    # the others, as their state says; a different request under a finished key
    local got
    got=$(q "$PN" shop "SELECT string_agg(k || ' ' || (c).outcome || ' ' || (c).attempt, ', ' ORDER BY k)
                        FROM (SELECT k, idempotency.idem_claim('pgup', k, $(fp k), wait => false) AS c
                              FROM unnest(ARRAY['retry-1', 'retry-2', 'retry-3', 'retry-4', 'live-1', 'live-2',
                                                'lease-1', 'lease-2']) k OFFSET 0) s" \
        "SELECT (idempotency.idem_claim('pgup', 'done-1', $(fp "'another request'"))).outcome")
    check "claims of the other records" "lease-1 reclaimed 2, lease-2 reclaimed 2, live-1 in_progress 1, live-2 in_progress 1, retry-1 claimed 2, retry-2 claimed 2, retry-3 claimed 2, retry-4 claimed 2
mismatch" "$got"
}

check_inbox() {
    local got
    got=$(q "$PN" shop \
        "SELECT string_agg(o || ' ' || n, ', ' ORDER BY o) FROM (SELECT o, count(*) AS n
             FROM (SELECT idempotency.idem_inbox_receive('pgup-billing', 'evt-' || g,
                              sha256(convert_to('body ' || g, 'UTF8'))) AS o
                   FROM generate_series(1, 20) g OFFSET 0) s GROUP BY o) t" \
        "SELECT idempotency.idem_inbox_receive('pgup-billing', 'evt-1', sha256('\\x00'::bytea))" \
        "SELECT idempotency.idem_inbox_receive('pgup-billing', 'order-9:v1', entity_key => 'order-9', entity_seq => 1) || ' ' ||
                idempotency.idem_inbox_receive('pgup-billing', 'order-9:v4', entity_key => 'order-9', entity_seq => 4)")
    check "inbox: redeliveries, a reused id, the entity guard (order-9 at 3)" "duplicate 20
mismatch
stale new" "$got"
    # the queue: the 5 events not leased, in order, with their payloads; done by a worker
    got=$(q "$PN" shop "CREATE TEMP TABLE w AS SELECT * FROM idempotency.idem_inbox_next('pgup-queue', 100) WITH ORDINALITY" \
        "SELECT string_agg(event_id || '=' || convert_from(payload, 'UTF8') || '/' || attempt, ' ' ORDER BY ordinality) FROM w" \
        "SELECT string_agg(idempotency.idem_inbox_done('pgup-queue', event_id, attempt), ' ' ORDER BY ordinality) FROM w")
    check "inbox: the queue handed out and done" "q-3=payload q-3/1 q-4=payload q-4/1 q-5=payload q-5/1 q-6=payload q-6/1 q-7=payload q-7/1
done done done done done" "$got"
}

# The pending events, each key's in emit order, one at a time; events emitted on the new major
# come after them (idempotency.outbox_seq went on from where it was); a dedup_key still holds.
check_outbox() {
    local rounds=() r got
    got=$(q "$PN" shop "SELECT count(idempotency.idem_outbox_emit('pgup.orders', jsonb_build_object('key', k, 'n', n), key => k))
                        FROM (VALUES ('k1', 5), ('k3', 3)) v(k, n)" \
        "SELECT idempotency.idem_outbox_emit('pgup.orders', '{\"again\": true}'::jsonb, key => 'k4', dedup_key => 'pgup:k4:1')
                = (SELECT event_id FROM idempotency.outbox WHERE dedup_key = 'pgup:k4:1')")
    check "outbox: emits on $NEW, the dedup_key of $OLD" "2
t" "$got"
    for _ in 1 2 3 4 5 6; do
        r=$(relay_round "$PN" pgup.orders)
        [ -n "$r" ] || break
        rounds+=("$r")
    done
    got=$(printf '%s | ' "${rounds[@]}")
    check "outbox: the relay's rounds, pending events of $OLD and new ones of $NEW" "k1:2 k2:2 k3:2 | k1:3 k2:3 k3:3 | k1:4 | k1:5" "${got% | }"
}

check_binding() {
    check "tenants: the binding refuses another role (SQLSTATE)" "42501" "$(claim_as "$PN" pgup_tenant_b_api t-3)"
    check "tenants: the bound role claims" "claimed" "$(claim_as "$PN" pgup_tenant_a_api t-2)"
}

# The purge job's command as pg_cron would run it: read from cron.job, run as its user in its
# database; exactly the planted expired rows go.
# The purge job scheduled on the old major, run by pg_cron on the new one: its schedule moved to
# every second (its command, user and database as they came through the upgrade), the first run
# awaited. Exactly the planted expired rows go. The totals: the snapshot's (412 records, 69
# inbox entries, 42 events) and what the checks above added (the tenant's claim t-2; order-9's v1,
# stale, and v4; the events k1:5 and k3:3).
check_purge() {
    local job before run=""
    job=$(q "$PN" shop "SELECT jobid FROM cron.job WHERE jobname = 'idempotency-purge:shop'")
    before=$(purge_counts)
    q "$PN" shop "SELECT cron.alter_job(${job:-0}, schedule => '1 seconds')" >/dev/null || true
    for _ in $(seq 1 60); do
        run=$(q "$PN" shop "SELECT status || ': ' || return_message FROM cron.job_run_details
                            WHERE jobid = ${job:-0} AND status IN ('succeeded', 'failed') ORDER BY runid LIMIT 1")
        [ -z "$run" ] || break
        sleep 1
    done
    q "$PN" shop "SELECT cron.unschedule(${job:-0})" >/dev/null || true
    check "purge job $job ($(q "$PN" shop "SELECT username || ' in ' || database FROM cron.job_run_details
                                          WHERE jobid = ${job:-0} ORDER BY runid LIMIT 1")): pg_cron's first run on $NEW" \
        "succeeded: DO" "$run"
    check "purge job $job: before" "records 300 expired of 413, inbox 40 expired of 71, outbox 30 expired of 44" "$before"
    check "purge job $job: after" "records 0 expired of 113, inbox 0 expired of 31, outbox 0 expired of 14" "$(purge_counts)"
}

purge_counts() {
    q "$PN" shop "SELECT format('records %s expired of %s, inbox %s expired of %s, outbox %s expired of %s',
        (SELECT count(*) FROM idempotency.records WHERE expires_at < now()), (SELECT count(*) FROM idempotency.records),
        (SELECT count(*) FROM idempotency.inbox WHERE expires_at < now()), (SELECT count(*) FROM idempotency.inbox),
        (SELECT count(*) FROM idempotency.outbox WHERE expires_at < now()), (SELECT count(*) FROM idempotency.outbox))"
}

if [ "${1:-}" = inside ]; then
    shift
    inside "$@"
    exit
fi

# ---------------------------------------------------------------------------------------------
# On this machine: the chroots, the old majors' packages, the builds, then each pair inside.
# ---------------------------------------------------------------------------------------------
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
CACHE=${IDEM_PGUP_CACHE:-/var/tmp/idem-pg-upgrade}
CHROOTS=${IDEM_CHROOTS:-/var/tmp/idem-chroots}
PAIRS=${IDEM_PGUP_PAIRS:-15:17 17:18}
PORT=${IDEM_PGUP_PGPORT:-25400}
EXTVERSION=$(sed -n 's/^EXTVERSION = //p' Makefile)
TAG="pg_upgrade"
# in a chroot of the matrix (test/run-all --pg N pg_upgrade): not here, it makes its own
[ -z "${IDEM_IN_CHROOT:-}" ] || { say "SKIPPED: runs on this machine only (it uses the chroots of test/chroot)"; exit 77; }
[ "$(id -u)" = 0 ] || fatal "needs root (chroot, unshare, mount)"

suite_of() {
    case "$1" in
    15) echo bookworm ;; 17) echo trixie ;; 18) echo forky ;;
    *) fatal "unsupported major '$1' (15, 17 or 18)" ;;
    esac
}

# The libraries of the old release that the new one lacks (soname checked inside).
compat_pkgs() {
    case "$1" in
    15:17) echo libicu72 libldap-2.5-0 ;;
    17:18) echo libicu76 libxml2 ;;
    *) fatal "no pair $1 (15:17, 17:18)" ;;
    esac
}

# The chroot of a major: made by test/chroot. While another process makes chroots (test/run-all
# --matrix makes them in the background, one major after the other, while this machine's stages
# run), wait (up to 20 minutes) rather than start anew: test/chroot would remove a half-made one
# and the other process then this one's. Nobody making any for two looks 5 s apart: make it here.
chroot_of() {
    local major=$1 dir i idle=0
    dir=$CHROOTS/$(suite_of "$major")
    for ((i = 0; i < 240 && idle < 2; i++)); do
        [ -f "$dir/.idem-ready" ] && { echo "$dir"; return; }
        if pgrep -f "chroot ensure" >/dev/null; then idle=0; else idle=$((idle + 1)); fi
        [ "$i" != 0 ] || say "waiting for the $(suite_of "$major") chroot (test/chroot ensure)" >&2
        sleep 5
    done
    test/chroot ensure "$major"
}

# in_chroot dir command...: in a mount namespace of its own, with /proc and /dev, a clean
# environment (as test/chroot gives its chroots). Its mounts are made private to it; where that
# cannot be done (this machine is itself a chroot: its / is no mount point, and unshare says
# "cannot change root filesystem propagation"), they keep the propagation they have.
in_chroot() {
    local dir=$1 propagation=private
    shift
    unshare --mount --propagation private true 2>/dev/null || propagation=unchanged
    # shellcheck disable=SC2016 # expanded by the inner bash
    unshare --mount --propagation "$propagation" -- bash -c '
        d=$1; shift
        mount -t proc proc "$d/proc" && mount --rbind /dev "$d/dev" &&
            exec chroot "$d" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
                IDEM_WERROR="$IDEM_WERROR" IDEM_PGUP_KEEP="$IDEM_PGUP_KEEP" IDEM_PGUP_FAULT="$IDEM_PGUP_FAULT" "$@"' \
        in_chroot "$dir" "$@"
}
export IDEM_WERROR=${IDEM_WERROR:-} IDEM_PGUP_KEEP=${IDEM_PGUP_KEEP:-} IDEM_PGUP_FAULT=${IDEM_PGUP_FAULT:-}

# The tree a clone holds (tracked files and new ones git does not ignore), as test/chroot copies it.
copy_tree() { # dest
    rm -rf "$1"
    mkdir -p "$1"
    git ls-files -z --cached --others --exclude-standard | tar -C "$ROOT" --null -T - -cf - | tar -C "$1" -xf -
}

# debs OLD NEW: the old major's server packages and the libraries the new release lacks, from
# the old release's archive (this machine's apt for 15, the trixie chroot's for 17), cached.
debs() {
    local old=$1 dir=$CACHE/debs-$1-$2 pkgs tmp
    [ -f "$dir/.complete" ] && return
    pkgs="postgresql-$old postgresql-client-$old postgresql-$old-cron $(compat_pkgs "$1:$2")"
    say "downloading $pkgs ($(suite_of "$old"))"
    rm -rf "$dir"
    mkdir -p "$dir"
    if [ "$old" = 15 ]; then
        [ "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" = bookworm ] ||
            fatal "15's packages come from this machine's apt: Debian 12 (bookworm) only"
        # (owned by _apt, apt's download user, as in the chroot below)
        # shellcheck disable=SC2086 # the package list: words
        (cd "$dir" && { chown _apt: . 2>/dev/null || true; } && apt-get download $pkgs >"$CACHE/download-$old.log" 2>&1 ||
            { apt-get update -qq && apt-get download $pkgs >>"$CACHE/download-$old.log" 2>&1; }) ||
            { tail -n 20 "$CACHE/download-$old.log"; fatal "apt-get download $pkgs"; }
    else
        local from
        from=$(chroot_of "$old")
        tmp=$from/tmp/idem-pgup-debs
        rm -rf "$tmp"
        mkdir -p "$tmp"
        chroot "$from" chown _apt: /tmp/idem-pgup-debs 2>/dev/null || true
        # shellcheck disable=SC2086 # the package list: words
        in_chroot "$from" bash -c "cd /tmp/idem-pgup-debs && { apt-get download $pkgs ||
            { apt-get update -qq && apt-get download $pkgs; }; }" >"$CACHE/download-$old.log" 2>&1 ||
            { tail -n 20 "$CACHE/download-$old.log"; fatal "apt-get download $pkgs in $from"; }
        mv "$tmp"/*.deb "$dir/"
        rm -rf "$tmp"
    fi
    touch "$dir/.complete"
}

# The extension for 15, built on this machine (its major) in a copy of the tree; installed into
# ext-15/ (DESTDIR), from where it goes into the old prefix.
build_15() {
    local b=$CACHE/build-15 pgc=/usr/lib/postgresql/15/bin/pg_config
    [ -f "$($pgc --includedir-server 2>/dev/null)/postgres.h" ] ||
        fatal "postgresql-server-dev-15 is not installed (test/install-deps)"
    copy_tree "$b"
    rm -rf "$CACHE/ext-15"
    { make -C "$b" -s -j2 PG_CONFIG=$pgc && make -C "$b" -s install DESTDIR="$CACHE/ext-15" PG_CONFIG=$pgc; } \
        >"$CACHE/build-15.log" 2>&1 || { tail -n 30 "$CACHE/build-15.log"; fatal "building the extension for 15"; }
}

# build_in MAJOR: the extension built in the major's chroot (a copy of the tree at
# /tmp/idem-pgup-build, which the stage then runs from), installed there (the new side) and into
# /tmp/idem-pgup-build/ext (DESTDIR: the old side of the next pair)
build_in() {
    local major=$1 dir pgc=/usr/lib/postgresql/$1/bin/pg_config
    dir=$(chroot_of "$major")
    copy_tree "$dir/tmp/idem-pgup-build"
    in_chroot "$dir" bash -c "cd /tmp/idem-pgup-build && make -s -j2 PG_CONFIG=$pgc && make -s install PG_CONFIG=$pgc &&
        make -s install DESTDIR=/tmp/idem-pgup-build/ext PG_CONFIG=$pgc" >"$CACHE/build-$major.log" 2>&1 ||
        { tail -n 30 "$CACHE/build-$major.log"; fatal "building the extension for $major in $dir"; }
}

# old_prefix OLD NEW: /opt/idem-pgup/old-OLD in the new chroot, made anew: the packages, the
# extension built for OLD
old_prefix() {
    local old=$1 new=$2 dir p deb ext
    dir=$(chroot_of "$new")
    p=$dir/opt/idem-pgup/old-$old
    rm -rf "$p"
    mkdir -p "$p"
    for deb in "$CACHE/debs-$old-$new"/*.deb; do dpkg-deb -x "$deb" "$p"; done
    if [ "$old" = 15 ]; then ext=$CACHE/ext-15; else ext=$(chroot_of "$old")/tmp/idem-pgup-build/ext; fi
    [ -f "$ext/usr/lib/postgresql/$old/lib/idempotency.so" ] || fatal "no extension built for $old in $ext"
    cp -a "$ext"/. "$p"/
}

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    # a cluster left running by an interrupted pair (the pair's own trap stops them otherwise)
    local pidfile pid
    for pidfile in "$CHROOTS"/*/tmp/idem-pgup-*/{old,new}/postmaster.pid; do
        [ -f "$pidfile" ] || continue
        pid=$(head -n 1 "$pidfile")
        # only a postmaster of that chroot (a stale file's pid may be anyone's now)
        case $(readlink "/proc/$pid/exe" 2>/dev/null) in
        "${pidfile%%/tmp/idem-pgup-*}"/*/bin/postgres | /opt/idem-pgup/*/bin/postgres | /usr/lib/postgresql/*/bin/postgres)
            [ "$(readlink "/proc/$pid/root")" = "${pidfile%%/tmp/idem-pgup-*}" ] && kill -9 "$pid" 2>/dev/null || true ;;
        esac
    done
}

mkdir -p "$CACHE"
# one run at a time: the runs share the chroots' /tmp/idem-pgup-build and /opt/idem-pgup
exec {lock}>"$CACHE/.lock"
flock "$lock"
trap cleanup EXIT
started=$SECONDS
majors=()
for pair in $PAIRS; do majors+=("${pair%%:*}" "${pair##*:}"); done
mapfile -t majors < <(printf '%s\n' "${majors[@]}" | sort -un)
for pair in $PAIRS; do debs "${pair%%:*}" "${pair##*:}"; done
for major in "${majors[@]}"; do
    t=$SECONDS
    if [ "$major" = 15 ]; then build_15; else build_in "$major"; fi
    say "extension $EXTVERSION built for $major ($((SECONDS - t)) s)"
done
rc=0
n=0
for pair in $PAIRS; do
    old=${pair%%:*} new=${pair##*:}
    mode=copy
    [ $n = 0 ] || mode="link" # the first pair copies, the next links: both modes tested
    t=$SECONDS
    old_prefix "$old" "$new"
    in_chroot "$(chroot_of "$new")" bash /tmp/idem-pgup-build/test/stages/pg_upgrade.sh inside \
        "$old" "$new" "$mode" $((PORT + 2 * n)) "$EXTVERSION" || rc=1
    say "$old -> $new took $((SECONDS - t)) s"
    n=$((n + 1))
done
say "took $((SECONDS - started)) s"
[ $rc = 0 ] || fatal "a pair failed (above)"
say "ok: $PAIRS"
