#!/usr/bin/env bash
#: stage  standby
#: about  what a hot standby serves (docs/operations.md's table), a logical replication cut-over of the outbox
#: needs  install
#: runs   host chroot
#: order  110
# The extension on replicas (docs/operations.md, "High availability"), on clusters of its own
# (pg_config --bindir; shared_preload_libraries as test/pgcluster) on port IDEM_STANDBY_PORT
# (default IDEM_PGPORT + 5) and the next three, under /tmp/idem-standby-PORT. Exits 0 when all
# holds, 1 otherwise (IDEM_STANDBY_KEEP=1 leaves the clusters running, to look at them):
# 1. What a hot standby serves. A primary holds completed, processing and failed records in two
#    scopes, inline and queued inbox deliveries, pending, leased and dead outbox events and a
#    binding; once a streaming standby has replayed them, every routine of the extension (listed
#    from pg_depend, every overload: one without a call here fails the stage) and every view is
#    called on the standby with valid arguments, each answer (ok or the SQLSTATE) compared with
#    the table "What a standby serves" of docs/operations.md (a routine without a line there, a
#    line naming nothing installed, or another answer fails). The same calls on the primary, each
#    in a transaction rolled back, answer ok: the arguments are valid. Then idem_counters on both
#    servers: counters are per server (shared memory), not replicated (the primary's exact, the
#    standby's all 0).
# 2. Logical replication cut-over of the outbox. A publisher and a subscriber, both with the
#    extension; the schema's tables published. Events emitted for keys (some done by a relay,
#    some pending, three leased by a relay that stops) replicate; the cut-over (writes stopped,
#    subscriber caught up, subscription disabled); then on the subscriber, without the cut-over step of the docs, a new
#    emit for a pending key takes a lower seq and idem_outbox_next hands it out before the
#    replicated event (the fault this step exists for: the stage requires it to happen), and with
#    the step (the ```sql block of "Logical replication and cut-over", run as the docs give it)
#    every key's events are handed out in emit order, and every row of every table matches.
set -euo pipefail
trap 'echo "standby: line $LINENO failed (exit $?)"' ERR
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BASE=${IDEM_STANDBY_PORT:-$((${IDEM_PGPORT:-25329} + 5))}
P_PORT=$BASE S_PORT=$((BASE + 1)) PUB_PORT=$((BASE + 2)) SUB_PORT=$((BASE + 3))
WORK=/tmp/idem-standby-$BASE
BIN=$(pg_config --bindir)
DOC=$ROOT/docs/operations.md
export PGUSER=postgres PGDATABASE=postgres PGOPTIONS='-c client_min_messages=warning'
unset PGHOST PGPORT
fails=0

# shellcheck source=test/lib.sh
. test/lib.sh # as_pg
fail() { echo "standby: FAIL: $*"; fails=$((fails + 1)); }
q() { # port [psql args]: unaligned, tuples only, stop on the first error
    local port=$1
    shift
    psql -qAtX -v ON_ERROR_STOP=1 -h "$WORK" -p "$port" "$@"
}

# --- Clusters ----------------------------------------------------------------------------------
conf() { # dir port
    cat >>"$1/postgresql.conf" <<CONF
port = $2
listen_addresses = ''
unix_socket_directories = '$WORK'
shared_preload_libraries = '${IDEM_PRELOAD:-pg_cron,idempotency}'
cron.database_name = 'postgres'
wal_level = logical
max_wal_senders = 10
max_replication_slots = 10
hot_standby = on
wal_retrieve_retry_interval = '200ms'
max_logical_replication_workers = 8
max_sync_workers_per_subscription = 6
fsync = off
full_page_writes = off
log_min_messages = warning
log_line_prefix = '%m [%p] '
CONF
}
start() { # dir
    as_pg "$BIN/pg_ctl" -D "$1" -l "$1.log" -w -t 60 start >/dev/null || { tail -n 30 "$1.log"; exit 1; }
}
new_cluster() { # name port
    as_pg "$BIN/initdb" -D "$WORK/$1" -U postgres --auth=trust --no-sync -E UTF8 --locale=C >"$WORK/$1.initdb.log" 2>&1 ||
        { cat "$WORK/$1.initdb.log"; exit 1; }
    conf "$WORK/$1" "$2"
    start "$WORK/$1"
}
stop_all() {
    local d
    for d in "$WORK"/*/PG_VERSION; do
        as_pg "$BIN/pg_ctl" -D "$(dirname "$d")" -m immediate -w stop >/dev/null 2>&1 || true
    done
    rm -rf "$WORK"
}
stop_all
mkdir -p "$WORK"
chown postgres: "$WORK" 2>/dev/null || true
[ -n "${IDEM_STANDBY_KEEP:-}" ] || trap stop_all EXIT # IDEM_STANDBY_KEEP=1: leave the clusters up
started=$(date +%s)

# --- The docs: the table of "What a standby serves", the block of "Logical replication ..." -----
# section TITLE: the lines of the ### section TITLE of docs/operations.md
section() { awk -v t="### $1" '$0 == t { on = 1; next } on && /^#{1,3} / { on = 0 } on' "$DOC"; }
# name -> expected answer ("ok" or a SQLSTATE), from the table's rows "| `name` | answer | ... |"
declare -A expect=()
while IFS='|' read -r _ names answer _; do
    answer=$(tr -d '` ' <<<"$answer")
    for name in $(grep -o 'idem_[a-z0-9_]*' <<<"$names" || true); do
        [ -z "${expect[$name]:-}" ] || fail "docs: $name has two lines in \"What a standby serves\""
        expect[$name]=$answer
    done
done < <(section "What a standby serves" | grep '^| `')
[ ${#expect[@]} -gt 0 ] || { echo "standby: no table in $DOC, \"### What a standby serves\""; exit 1; }
cutover_sql=$(section "Logical replication and cut-over" | awk '/^```sql$/ && !n { on = 1; n = 1; next } on && /^```/ { on = 0 } on')
[ -n "$cutover_sql" ] || { echo "standby: no \`\`\`sql block in $DOC, \"### Logical replication and cut-over\""; exit 1; }

# =================================================================================================
# 1. What a hot standby serves
new_cluster primary "$P_PORT"
q "$P_PORT" >/dev/null <<'SQL'
CREATE EXTENSION pg_cron;
CREATE EXTENSION idempotency;
CREATE ROLE standby_tenant NOLOGIN;
SELECT idempotency.idem_bind('topic', 'tenant:', 'standby_tenant');
SELECT idempotency.idem_schedule_purge() > 0;
-- records: completed, processing and failed, in two scopes
SELECT outcome FROM idempotency.idem_claim('shop:a/pay', 'done', '\x01');
SELECT idempotency.idem_complete('shop:a/pay', 'done', 1, 'pay_1', '{"id": "pay_1"}', 201);
SELECT outcome FROM idempotency.idem_claim('shop:a/pay', 'busy', '\x02', '1 hour');
SELECT outcome FROM idempotency.idem_claim('shop:a/pay', 'failed', '\x03');
SELECT idempotency.idem_fail('shop:a/pay', 'failed', 1, false, '{"error": "declined"}', 402);
SELECT outcome FROM idempotency.idem_claim('shop:b/refund', 'done', '\x04');
SELECT idempotency.idem_complete('shop:b/refund', 'done', 1, response_body => 'ok', response_status => 200);
SELECT outcome FROM idempotency.idem_claim('shop:b/refund', 'busy', '\x05', '1 hour');
SELECT outcome FROM idempotency.idem_claim('shop:b/refund', 'failed', '\x06');
SELECT idempotency.idem_fail('shop:b/refund', 'failed', 1, true);
SELECT outcome FROM idempotency.idem_claim('shop:a/pay', 'done', '\x01'); -- a replay, counted
-- inbox: an inline delivery, a leased and a queued one
SELECT idempotency.idem_inbox_receive('crm', 'evt-inline', '\x01', entity_key => 'order-1', entity_seq => 3);
SELECT idempotency.idem_inbox_receive('crm', 'evt-leased', '\x02', true, 'created', '\x7b7d');
SELECT count(*) FROM idempotency.idem_inbox_next('crm', 1, '1 hour');
SELECT idempotency.idem_inbox_receive('crm', 'evt-queued', '\x03', true, 'created', '\x7b7d');
-- outbox: a leased, a pending and a dead event; the ids in a table of the test's own
CREATE TABLE standby_ids (name text PRIMARY KEY, id uuid);
INSERT INTO standby_ids VALUES ('leased', idempotency.idem_outbox_emit('orders', '{"n": 1}', 'order-1', 'order:1:paid'));
SELECT count(*) FROM idempotency.idem_outbox_next('orders', 1, '1 hour');
INSERT INTO standby_ids VALUES ('pending', idempotency.idem_outbox_emit('orders', '{"n": 2}', 'order-2'));
INSERT INTO standby_ids VALUES ('dead', idempotency.idem_outbox_emit('mail', '{"n": 3}', 'user-1'));
SELECT idempotency.idem_outbox_fail(event_id, attempt, false, 'bounced') FROM idempotency.idem_outbox_next('mail', 1);
SQL
as_pg "$BIN/pg_basebackup" -h "$WORK" -p "$P_PORT" -U postgres -D "$WORK/standby" -R -X stream -c fast ||
    { echo "standby: pg_basebackup failed"; exit 1; }
conf "$WORK/standby" "$S_PORT"
start "$WORK/standby"
# the standby has replayed everything the primary wrote
lsn=$(q "$P_PORT" -c "SELECT pg_current_wal_lsn()")
for _ in $(seq 100); do
    [ "$(q "$S_PORT" -c "SELECT pg_last_wal_replay_lsn() >= '$lsn'")" = t ] && break
    sleep 0.1
done
[ "$(q "$S_PORT" -c "SELECT pg_is_in_recovery() AND pg_last_wal_replay_lsn() >= '$lsn'")" = t ] ||
    { echo "standby: the standby did not replay up to $lsn"; exit 1; }

# Counters: per server, in shared memory. The primary's count what it served, the standby's
# start at zero (its own calls only; the refused claims above count nothing).
counters="SELECT string_agg(counter || '=' || value, ' ' ORDER BY counter) FROM idempotency.idem_counters() WHERE value > 0"
c_primary=$(q "$P_PORT" -c "$counters")
c_standby=$(q "$S_PORT" -c "$counters")
echo "standby: idem_counters on the primary: $c_primary"
echo "standby: idem_counters on the standby: ${c_standby:-(all 0)}"
[ "$c_primary" = "claimed=6 fenced=0 replayed=1" ] || true

# The calls: routine (as regprocedure prints it, or "view NAME") TAB SQL. Several calls of one
# routine name the cases that matter (a replay and a new key, a duplicate and a new delivery).
SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
STRIPE=whsec_test_secret_0123456789abcdefghij
STD_SIG="idempotency.idem_webhook_sign_standard('$SECRET', 'msg_1', '1614265330', '{}')"
STRIPE_SIG="idempotency.idem_webhook_sign_stripe('$STRIPE', 1614265330, '{}')"
AT="now => to_timestamp(1614265330)"
calls=$(cat <<SQL
idempotency.idem_canonical_json(jsonb,boolean)	SELECT idempotency.idem_canonical_json('{"b": 1, "a": 2}'::jsonb)
idempotency.idem_canonical_json(text,boolean)	SELECT idempotency.idem_canonical_json('{"b": 1, "a": 2}'::text)
idempotency.idem_fingerprint(jsonb,text[],text[],boolean)	SELECT idempotency.idem_fingerprint('{"a": 1}'::jsonb)
idempotency.idem_fingerprint(text,text[],text[],boolean)	SELECT idempotency.idem_fingerprint('{"a": 1}'::text)
idempotency.idem_fingerprint(bytea,text[],text[],boolean)	SELECT idempotency.idem_fingerprint('{"a": 1}'::bytea)
idempotency.idem_key_from_header(text)	SELECT idempotency.idem_key_from_header('"order-1"')
idempotency.idem_uuid_v7()	SELECT idempotency.idem_uuid_v7()
idempotency.idem_uuid_v7_time(uuid)	SELECT idempotency.idem_uuid_v7_time(id) FROM standby_ids
idempotency.idem_hmac_sha256(bytea,bytea)	SELECT idempotency.idem_hmac_sha256('key', 'message')
idempotency.idem_secure_equal(bytea,bytea)	SELECT idempotency.idem_secure_equal('a', 'a')
idempotency.idem_webhook_sign_standard(text,text,text,text)	SELECT $STD_SIG
idempotency.idem_webhook_sign_standard(text,text,text,bytea)	SELECT idempotency.idem_webhook_sign_standard('$SECRET', 'msg_1', '1614265330', '{}'::bytea)
idempotency.idem_webhook_sign_stripe(text,bigint,text)	SELECT $STRIPE_SIG
idempotency.idem_webhook_sign_stripe(text,bigint,bytea)	SELECT idempotency.idem_webhook_sign_stripe('$STRIPE', 1614265330, '{}'::bytea)
idempotency.idem_webhook_verify_standard(text,text,text,text,text,interval,timestamp with time zone)	SELECT idempotency.idem_webhook_verify_standard('$SECRET', 'msg_1', '1614265330', '{}'::text, $STD_SIG, $AT)
idempotency.idem_webhook_verify_standard(text,text,text,bytea,text,interval,timestamp with time zone)	SELECT idempotency.idem_webhook_verify_standard('$SECRET', 'msg_1', '1614265330', '{}'::bytea, $STD_SIG, $AT)
idempotency.idem_webhook_verify_standard(text[],text,text,text,text,interval,timestamp with time zone)	SELECT idempotency.idem_webhook_verify_standard(ARRAY['$SECRET'], 'msg_1', '1614265330', '{}'::text, $STD_SIG, $AT)
idempotency.idem_webhook_verify_standard(text[],text,text,bytea,text,interval,timestamp with time zone)	SELECT idempotency.idem_webhook_verify_standard(ARRAY['$SECRET'], 'msg_1', '1614265330', '{}'::bytea, $STD_SIG, $AT)
idempotency.idem_webhook_verify_stripe(text,text,text,interval,timestamp with time zone)	SELECT idempotency.idem_webhook_verify_stripe('$STRIPE', $STRIPE_SIG, '{}'::text, $AT)
idempotency.idem_webhook_verify_stripe(text,text,bytea,interval,timestamp with time zone)	SELECT idempotency.idem_webhook_verify_stripe('$STRIPE', $STRIPE_SIG, '{}'::bytea, $AT)
idempotency.idem_webhook_verify_stripe(text[],text,text,interval,timestamp with time zone)	SELECT idempotency.idem_webhook_verify_stripe(ARRAY['$STRIPE'], $STRIPE_SIG, '{}'::text, $AT)
idempotency.idem_webhook_verify_stripe(text[],text,bytea,interval,timestamp with time zone)	SELECT idempotency.idem_webhook_verify_stripe(ARRAY['$STRIPE'], $STRIPE_SIG, '{}'::bytea, $AT)
idempotency.idem_webhook_receive(text,text,text[],text,text,text,text,text,boolean,text,bigint,interval,interval,timestamp with time zone)	SELECT idempotency.idem_webhook_receive('hooks', 'standard', ARRAY['$SECRET'], 'msg_1', '{}'::text, $STD_SIG, '1614265330', $AT)
idempotency.idem_webhook_receive(text,text,text[],text,bytea,text,text,text,boolean,text,bigint,interval,interval,timestamp with time zone)	SELECT idempotency.idem_webhook_receive('hooks', 'standard', ARRAY['$SECRET'], 'msg_1', '{}'::bytea, $STD_SIG, '1614265330', $AT)
idempotency.idem_lookup(text,text)	SELECT status FROM idempotency.idem_lookup('shop:a/pay', 'done')
idempotency.idem_lookup(text,text)	SELECT status FROM idempotency.idem_lookup('shop:b/refund', 'busy')
idempotency.idem_http_answer(text,text)	SELECT status FROM idempotency.idem_http_answer('shop:a/pay', 'done')
idempotency.idem_http_answer(idempotency.idem_claim_result)	SELECT status FROM idempotency.idem_http_answer(ROW('in_progress', 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::idempotency.idem_claim_result)
idempotency.idem_http_begin(text,text,text,bytea,interval,interval,boolean)	SELECT run FROM idempotency.idem_http_begin('shop:a', 'POST /pay', 'k-9', '{}'::bytea)
idempotency.idem_http_end(text,text,integer,integer,jsonb,bytea,text,text[])	SELECT idempotency.idem_http_end('shop:a/pay', 'busy', 1, 201)
idempotency.idem_http_release(text,text,integer)	SELECT idempotency.idem_http_release('shop:a/pay', 'busy', 1)
idempotency.idem_http_errors()	SELECT count(*) FROM idempotency.idem_http_errors()
idempotency.idem_http_stored(integer)	SELECT idempotency.idem_http_stored(201)
idempotency.idem_http_scope(text,text,boolean)	SELECT idempotency.idem_http_scope('user:1', 'POST /pay')
idempotency.idem_http_problem(integer,text,integer)	SELECT status FROM idempotency.idem_http_problem(400, 'no')
idempotency.idem_claim(text,text,bytea,interval,interval,boolean)	SELECT outcome FROM idempotency.idem_claim('shop:a/pay', 'done', '\x01')
idempotency.idem_claim(text,text,bytea,interval,interval,boolean)	SELECT outcome FROM idempotency.idem_claim('shop:a/pay', 'busy', '\x02', wait => false)
idempotency.idem_claim(text,text,bytea,interval,interval,boolean)	SELECT outcome FROM idempotency.idem_claim('shop:a/pay', 'new', '\x07')
idempotency.idem_claim_support(internal)	EXPLAIN (COSTS OFF) SELECT outcome FROM idempotency.idem_claim('shop:a/pay', 'done', '\x01')
idempotency.idem_complete(text,text,integer,text,jsonb,integer,bytea,jsonb)	SELECT idempotency.idem_complete('shop:a/pay', 'busy', 1, 'pay_2', '{"id": "pay_2"}', 201)
idempotency.idem_fail(text,text,integer,boolean,jsonb,integer,bytea,jsonb)	SELECT idempotency.idem_fail('shop:a/pay', 'busy', 1, true)
idempotency.idem_heartbeat(text,text,integer,interval)	SELECT idempotency.idem_heartbeat('shop:a/pay', 'busy', 1)
idempotency.idem_stuck(interval)	SELECT count(*) FROM idempotency.idem_stuck()
idempotency.idem_inbox_receive(text,text,bytea,boolean,text,bytea,text,bigint,interval)	SELECT idempotency.idem_inbox_receive('crm', 'evt-inline', '\x01')
idempotency.idem_inbox_receive(text,text,bytea,boolean,text,bytea,text,bigint,interval)	SELECT idempotency.idem_inbox_receive('crm', 'evt-new', '\x04')
idempotency.idem_inbox_next(text,integer,interval)	SELECT count(*) FROM idempotency.idem_inbox_next('crm')
idempotency.idem_inbox_done(text,text,integer)	SELECT idempotency.idem_inbox_done('crm', 'evt-leased', 1)
idempotency.idem_inbox_done_batch(text,text[],integer[])	SELECT idempotency.idem_inbox_done_batch('crm', ARRAY['evt-leased'], ARRAY[1])
idempotency.idem_inbox_fail(text,text,integer,boolean,text,integer)	SELECT idempotency.idem_inbox_fail('crm', 'evt-leased', 1, true, 'timeout')
idempotency.idem_outbox_emit(text,jsonb,text,text,jsonb,interval)	SELECT idempotency.idem_outbox_emit('orders', '{"n": 4}'::jsonb, 'order-2')
idempotency.idem_outbox_emit(text,bytea,text,text,jsonb,interval)	SELECT idempotency.idem_outbox_emit('orders', '\x7b7d'::bytea, 'order-2')
idempotency.idem_outbox_emit(text,text,text,text,jsonb,interval)	SELECT idempotency.idem_outbox_emit('orders', '{}'::text, 'order-2')
idempotency.idem_outbox_next(text,integer,interval)	SELECT count(*) FROM idempotency.idem_outbox_next('orders')
idempotency.idem_outbox_done(uuid,integer,text)	SELECT idempotency.idem_outbox_done(id, 1) FROM standby_ids WHERE name = 'leased'
idempotency.idem_outbox_done_batch(uuid[],integer[],text)	SELECT idempotency.idem_outbox_done_batch(ARRAY[id], ARRAY[1]) FROM standby_ids WHERE name = 'leased'
idempotency.idem_outbox_fail(uuid,integer,boolean,text,text)	SELECT idempotency.idem_outbox_fail(id, 1, true, 'timeout') FROM standby_ids WHERE name = 'leased'
idempotency.idem_outbox_fail_batch(uuid[],integer[],boolean,text,text)	SELECT idempotency.idem_outbox_fail_batch(ARRAY[id], ARRAY[1], true, 'timeout') FROM standby_ids WHERE name = 'leased'
idempotency.idem_outbox_requeue(uuid,text)	SELECT idempotency.idem_outbox_requeue(id) FROM standby_ids WHERE name = 'dead'
idempotency.idem_purge(integer,integer,boolean,interval)	SELECT idempotency.idem_purge()
idempotency.idem_purge_batch(text,integer,tid,boolean,interval)	SELECT deleted FROM idempotency.idem_purge_batch('records', 100)
idempotency.idem_purge_loop(integer,interval,boolean,interval,interval,bigint)	CALL idempotency.idem_purge_loop(max_duration => '1 s')
idempotency.idem_require_pg_cron(text)	SELECT idempotency.idem_require_pg_cron()
idempotency.idem_schedule_purge(text,name,integer,name)	SELECT idempotency.idem_schedule_purge()
idempotency.idem_unschedule_purge(name)	SELECT idempotency.idem_unschedule_purge()
idempotency.idem_counters()	SELECT count(*) FROM idempotency.idem_counters()
idempotency.idem_counters_enabled()	SELECT idempotency.idem_counters_enabled()
idempotency.idem_stats_reset()	SELECT idempotency.idem_stats_reset()
idempotency.idem_bind(text,text,regrole)	SELECT idempotency.idem_bind('scope', 'tenant:', 'standby_tenant')
idempotency.idem_unbind(text,text)	SELECT idempotency.idem_unbind('topic', 'tenant:')
idempotency.idem_bindings_changed()	SELECT idempotency.idem_bindings_changed()
idempotency.idem_distribute()	SELECT count(*) FROM idempotency.idem_distribute()
idempotency.idem_purge_shards(integer,interval,boolean,interval,bigint)	CALL idempotency.idem_purge_shards()
view idem_stats	SELECT count(*) FROM idempotency.idem_stats
view idem_inbox_stats	SELECT count(*) FROM idempotency.idem_inbox_stats
view idem_outbox_stats	SELECT count(*) FROM idempotency.idem_outbox_stats
view idem_bindings	SELECT count(*) FROM idempotency.idem_bindings
SQL
)
# answers port [in_tx] < calls: for each call, "ok" or the SQLSTATE of its error, one line each, in
# one session (in_tx: each call inside BEGIN ... ROLLBACK, but CALL, which may commit)
answers() {
    local routine sql
    while IFS=$'\t' read -r routine sql; do
        printf '\\warn @@\n'
        if [ "${2:-}" = in_tx ] && [[ $sql != CALL* ]]; then
            printf 'BEGIN;\n%s;\nROLLBACK;\n' "$sql"
        else
            printf '%s;\n' "$sql"
        fi
    done | psql -qAtX -v VERBOSITY=sqlstate -h "$WORK" -p "$1" 2>&1 >/dev/null | awk '
        /@@$/ { if (n++) print (e == "" ? "ok" : e); e = ""; next }
        /ERROR:  [0-9A-Z][0-9A-Z][0-9A-Z][0-9A-Z][0-9A-Z]$/ { if (e == "") e = $NF; next }
        { print "unexpected: " $0 > "/dev/stderr" }
        END { if (n) print (e == "" ? "ok" : e) }'
}

# every routine and view of the extension, from the catalogue
installed=$(q "$P_PORT" <<'SQL'
SELECT p.oid::regprocedure::text FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
  JOIN pg_proc p ON p.oid = d.objid
 WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e' AND e.extname = 'idempotency'
UNION ALL
SELECT 'view ' || c.relname FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
  JOIN pg_class c ON c.oid = d.objid
 WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e' AND e.extname = 'idempotency'
   AND c.relkind = 'v'
ORDER BY 1
SQL
)
declare -A called=()
# Citus's routines answer on a primary without Citus as they do on the standby (docs/citus.md);
# the trigger function is called by the trigger only.
declare -A primary_answer=([idem_distribute]=0A000 [idem_purge_shards]=0A000 [idem_bindings_changed]=39P01)
n_calls=0 n_ok=0 n_refused=0
printf '%-44s %-9s %-9s %s\n' "routine or view" standby primary "the call" >"$WORK/calls.txt"
on_standby=$(answers "$S_PORT" <<<"$calls")
on_primary=$(answers "$P_PORT" in_tx <<<"$calls")
[ "$(wc -l <<<"$on_standby") $(wc -l <<<"$on_primary")" = "$(wc -l <<<"$calls") $(wc -l <<<"$calls")" ] ||
    { echo "standby: the answers do not match the calls one for one"; exit 1; }
while IFS=$'\t' read -r routine sql got on_primary; do
    called[$routine]=1
    if ! grep -qxF -- "$routine" <<<"$installed"; then
        fail "a call of $routine, which is not installed"; continue
    fi
    name=${routine#view }
    name=${name%%(*}
    name=${name#idempotency.}
    n_calls=$((n_calls + 1))
    [ "$got" = ok ] && n_ok=$((n_ok + 1)) || n_refused=$((n_refused + 1))
    printf '%-44s %-9s %-9s %s\n' "$name" "$got" "$on_primary" "${sql:0:90}" >>"$WORK/calls.txt"
    want=${expect[$name]:-}
    if [ -z "$want" ]; then
        fail "$routine has no line in docs/operations.md, \"What a standby serves\" (on the standby: $got)"
    elif [ "$got" != "$want" ]; then
        fail "on the standby, $sql: $got; docs/operations.md says $want"
    fi
    [ "$on_primary" = "${primary_answer[$name]:-ok}" ] ||
        fail "on the primary, $sql: $on_primary, not ${primary_answer[$name]:-ok} (the arguments are wrong)"
done < <(paste <(printf '%s\n' "$calls") <(printf '%s\n' "$on_standby") <(printf '%s\n' "$on_primary"))
while read -r routine; do
    [ -n "${called[$routine]:-}" ] || fail "$routine is installed and test/stages/standby.sh does not call it"
done <<<"$installed"
for name in "${!expect[@]}"; do
    grep -qE "^(view |idempotency\.)?$name(\(|$)" <<<"$installed" ||
        fail "docs/operations.md, \"What a standby serves\", names $name: nothing installed has that name"
done
cat "$WORK/calls.txt"
echo "standby: $n_calls calls of $(grep -c . <<<"$installed") routines and views on the standby: $n_ok ok, $n_refused refused"

[ "$c_primary" = "claimed=6 outbox_dead=1 outbox_emitted=3 replayed=1" ] ||
    fail "idem_counters on the primary: $c_primary (want claimed=6 outbox_dead=1 outbox_emitted=3 replayed=1)"
[ -z "$c_standby" ] || fail "idem_counters on the standby: $c_standby (want every counter 0)"

as_pg "$BIN/pg_ctl" -D "$WORK/standby" -m immediate -w stop >/dev/null
part1=$(($(date +%s) - started))
# =================================================================================================
# 2. Logical replication: the cut-over of the outbox
new_cluster publisher "$PUB_PORT"
new_cluster subscriber "$SUB_PORT"
for port in "$PUB_PORT" "$SUB_PORT"; do
    q "$port" -c "CREATE ROLE standby_tenant NOLOGIN" -c "CREATE EXTENSION idempotency" >/dev/null
done
# relay(topic, n): hands out up to n events and marks them done, as a relay does
relay_fn="CREATE FUNCTION relay(topic text, n int) RETURNS int LANGUAGE sql AS
\$\$ SELECT count(idempotency.idem_outbox_done(event_id, attempt))::int FROM idempotency.idem_outbox_next(topic, n, '1 min') \$\$"
# drain(topic): every event a relay gets, in the order it gets them, each marked done at once
drain_fn=$(cat <<'SQL'
CREATE FUNCTION drain(topic text) RETURNS TABLE (ord int, key text, n int) LANGUAGE plpgsql AS $$
DECLARE
    r record;
    got int;
BEGIN
    ord := 0;
    LOOP
        got := 0;
        FOR r IN SELECT * FROM idempotency.idem_outbox_next(topic, 10, '1 min') LOOP
            ord := ord + 1; key := r.key; n := (r.payload ->> 'n')::int;
            RETURN NEXT;
            PERFORM idempotency.idem_outbox_done(r.event_id, r.attempt);
            got := got + 1;
        END LOOP;
        EXIT WHEN got = 0;
    END LOOP;
END $$;
SQL
)
q "$PUB_PORT" -c "$relay_fn" >/dev/null
q "$SUB_PORT" -c "$drain_fn" >/dev/null
# the payload's n numbers the events in emit order, on the publisher 1..9, on the subscriber 100..
q "$PUB_PORT" >/dev/null <<'SQL'
CREATE PUBLICATION idem FOR TABLE idempotency.records, idempotency.inbox, idempotency.inbox_entities,
    idempotency.outbox, idempotency.bindings;
SELECT idempotency.idem_bind('topic', 'tenant:', 'standby_tenant');
SELECT outcome FROM idempotency.idem_claim('shop:a/pay', 'done', '\x01');
SELECT idempotency.idem_complete('shop:a/pay', 'done', 1, 'pay_1', '{"id": "pay_1"}', 201);
SELECT outcome FROM idempotency.idem_claim('shop:a/pay', 'busy', '\x02', '1 hour');
SELECT idempotency.idem_inbox_receive('crm', 'evt-1', '\x01', entity_key => 'order-1', entity_seq => 3);
SELECT idempotency.idem_inbox_receive('crm', 'evt-2', '\x02', true, 'created', '\x7b7d');
-- k1: two events, both done by the relay; k2: one done, one pending
SELECT idempotency.idem_outbox_emit('orders', '{"n": 1}', 'k1');
SELECT idempotency.idem_outbox_emit('orders', '{"n": 2}', 'k2');
SELECT idempotency.idem_outbox_emit('orders', '{"n": 3}', 'k1');
SELECT relay('orders', 10);
SELECT relay('orders', 10);
SELECT idempotency.idem_outbox_emit('orders', '{"n": 4}', 'k2');
SQL
q "$SUB_PORT" -c "CREATE SUBSCRIPTION idem CONNECTION 'host=$WORK port=$PUB_PORT dbname=postgres user=postgres' PUBLICATION idem" >/dev/null
for _ in $(seq 300); do
    [ "$(q "$SUB_PORT" -c "SELECT count(*) FROM pg_subscription_rel WHERE srsubstate <> 'r'")" = 0 ] && break
    sleep 0.1
done
[ "$(q "$SUB_PORT" -c "SELECT count(*) || ' ' || count(*) FILTER (WHERE srsubstate = 'r') FROM pg_subscription_rel")" = "5 5" ] ||
    { echo "standby: the subscription's tables are not all copied"; exit 1; }
# after the initial copy, streamed: more events; a relay leases the heads of k2, k3 and k4 (1 s) and stops
q "$PUB_PORT" >/dev/null <<'SQL'
SELECT idempotency.idem_outbox_emit('orders', '{"n": 5}', 'k3');
SELECT idempotency.idem_outbox_emit('orders', '{"n": 6}', 'k4');
SELECT idempotency.idem_outbox_emit('orders', '{"n": 7}', 'k2');
SELECT count(*) FROM idempotency.idem_outbox_next('orders', 10, '1 s');
SELECT idempotency.idem_inbox_receive('crm', 'evt-3', '\x03');
SELECT outcome FROM idempotency.idem_claim('shop:b/refund', 'done', '\x04');
SELECT idempotency.idem_complete('shop:b/refund', 'done', 1, response_status => 200);
SQL
# The cut-over: writes stop on the publisher, the subscriber confirms everything, then the
# subscription is disabled.
lsn=$(q "$PUB_PORT" -c "SELECT pg_current_wal_lsn()")
confirmed="SELECT confirmed_flush_lsn >= '$lsn' FROM pg_replication_slots WHERE slot_name = 'idem'"
for _ in $(seq 300); do
    [ "$(q "$PUB_PORT" -c "$confirmed")" = t ] && break
    sleep 0.1
done
[ "$(q "$PUB_PORT" -c "$confirmed")" = t ] || { echo "standby: the subscriber did not confirm $lsn in 30 s"; exit 1; }
q "$SUB_PORT" -c "ALTER SUBSCRIPTION idem DISABLE" >/dev/null
snapshot() { # port: every row of every table of the schema, in order (one session)
    local t
    for t in $tables; do
        printf "SELECT '-- %s';\nSELECT t::text FROM idempotency.%s t ORDER BY 1;\n" "$t" "$t"
    done | q "$1"
}
published=$(q "$PUB_PORT" -c "SELECT string_agg(tablename, ' ' ORDER BY tablename) FROM pg_publication_tables WHERE pubname = 'idem'")
# every table of the schema but the per-key lock's secret, which each installation draws itself
tables=$(q "$PUB_PORT" -c "SELECT string_agg(tablename, ' ' ORDER BY tablename) FROM pg_tables WHERE schemaname = 'idempotency' AND tablename <> 'outbox_key_lock'")
[ "$published" = "$tables" ] || fail "published: $published; the schema's tables but outbox_key_lock: $tables"
[ "$(q "$PUB_PORT" -c "SELECT secret FROM idempotency.outbox_key_lock")" != "$(q "$SUB_PORT" -c "SELECT secret FROM idempotency.outbox_key_lock")" ] ||
    fail "the publisher and the subscriber hold the same outbox_key_lock secret"
sequences=$(q "$PUB_PORT" -c "SELECT string_agg(sequencename, ' ') FROM pg_sequences WHERE schemaname = 'idempotency'")
[ "$sequences" = outbox_seq ] || fail "the schema's sequences are \"$sequences\": the cut-over step of docs/operations.md names outbox_seq only"
snap_pub=$(snapshot "$PUB_PORT")
snap_sub=$(snapshot "$SUB_PORT")
if [ "$snap_pub" = "$snap_sub" ]; then
    echo "standby: cut-over: the subscriber holds every row of the publisher: $(grep -vc '^--' <<<"$snap_sub") rows in $published"
else
    fail "cut-over: the subscriber's rows differ from the publisher's"; diff <(echo "$snap_pub") <(echo "$snap_sub") | head -n 20
fi
q "$SUB_PORT" -c "SELECT pg_sleep(1.2)" >/dev/null # k4's lease (1 s), taken on the publisher, runs out
# per-key order of what a relay gets: the keys whose events are handed out against emit order
order_check="SELECT coalesce(string_agg(DISTINCT key, ' '), 'none') FROM (
    SELECT key, n < max(n) OVER (PARTITION BY key ORDER BY ord ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS late
      FROM drained) d WHERE late"
seq_of() { q "$SUB_PORT" -c "SELECT string_agg(key || ':' || seq, ' ' ORDER BY seq) FROM idempotency.outbox WHERE (payload ->> 'n')::int $1"; }
replicated_seqs=$(seq_of "< 100")
# Without the step (rolled back): a new event of k2 gets a lower seq than k2's pending events,
# and a relay gets it before them. The stage requires this: it shows the check below can fail.
without=$(q "$SUB_PORT" <<SQL
BEGIN;
SELECT idempotency.idem_outbox_emit('orders', '{"n": 100}', 'k2') \g /dev/null
CREATE TEMP TABLE drained AS SELECT * FROM drain('orders');
SELECT string_agg(key || ':' || n, ' ' ORDER BY ord) FROM drained;
$order_check;
ROLLBACK;
SQL
)
echo "standby: cut-over WITHOUT the step: relay order $(sed -n 1p <<<"$without"); keys out of order: $(sed -n 2p <<<"$without")"
[ "$(sed -n 2p <<<"$without")" = k2 ] ||
    fail "without the cut-over step, k2's new event should be handed out before its replicated ones (got: $without)"
# With the step, as docs/operations.md gives it
step_out=$(q "$SUB_PORT" <<<"$cutover_sql") || fail "the cut-over step of docs/operations.md failed on the subscriber"
with=$(q "$SUB_PORT" <<SQL
SELECT idempotency.idem_outbox_emit('orders', '{"n": 101}', 'k2') \g /dev/null
SELECT idempotency.idem_outbox_emit('orders', '{"n": 102}', 'k1') \g /dev/null
SELECT idempotency.idem_outbox_emit('orders', '{"n": 103}', 'k5') \g /dev/null
SELECT idempotency.idem_outbox_emit('orders', '{"n": 104}', 'k2') \g /dev/null
CREATE TABLE drained AS SELECT * FROM drain('orders');
SELECT string_agg(key || ':' || n, ' ' ORDER BY ord) FROM drained;
$order_check;
SELECT count(*) FROM idempotency.outbox WHERE status <> 'done';
SELECT outcome FROM idempotency.idem_claim('shop:a/pay', 'done', '\x01');
SELECT idempotency.idem_inbox_receive('crm', 'evt-3', '\x03');
SQL
)
new_seqs=$(seq_of ">= 100")
echo "standby: cut-over: replicated seqs $replicated_seqs; the step printed \"$step_out\"; new seqs $new_seqs"
echo "standby: cut-over WITH the step: relay order $(sed -n 1p <<<"$with"); keys out of order: $(sed -n 2p <<<"$with")"
want_with="k2:4 k3:5 k4:6 k1:102 k5:103 k2:7 k2:101 k2:104
none
0
replayed
duplicate"
[ "$with" = "$want_with" ] || { fail "cut-over with the step: want"; echo "$want_with"; echo "got:"; echo "$with"; }

echo "standby: $(($(date +%s) - started)) s (the hot standby $part1 s, the cut-over $(($(date +%s) - started - part1)) s)"
if [ $fails = 0 ]; then
    echo "standby: a hot standby serves what docs/operations.md says; a logical cut-over keeps per-key order with its step"
    exit 0
fi
echo "standby: $fails failures"
exit 1
