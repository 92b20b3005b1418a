#!/usr/bin/env bash
# The smoke run of an installed package, inside the fresh chroot test/stages/packages.sh made and
# installed postgresql-MAJOR-idempotency into with apt (as root, no compiler there):
#   bash smoke.sh MAJOR PORT VERSION
# A cluster as the postgres OS user (pg_cron and idempotency preloaded, a socket in /tmp only),
# CREATE EXTENSION (the version must be VERSION), then each outcome checked exactly: claim,
# complete, replay, mismatch; an inbox delivery and its duplicate; an outbox event emitted,
# leased, done; expired records purged by a job that pg_cron runs (succeeded in
# cron.job_run_details), the live ones kept.
set -euo pipefail
MAJOR=${1:?major} PORT=${2:?port} VERSION=${3:?version}
BIN=/usr/lib/postgresql/$MAJOR/bin
DATA=/var/tmp/smoke-pg
fail() { echo "smoke $MAJOR: FAIL: $*" >&2; [ -f $DATA/server.log ] && tail -n 20 $DATA/server.log >&2; exit 1; }
ok() { echo "smoke $MAJOR: ok: $*"; }

for c in cc gcc g++ c++ clang; do
    if command -v "$c" >/dev/null; then fail "a compiler is installed: $(command -v "$c")"; fi
done
ok "no cc, gcc, g++, c++ or clang on the PATH"
dpkg-query -W -f='${Package} ${Version}\n' "postgresql-$MAJOR-idempotency" "postgresql-$MAJOR" "postgresql-$MAJOR-cron"

rm -rf $DATA
mkdir -p $DATA
chown postgres: $DATA
as_pg() { (cd / && runuser -u postgres -- "$@"); }
as_pg "$BIN/initdb" -D $DATA/data -U postgres --auth=trust --no-sync -E UTF8 --locale=C >$DATA/initdb.log 2>&1 ||
    { cat $DATA/initdb.log; fail initdb; }
cat >>$DATA/data/postgresql.conf <<CONF
port = $PORT
listen_addresses = ''
unix_socket_directories = '/tmp'
shared_preload_libraries = 'pg_cron,idempotency'
cron.database_name = 'postgres'
cron.use_background_workers = on
max_worker_processes = 16
fsync = off
CONF
as_pg "$BIN/pg_ctl" -D $DATA/data -l $DATA/server.log -w -t 60 start >/dev/null || fail "the server does not start"
trap 'as_pg "$BIN/pg_ctl" -D $DATA/data -m immediate -w stop >/dev/null 2>&1 || true' EXIT
ok "cluster of PostgreSQL $MAJOR started as postgres (port $PORT, socket in /tmp)"

q() { psql -X -qtA -v ON_ERROR_STOP=1 -h /tmp -p "$PORT" -U postgres -d postgres -c "$1"; }
expect() { # what sql expected
    local got
    got=$(q "$2" 2>&1) || fail "$1: $got"
    [ "$got" = "$3" ] || fail "$1: expected [$3], got [$got]"
    ok "$1: $got"
}

expect "CREATE EXTENSION" "CREATE EXTENSION idempotency; SELECT extversion FROM pg_extension WHERE extname = 'idempotency'" "$VERSION"
expect "claim" "SELECT outcome, attempt FROM idempotency.idem_claim('smoke/pay', 'k-1', idempotency.idem_fingerprint('{\"amount\": 100}'))" "claimed|1"
expect "complete" "SELECT idempotency.idem_complete('smoke/pay', 'k-1', 1, 'p-1', '{\"id\": 1, \"amount\": 100}', 201)" "t"
expect "replay" "SELECT outcome, resource_id, response, response_status
                 FROM idempotency.idem_claim('smoke/pay', 'k-1', idempotency.idem_fingerprint('{ \"amount\" : 100.0 }'))" \
    'replayed|p-1|{"id": 1, "amount": 100}|201'
expect "mismatch" "SELECT outcome FROM idempotency.idem_claim('smoke/pay', 'k-1', idempotency.idem_fingerprint('{\"amount\": 999}'))" "mismatch"
expect "inbox receive" "SELECT idempotency.idem_inbox_receive('smoke-consumer', 'evt-1', sha256('body'))" "new"
expect "inbox duplicate" "SELECT idempotency.idem_inbox_receive('smoke-consumer', 'evt-1', sha256('body'))" "duplicate"
event=$(q "SELECT idempotency.idem_outbox_emit('smoke.paid', '{\"order\": 7}'::jsonb, key => 'order-7')")
expect "outbox next" "SELECT event_id, key, payload, attempt FROM idempotency.idem_outbox_next('smoke.paid')" \
    "$event|order-7|{\"order\": 7}|1"
expect "outbox done" "SELECT idempotency.idem_outbox_done('$event', 1)" "done"
expect "outbox empty" "SELECT count(*) FROM idempotency.idem_outbox_next('smoke.paid')" "0"

# The purge by pg_cron: 200 expired records and 3 live ones besides k-1.
q "INSERT INTO idempotency.records (scope, key, status, attempt, created_at, updated_at, lease_expires_at, expires_at)
   SELECT 'smoke/purge', 'expired-' || g, 'completed', 1, now() - interval '2 days', now() - interval '2 days',
          NULL::timestamptz, now() - interval '1 day' FROM generate_series(1, 200) g
   UNION ALL
   SELECT 'smoke/purge', 'live-' || g, 'completed', 1, now(), now(), NULL, now() + interval '1 day'
   FROM generate_series(1, 3) g" >/dev/null
q "CREATE EXTENSION pg_cron" >/dev/null
cron_version=$(q "SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'")
# pg_cron 1.4 (bookworm) has no seconds schedules: the job runs at the next minute.
schedule='* * * * *'
case $cron_version in 1.[0-4]*) ;; *) schedule='2 seconds' ;; esac
job=$(q "SELECT idempotency.idem_schedule_purge('$schedule')")
ok "purge job $job scheduled ('$schedule', pg_cron $cron_version)"
status=
for _ in $(seq 1 80); do
    status=$(q "SELECT string_agg(DISTINCT status, ',') FROM cron.job_run_details WHERE jobid = $job AND status IN ('succeeded', 'failed')")
    [ -n "$status" ] && break
    sleep 1
done
[ "$status" = succeeded ] ||
    fail "purge job: [$status] $(q "SELECT string_agg(status || ': ' || return_message, '; ') FROM cron.job_run_details")"
expect "purged by pg_cron" "SELECT count(*) FILTER (WHERE key LIKE 'expired-%'), count(*) FILTER (WHERE key LIKE 'live-%'),
                                   count(*) FILTER (WHERE key = 'k-1') FROM idempotency.records" "0|3|1"
ok "all checks passed"
