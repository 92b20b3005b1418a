#!/usr/bin/env bash
#: stage  dump
#: about  pg_dump / pg_restore keep the records
#: needs  server
#: runs   host chroot
#: order  70
# pg_dump / pg_restore of a database using the extension keeps its records and inbox entries,
# and the restored database replays them. Needs the libpq environment of a running cluster
# (test/run-all exports it); exits non-zero on any difference.
set -euo pipefail
SRC=idem_dump_src
DST=idem_dump_dst
DUMP=$(mktemp /tmp/idem-dump.XXXXXX)
trap 'rm -f "$DUMP"' EXIT
export PGOPTIONS='-c client_min_messages=warning'
q() { psql -qAtX -v ON_ERROR_STOP=1 "$@"; }
q -d postgres -c "DROP DATABASE IF EXISTS $SRC" -c "DROP DATABASE IF EXISTS $DST" -c "CREATE DATABASE $SRC" \
    -c "CREATE DATABASE $DST"
q -d $SRC >/dev/null <<'SQL'
CREATE EXTENSION idempotency;
SELECT outcome FROM idempotency.idem_claim('dump/a', 'completed', idempotency.idem_fingerprint('{"amount": 1}'));
SELECT idempotency.idem_complete('dump/a', 'completed', 1, 'pay_1', '{"id": "pay_1"}', 201);
SELECT outcome FROM idempotency.idem_claim('dump/a', 'failed', '\x02');
SELECT idempotency.idem_fail('dump/a', 'failed', 1, false, '{"error": "declined"}', 402);
SELECT outcome FROM idempotency.idem_claim('dump/b', 'processing', '\x03', '1 hour');
SELECT idempotency.idem_inbox_receive('dump-consumer', 'e1', '\x01', true, 'created', '\x7b7d');
SELECT idempotency.idem_inbox_receive('dump-consumer', 'e2', '\x02', false, NULL, NULL, 'order-1', 7);
SELECT idempotency.idem_outbox_emit('dump-topic', '{"n": 1}', 'order-1', 'order:1:paid');
SELECT idempotency.idem_outbox_emit('dump-topic', '{"n": 2}', 'order-1');
SQL
snapshot() { # db: every stored row, in order
    q -d "$1" -c "SELECT r::text FROM idempotency.records r ORDER BY scope, key" \
        -c "SELECT i::text FROM idempotency.inbox i ORDER BY consumer, event_id" \
        -c "SELECT e::text FROM idempotency.inbox_entities e ORDER BY consumer, entity_key" \
        -c "SELECT o::text FROM idempotency.outbox o ORDER BY seq"
}
pg_dump -Fc -d $SRC -f "$DUMP"
pg_restore --exit-on-error -d $DST "$DUMP"
before=$(snapshot $SRC)
after=$(snapshot $DST)
rc=0
if [ "$before" != "$after" ]; then
    echo "dump: restored rows differ"; diff <(echo "$before") <(echo "$after") || true; rc=1
fi
n=$(q -d $DST -c "SELECT (SELECT count(*) FROM idempotency.records) || '/' || (SELECT count(*) FROM idempotency.inbox)")
[ "$n" = "3/2" ] || { echo "dump: expected 3 records / 2 inbox entries, got $n"; rc=1; }
# the restored database behaves as the original: replay, in_progress, duplicate, the owner completes
got=$(q -d $DST <<'SQL'
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';
SELECT outcome || ' ' || resource_id || ' ' || response_status FROM idempotency.idem_claim('dump/a', 'completed', idempotency.idem_fingerprint('{"amount": 1.0}'));
SELECT outcome || ' ' || response_status FROM idempotency.idem_claim('dump/a', 'failed', '\x02');
SELECT outcome || ' ' || attempt FROM idempotency.idem_claim('dump/b', 'processing', '\x03', wait => false);
SELECT idempotency.idem_complete('dump/b', 'processing', 1, 'r3');
SELECT idempotency.idem_inbox_receive('dump-consumer', 'e1', '\x01');
SELECT idempotency.idem_inbox_receive('dump-consumer', 'e2', '\x02', false, NULL, NULL, 'order-1', 7);
SELECT has_function_privilege('public', 'idempotency.idem_claim(text,text,bytea,interval,interval,boolean)', 'EXECUTE');
SELECT idempotency.idem_outbox_emit('dump-topic', '{"n": 1}', 'order-1', 'order:1:paid') = (SELECT event_id FROM idempotency.outbox WHERE seq = 1);
SELECT idempotency.idem_outbox_emit('dump-topic', '{"n": 3}', 'order-1') IS NOT NULL;
SELECT string_agg(payload::text || ' ' || attempt, ', ') FROM idempotency.idem_outbox_next('dump-topic');
SELECT count(*) || ' events, the new one after the restored: ' || (max(seq) > 2) FROM idempotency.outbox;
SQL
)
want='2.0.0
replayed pay_1 201
replayed 402
in_progress 1
t
duplicate
duplicate
f
t
t
{"n": 1} 1
3 events, the new one after the restored: true'
if [ "$got" != "$want" ]; then
    echo "dump: restored database answers differently"; diff <(echo "$want") <(echo "$got") || true; rc=1
fi
q -d postgres -c "DROP DATABASE $SRC" -c "DROP DATABASE $DST"

# Grants survive a dump and restore, also those made under 0.7 before ALTER EXTENSION UPDATE
# (the update recreates idem_schedule_purge: the grants it restores must not be recorded as the
# extension's initial privileges). The 0.7 database comes from the frozen fixture, in the
# extension directory for this part only (test/upgrade/scripts).
"$(dirname "$0")/../upgrade/scripts" add
trap 'rm -f "$DUMP"; "$(dirname "$0")/../upgrade/scripts" remove' EXIT
q -d postgres -c "CREATE DATABASE $SRC" -c "CREATE DATABASE $DST" \
    -c "DROP ROLE IF EXISTS idem_dump_app" -c "CREATE ROLE idem_dump_app NOLOGIN"
q -d $SRC >/dev/null <<'SQL'
CREATE EXTENSION idempotency VERSION '0.7';
GRANT EXECUTE ON FUNCTION public.idem_claim(text, text, bytea, interval, interval, boolean),
    public.idem_schedule_purge(text, name, integer) TO idem_dump_app; -- 0.7 (1.x too): in public
ALTER EXTENSION idempotency UPDATE;
GRANT EXECUTE ON FUNCTION idempotency.idem_fail(text, text, integer, boolean, jsonb, integer, bytea, jsonb) TO idem_dump_app;
SQL
pg_dump -Fc -d $SRC -f "$DUMP"
pg_restore --exit-on-error -d $DST "$DUMP"
grants=$(q -d $DST -c "SELECT string_agg(p.proname || '=' || has_function_privilege('idem_dump_app', p.oid, 'EXECUTE'), ' ' ORDER BY p.proname) FROM pg_proc p WHERE p.proname IN ('idem_claim', 'idem_fail', 'idem_schedule_purge')")
if [ "$grants" != "idem_claim=true idem_fail=true idem_schedule_purge=true" ]; then
    echo "dump: grants lost in an upgraded database's dump: $grants"; rc=1
fi
q -d postgres -c "DROP DATABASE $SRC" -c "DROP DATABASE $DST" -c "DROP ROLE idem_dump_app"
[ $rc = 0 ] && echo "dump: grants made before and after ALTER EXTENSION UPDATE survive pg_dump / pg_restore"
[ $rc = 0 ] && echo "dump: pg_dump -Fc / pg_restore kept 3 records and 2 inbox entries; the copy replays them"
exit $rc
