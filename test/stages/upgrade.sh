#!/usr/bin/env bash
#: stage  upgrade
#: about  a fresh 2.0.0 and the older versions updated have the same catalog (test/upgrade/catalog.sql)
#: needs  server
#: runs   host chroot
#: order  80
# The upgrade stage: a fresh 2.0.0 database and a 0.7, an 0.8, a 1.0.0 and a 1.1.0 database updated to
# 2.0.0 have the same catalog (test/upgrade/catalog.sql: functions with
# every attribute and their source, grants, pg_init_privs, comments, tables, columns,
# constraints, indexes, types, views, sequences, triggers, config-dump registrations, extension
# membership). The 0.7, 0.8 and 1.0.0 databases come from the frozen fixtures test/upgrade/
# idempotency--0.7.sql (0.7's install), test/upgrade/idempotency--0.7--0.8.sql (0.8's update),
# test/upgrade/idempotency--1.0.0.sql and test/upgrade/idempotency--1.1.0.sql (1.0.0's and 1.1.0's installs), copied into the server's extension directory for the time of the stage
# (test/upgrade/scripts). Then it plants a difference (one comment, one default changed in the
# installed 1.1.0 -> 2.0.0 script, the last step of every update) and expects the comparison to see each. Needs the libpq environment of a running cluster
# (test/run-all exports it) and write access to the extension directory; exits non-zero on any
# difference.
set -euo pipefail
cd "$(dirname "$0")/../.."
SHARE=$(pg_config --sharedir)/extension
WORK=$(mktemp -d /tmp/idem-upgrade.XXXXXX)
UPDATE_SCRIPT=$SHARE/idempotency--1.1.0--2.0.0.sql
[ -f "$UPDATE_SCRIPT" ] || { echo "upgrade: $UPDATE_SCRIPT is not installed (make install)"; exit 1; }
cp "$UPDATE_SCRIPT" "$WORK/update.sql"
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    cp "$WORK/update.sql" "$UPDATE_SCRIPT"
    test/upgrade/scripts remove
    rm -rf "$WORK"
}
trap cleanup EXIT
test/upgrade/scripts add --0.8
export PGOPTIONS='-c client_min_messages=warning'
q() { psql -qAtX -v ON_ERROR_STOP=1 "$@"; }

# make_db name create-statement [update]: a new database with the extension, updated when asked
make_db() {
    q -d postgres -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1"
    q -d "$1" -c "$2"
    [ -z "${3:-}" ] || q -d "$1" -c "ALTER EXTENSION idempotency UPDATE"
    q -d "$1" -f test/upgrade/catalog.sql >"$WORK/$1.txt"
}
rc=0
make_db idem_upgrade_fresh "CREATE EXTENSION idempotency"
n=$(grep -c ' | ' "$WORK/idem_upgrade_fresh.txt")
v=$(q -d idem_upgrade_fresh -c "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'")
echo "upgrade: fresh $v: $n catalog facts"
current=$(sed -n 's/^EXTVERSION = //p' Makefile)
[ "$v" = "$current" ] || { echo "upgrade: a fresh CREATE EXTENSION installed $v, not $current"; rc=1; }
for from in 0.7 0.8 1.0.0 1.1.0; do
    db=idem_upgrade_${from//./}
    make_db "$db" "CREATE EXTENSION idempotency VERSION '$from'" update
    if diff -u --label "fresh $current" --label "$from updated to $current" "$WORK/idem_upgrade_fresh.txt" "$WORK/$db.txt"; then
        echo "upgrade: $from updated to $current = fresh $current"
    else
        echo "upgrade: FAILED: $from updated to $current differs from a fresh $current (above)"
        rc=1
    fi
done

# The comparison sees a planted difference: the 0.7 -> 1.0.0 script with one comment and, in a
# second run, one default changed.
plant() { # description sed-expression
    sed -e "$2" "$WORK/update.sql" >"$UPDATE_SCRIPT"
    if cmp -s "$WORK/update.sql" "$UPDATE_SCRIPT"; then
        echo "upgrade: FAILED: the plant '$1' changed nothing in the script"; rc=1; return
    fi
    make_db idem_upgrade_plant "CREATE EXTENSION idempotency VERSION '0.7'" update
    local d
    d=$(diff "$WORK/idem_upgrade_fresh.txt" "$WORK/idem_upgrade_plant.txt" | grep -c '^[<>]' || true)
    if [ "$d" -gt 0 ]; then
        echo "upgrade: planted $1: seen ($d differing lines)"
    else
        echo "upgrade: FAILED: planted $1 was not seen"; rc=1
    fi
    cp "$WORK/update.sql" "$UPDATE_SCRIPT"
}
plant "comment (schema idempotency)" \
    "/^COMMENT ON SCHEMA idempotency IS/{n;s/The idempotency extension:/The idempotency extension (planted):/}"
plant "default (idem_schedule_purge's batch_size)" \
    "/CREATE OR REPLACE FUNCTION idempotency.idem_schedule_purge(/,/RETURNS/s/batch_size integer DEFAULT 1000/batch_size integer DEFAULT 999/"
q -d postgres -c "DROP DATABASE idem_upgrade_plant"
exit $rc
