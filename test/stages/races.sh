#!/usr/bin/env bash
#: stage  races
#: about  pgbench races of new-key claims (direct path, SQL path, extra unique index)
#: needs  server
#: runs   host chroot
#: order  90
# Races of new-key claims under pgbench: 16 clients claim the same fresh key in each 5 ms window,
# so the speculative insertion of idem_claim loses races to concurrent inserts all the time.
# Three table shapes: as installed (the direct path), with a second unique index on (scope, key)
# (an arbiter of the SQL statement too, so the direct path must step aside: it used to let 23505
# escape), and with idempotency.direct_access = off. Every transaction must succeed and every
# key must have exactly one record. Needs the libpq environment of a running cluster.
set -euo pipefail
DB=idem_races
export PGOPTIONS='-c client_min_messages=warning'
q() { psql -qAtX -v ON_ERROR_STOP=1 -d $DB "$@"; }
psql -qAtX -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
q -c "CREATE EXTENSION idempotency"
SCRIPT=$(mktemp /tmp/idem-races.XXXXXX)
trap 'rm -f "$SCRIPT"' EXIT
rc=0
run() { # name, extra PGOPTIONS
    local out
    echo "SELECT outcome FROM idempotency.idem_claim('$1', ((extract(epoch FROM clock_timestamp()) * 200)::bigint)::text);" >"$SCRIPT"
    out=$(PGOPTIONS="$PGOPTIONS $2" pgbench -n -c 16 -j 2 -T 3 -f "$SCRIPT" $DB 2>&1) || true
    local processed failed
    processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
    failed=$(grep -c -E "ERROR|aborted|failed transactions: [1-9]" <<<"$out" || true)
    local keys
    keys=$(q -c "SELECT count(*) || ' keys, ' || count(*) FILTER (WHERE attempt <> 1) || ' not at attempt 1' FROM idempotency.records WHERE scope = '$1'")
    printf '%-24s %8s transactions, %s error lines; %s\n' "$1" "${processed:-0}" "$failed" "$keys"
    if [ -z "$processed" ] || [ "$processed" = 0 ] || [ "$failed" != 0 ]; then
        grep -m3 -E "ERROR|aborted" <<<"$out" || true
        rc=1
    fi
}
run direct ""
run sql_path "-c idempotency.direct_access=off"
q -c "CREATE UNIQUE INDEX records_scope_key_uq ON idempotency.records (scope, key)"
run extra_unique_index ""
q -c "DROP INDEX idempotency.records_scope_key_uq"
psql -qAtX -d postgres -c "DROP DATABASE $DB"
[ $rc = 0 ] && echo "races: every claim answered, one record per key, in all three shapes"
exit $rc
