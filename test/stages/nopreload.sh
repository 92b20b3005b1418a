#!/usr/bin/env bash
#: stage  nopreload
#: about  counters off, everything else working, without shared_preload_libraries
#: needs  install
#: runs   host chroot
#: order  100
# Without shared_preload_libraries the extension works in full and says that the counters are
# off: a second throwaway cluster (port IDEM_NOPRELOAD_PGPORT, default IDEM_PGPORT + 1, pg_cron
# only) runs the pgTAP ops suite, whose counter tests branch on the preload, checks
# idem_counters / idem_stats / idem_stats_reset, and runs the regress suite of every record and
# inbox state (test/regress/sql/lifecycle_states.sql) against
# test/regress/expected/lifecycle_states_nopreload.out: the
# same answers as with the preload, every counter NULL. Then the settings in every way they can be
# set (docs/settings.md, "When a value is checked"): an invalid value is never replaced by the
# default, the functions that use it fail with 22023; first without preload, then with it
# (restarts).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export IDEM_PGPORT=${IDEM_NOPRELOAD_PGPORT:-$((${IDEM_PGPORT:-25329} + 1))}
export IDEM_PGDIR=/tmp/idem-pg-$IDEM_PGPORT
export IDEM_PRELOAD=pg_cron
test/pgcluster stop >/dev/null 2>&1
envs=$(test/pgcluster start) || exit 1
eval "$envs"
trap 'test/pgcluster stop >/dev/null 2>&1' EXIT
export PGHOST PGPORT PGUSER PGDATABASE PGOPTIONS='-c client_min_messages=warning'
rc=0
psql -qX -c "DROP DATABASE IF EXISTS tap_regression" -c "CREATE DATABASE tap_regression" || exit 1
pg_prove -d tap_regression test/tap/operations.sql || rc=1
got=$(psql -qAtX -d tap_regression <<'SQL'
CREATE EXTENSION idempotency;
SHOW shared_preload_libraries;
SELECT idempotency.idem_counters_enabled();
SELECT count(*) || ' counters, ' || count(value) || ' values' FROM idempotency.idem_counters();
SELECT outcome FROM idempotency.idem_claim('nopreload', 'k');
SELECT scope || ' ' || processing FROM idempotency.idem_stats;
SQL
)
want='pg_cron
f
15 counters, 0 values
claimed
nopreload 1'
if [ "$got" != "$want" ]; then
    echo "nopreload: unexpected answers"; diff <(echo "$want") <(echo "$got"); rc=1
fi
# the first statement of a session loads the library while it is planned (idem_claim_support),
# and the planner hook it installs plans that statement as idem_claim's custom scan already
plan=$(psql -qAtX -d tap_regression -c "EXPLAIN (COSTS OFF) SELECT outcome FROM idempotency.idem_claim('nopreload', 'first')")
[ "$plan" = "Custom Scan (IdemClaim)" ] || { echo "nopreload: first statement planned as: $plan"; rc=1; }
# idem_stats_reset without preload: 55000 (checked apart: psql stops the heredoc on the error)
err=$(psql -qAtX -d tap_regression -c "\set VERBOSITY sqlstate" -c "SELECT idempotency.idem_stats_reset()" 2>&1)
[ "$err" = "ERROR:  55000" ] || { echo "nopreload: idem_stats_reset gave: $err"; rc=1; }
# every record and inbox state: the regress suite with its expected output for this cluster
# (PostgreSQL 15's pg_regress reads expected/ under --inputdir; 16 and later under --expecteddir,
# "." unless given)
out=$(mktemp -d /tmp/idem-nopreload.XXXXXX)
mkdir -p "$out/sql" "$out/expected"
cp test/regress/sql/lifecycle_states.sql "$out/sql/"
cp test/regress/expected/lifecycle_states_nopreload.out "$out/expected/lifecycle_states.out"
regress=$(dirname "$(pg_config --pgxs)")/../test/regress/pg_regress
expecteddir=()
"$regress" --help | grep -q -- --expecteddir && expecteddir=(--expecteddir="$out")
PGOPTIONS='' "$regress" --inputdir="$out" "${expecteddir[@]}" --outputdir="$out" \
    --bindir="$(pg_config --bindir)" --dbname=nopreload_regression --load-extension=idempotency \
    lifecycle_states >"$out/pg_regress.log" 2>&1
prc=$?
grep -E '^(test|ok|not ok) ' "$out/pg_regress.log"
if [ $prc != 0 ]; then
    echo "nopreload: lifecycle_states differs from test/regress/expected/lifecycle_states_nopreload.out"
    tail -n 5 "$out/pg_regress.log"; head -n 200 "$out/regression.diffs" 2>/dev/null; rc=1
else
    rm -rf "$out"
fi
[ $rc = 0 ] && echo "nopreload: extension works without preload; counters reported off; reset is 55000; every state counted as with the preload"

# --- Settings, every way of setting them -----------------------------------------------------
BIN=$(pg_config --bindir)
CONF=$IDEM_PGDIR/data/postgresql.conf
# shellcheck source=test/lib.sh
. test/lib.sh # as_pg
restart() { as_pg "$BIN/pg_ctl" -D "$IDEM_PGDIR/data" -l "$IDEM_PGDIR/server.log" -w -m fast restart >/dev/null; }
# A reload, seen by new sessions once the postmaster has read the file (SHOW in a new session).
reload_until() { # the value SHOW idempotency.default_lease gives once the reload is in
    psql -qAtX -c "SELECT pg_reload_conf()" >/dev/null
    for _ in $(seq 50); do
        [ "$(psql -qAtX -d settings_db -c 'SHOW idempotency.default_lease' 2>/dev/null)" = "$1" ] && return
        sleep 0.1
    done
    echo "nopreload settings: the reload did not arrive"; rc=1
}
s_fail=0
check() { # label want [psql args]; stdin: SQL. Compares the output lines, joined by " | ".
    local label=$1 want=$2 got
    shift 2
    got=$(psql -qAtX -d settings_db "$@" 2>/dev/null | paste -sd'|' | sed 's/|/ | /g')
    if [ "$got" != "$want" ]; then
        printf 'nopreload settings: %s\n  want: %s\n  got:  %s\n' "$label" "$want" "$got"
        s_fail=1
    fi
}
R0='22023 The value "0" is 0 s, outside the valid range 1 s .. 2147483647 s.'
RABC='22023 The value "abc" is not a duration from 1 s to 2147483647 s: a number of seconds, or a number with a unit ("us", "ms", "s", "min", "h", "d").'
SET_="It comes from a SET before the extension's library was loaded."
FILE_="It comes from the configuration file (postgresql.conf, or postgresql.auto.conf for ALTER SYSTEM)."
psql -qX -c "DROP DATABASE IF EXISTS settings_db" -c "CREATE DATABASE settings_db" \
    -c "DROP ROLE IF EXISTS settings_role" -c "CREATE ROLE settings_role LOGIN SUPERUSER" >/dev/null || exit 1
# val(sql): the first column of sql's answer, or the SQLSTATE and the detail of its error;
# lease(): the lease of a claim without arguments, in seconds. Neither loads the library.
psql -qX -d settings_db >/dev/null <<'SQL' || exit 1
CREATE EXTENSION idempotency;
CREATE FUNCTION val(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
    d text;
BEGIN
    EXECUTE sql INTO r;
    RETURN r;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ' ' || d;
END $$;
CREATE FUNCTION lease(arg interval DEFAULT NULL) RETURNS text LANGUAGE sql AS $$
SELECT val(format('SELECT extract(epoch FROM lease_expires_at - now())::int '
                  'FROM idempotency.idem_claim(''settings'', gen_random_uuid()::text, lease => %L)', arg)) $$;
SQL

# Without shared_preload_libraries: the session's first idem_* call loads the library.
check "SET before the load" "$R0 $SET_ | 30" <<'SQL'
SET idempotency.default_lease = 0;
SELECT lease();
SELECT lease('30 s');
SQL
check "SET before the load, then RESET" "60" <<'SQL'
SET idempotency.default_lease = 'abc';
RESET idempotency.default_lease;
SELECT lease();
SQL
check "SET before the load, then a valid SET" "$R0 $SET_ | 45" <<'SQL'
SET idempotency.default_lease = 0;
SELECT lease();
SET idempotency.default_lease = '45s';
SELECT lease();
SQL
check "SET in a transaction that loads and rolls back" "$R0 $SET_ | 60" <<'SQL'
BEGIN;
SET idempotency.default_lease = 0;
SELECT lease();
ROLLBACK;
SELECT lease();
SQL
check "set_config() before the load" "$R0 $SET_" <<'SQL'
SELECT set_config('idempotency.default_lease', '0', false) \g /dev/null
SELECT lease();
SQL
check "SET after the load" "60" <<'SQL'
SELECT idempotency.idem_counters_enabled() \g /dev/null
SET idempotency.default_lease = 0;
SELECT lease();
SQL
# The bounds (docs/settings.md, "Bounds") are superuser settings: a role that may not set them
# cannot lift them before the library is loaded either (PostgreSQL drops its value, with a
# WARNING, when the library defines the setting); a superuser's value is kept.
psql -qX -c "DROP ROLE IF EXISTS bounds_role" -c "CREATE ROLE bounds_role LOGIN" >/dev/null || exit 1
check "a bound SET before the load by a role that may not set it" "16MB | 1000" -U bounds_role <<'SQL'
SET idempotency.max_response_bytes = '1GB';
SET idempotency.max_outbox_keys_per_transaction = 1000000;
SELECT idempotency.idem_fingerprint('{}'::jsonb) \g /dev/null
SHOW idempotency.max_response_bytes;
SHOW idempotency.max_outbox_keys_per_transaction;
SQL
PGOPTIONS='-c idempotency.max_response_bytes=1GB' check "a bound in PGOPTIONS of a role that may not set it" \
    "16MB" -U bounds_role <<'SQL'
SELECT idempotency.idem_fingerprint('{}'::jsonb) \g /dev/null
SHOW idempotency.max_response_bytes;
SQL
check "a bound SET before the load by a superuser" "1GB" <<'SQL'
SET idempotency.max_response_bytes = '1GB';
SELECT idempotency.idem_fingerprint('{}'::jsonb) \g /dev/null
SHOW idempotency.max_response_bytes;
SQL
PGOPTIONS='-c idempotency.default_lease=0' check "PGOPTIONS" \
    "$R0 It comes from the connection's options (PGOPTIONS, options=-c)." <<'SQL'
SELECT lease();
SQL
RMAYBE="22023 The value \"maybe\" is not a Boolean: on, off, true, false, yes, no, 1 or 0. $SET_"
check "inbox_ttl, webhook_tolerance and direct_access" \
    "22023 The value \"0\" is 0 s, outside the valid range 1 s .. 2147483647 s. $SET_ | $RMAYBE | 22023 The value \"-1\" is -1 s, outside the valid range 0 s .. 2147483647 s. $SET_ | $RMAYBE | new" <<'SQL'
SET idempotency.inbox_ttl = 0;
SET idempotency.webhook_tolerance = -1;
SET idempotency.direct_access = maybe;
SELECT val($$SELECT idempotency.idem_inbox_receive('settings', 'e1')$$);
SELECT val($$SELECT idempotency.idem_inbox_receive('settings', 'e1', ttl => '1 day')$$);
SELECT val($$SELECT idempotency.idem_webhook_verify_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
           'msg_1', '1614265330', '{}', 'v1,x', now => to_timestamp(1614265330))::text$$);
SELECT lease('30 s');
SET idempotency.direct_access = off;
SELECT val($$SELECT idempotency.idem_inbox_receive('settings', 'e1', ttl => '1 day')$$);
SQL
# The queues' and the outbox's settings (0.5): a count, a duration that may be 0, Booleans. Each
# call fails on the setting it reads and on no other: emit reads outbox_notify only, next the
# lease, the attempt budget and the dead-key policy, done the TTL.
RX="22023 The value \"x\" is not a whole number from 0 to 2147483647. $SET_"
check "max_attempts, retry_backoff_base, outbox_ttl, outbox_dead_blocks_key, outbox_notify" \
    "$RMAYBE | true | $RX | $RMAYBE | 1 | $R0 $SET_ | 22023 The value \"-1\" is -1 s, outside the valid range 0 s .. 2147483647 s. $SET_ | 1" <<'SQL'
SET idempotency.outbox_notify = maybe;
SET idempotency.max_attempts = x;
SET idempotency.outbox_dead_blocks_key = maybe;
SET idempotency.outbox_ttl = 0;
SET idempotency.retry_backoff_base = -1;
SELECT val($$SELECT idempotency.idem_outbox_emit('settings', '{}') IS NOT NULL$$);
RESET idempotency.outbox_notify;
SELECT val($$SELECT idempotency.idem_outbox_emit('settings', '{}') IS NOT NULL$$);
SELECT val($$SELECT count(*) FROM idempotency.idem_outbox_next('settings')$$);
RESET idempotency.max_attempts;
SELECT val($$SELECT count(*) FROM idempotency.idem_outbox_next('settings')$$);
RESET idempotency.outbox_dead_blocks_key;
SELECT val($$SELECT count(*) FROM idempotency.idem_outbox_next('settings', 1, '1 ms')$$);
SELECT pg_sleep(0.01) \g /dev/null
SELECT val($$SELECT idempotency.idem_outbox_done(event_id, attempt) FROM idempotency.idem_outbox_next('settings', 1, '1 ms')$$);
SELECT val($$SELECT idempotency.idem_outbox_fail(event_id, attempt) FROM idempotency.idem_outbox_next('settings', 1, '1 ms')$$);
RESET ALL;
SELECT val($$SELECT count(*) FROM idempotency.idem_outbox_next('settings', 1)$$);
SQL
# JIT: the extension's saved statements are planned with jit off, whatever jit_above_cost says (a
# generic plan's cost, estimated for an unknown LIMIT $n, passed the default 100,000 on a large
# outbox, and every idem_outbox_next then compiled 27 functions: the relay at 0.30 x).
# auto_explain prints each plan to the client; "JIT:" marks a compiled one. The control query
# shows that JIT is there to be used (without the server's LLVM support the check is skipped).
jit_out=$(psql -qAtX -d settings_db 2>&1 <<'SQL'
LOAD 'auto_explain';
SET client_min_messages = notice;
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_level = notice;
SET jit_above_cost = 0;
SELECT count(*) AS control FROM pg_class;
SELECT '--- ours';
SELECT idempotency.idem_outbox_emit('jit', '{}', key => 'k') IS NOT NULL;
SELECT count(idempotency.idem_outbox_done(event_id, attempt)) FROM idempotency.idem_outbox_next('jit');
SELECT idempotency.idem_inbox_receive('jit', 'e1', enqueue => true);
SELECT count(idempotency.idem_inbox_done('jit', event_id, attempt)) FROM idempotency.idem_inbox_next('jit');
SELECT outcome FROM idempotency.idem_claim('jit', 'k1', '\x01');
SELECT count(*) FROM idempotency.idem_purge();
SQL
)
# one block per plan, from its "Query Text:" line: the control's, and the extension's statements
# (their text names schema idempotency; the top-level calls around them are the session's own)
jit_blocks() { printf '%s\n' "$jit_out" | awk -v want="$1" '
    /Query Text:/ { if (q ~ want && jit) n++; q = $0; jit = 0 }
    /JIT:/ { jit = 1 }
    END { if (q ~ want && jit) n++; print n + 0 }'; }
jit_control=$(jit_blocks 'FROM pg_class')
jit_ours=$(jit_blocks 'idempotency[.](records|inbox|outbox|bindings)') # the extension's own statements, not the calls
if [ "$jit_control" = 0 ]; then
    echo "nopreload: jit: no JIT on this server (no LLVM support): the check is skipped"
elif [ "$jit_ours" != 0 ]; then
    echo "nopreload: jit: $jit_ours of the extension's statements were JIT-compiled"; s_fail=1
fi
# A parallel worker takes the session's settings over, an invalid value too: other queries still
# run in workers, and a parallel safe function that reads the value fails there as well.
fp=$(psql -qAtX -c "SELECT name FROM pg_settings WHERE name IN ('force_parallel_mode', 'debug_parallel_query')")
out=$(psql -qAtX -d settings_db 2>"$IDEM_PGDIR/err" <<SQL
\set VERBOSITY terse
SET idempotency.webhook_tolerance = -1;
SELECT idempotency.idem_counters_enabled() \g /dev/null
SET $fp = on;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM pg_class;
SELECT idempotency.idem_webhook_verify_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_1', '1614265330',
                                    '{}', 'v1,x', now => to_timestamp(1614265330));
SQL
)
err=$(sed 's/^psql:<stdin>:[0-9]*: //' "$IDEM_PGDIR/err" | paste -sd'|')
case "$out" in *"Workers Launched: 1"*) ;; *) echo "nopreload settings: no parallel worker: $out"; s_fail=1 ;; esac
[ "$err" = 'WARNING:  invalid value for parameter "idempotency.webhook_tolerance": "-1"|ERROR:  invalid value for setting "idempotency.webhook_tolerance"' ] ||
    { echo "nopreload settings: parallel worker gave: $err"; s_fail=1; }
psql -qX -c "ALTER DATABASE settings_db SET idempotency.default_lease = 'abc'" || s_fail=1
check "ALTER DATABASE SET" "$RABC It comes from ALTER DATABASE ... SET. | 30" <<'SQL'
SELECT lease();
SELECT lease('30 s');
SQL
psql -qX -c "ALTER ROLE settings_role SET idempotency.default_lease = 0" || s_fail=1
check "ALTER ROLE SET (over ALTER DATABASE)" "$R0 It comes from ALTER ROLE ... SET." -U settings_role <<'SQL'
SELECT lease();
SQL
psql -qX -c "ALTER ROLE settings_role IN DATABASE settings_db SET idempotency.default_lease = '-1'" || s_fail=1
check "ALTER ROLE IN DATABASE SET" \
    "22023 The value \"-1\" is -1 s, outside the valid range 1 s .. 2147483647 s. It comes from ALTER ROLE ... IN DATABASE ... SET." \
    -U settings_role <<'SQL'
SELECT lease();
SQL
psql -qX -c "ALTER ROLE settings_role IN DATABASE settings_db RESET ALL" -c "ALTER ROLE settings_role RESET ALL" || s_fail=1
# postgresql.conf, read at a reload by a session that has loaded the library and by new ones
echo "idempotency.default_lease = 'abc'" >>"$CONF"
psql -qX -c "ALTER DATABASE settings_db RESET idempotency.default_lease" || s_fail=1
# postgresql.conf: a reload reaches a session that loaded the library, and new sessions
check "postgresql.conf, reloads in a loaded session" "60 | $RABC $FILE_ | 120 | 60" <<SQL
SELECT lease();
\! echo "idempotency.default_lease = 'abc'" >>'$CONF'
SELECT pg_reload_conf(), pg_sleep(1) \g /dev/null
SELECT lease();
\! sed -i "s/^idempotency.default_lease = 'abc'/idempotency.default_lease = 120/" '$CONF'
SELECT pg_reload_conf(), pg_sleep(1) \g /dev/null
SELECT lease();
\! sed -i "/^idempotency.default_lease/d" '$CONF'
SELECT pg_reload_conf(), pg_sleep(1) \g /dev/null
SELECT lease();
SQL
echo "idempotency.default_lease = 'abc'" >>"$CONF"
reload_until abc
check "postgresql.conf, a new session" "$RABC $FILE_" <<<"SELECT lease();"
restart
check "postgresql.conf, after a restart" "$RABC $FILE_" <<<"SELECT lease();"
sed -i "/^idempotency.default_lease/d" "$CONF"
reload_until ""
check "postgresql.conf line removed" "60" <<<"SELECT lease();"
# ALTER SYSTEM checks nothing in a session without the library; with it, it refuses
psql -qX -c "ALTER SYSTEM SET idempotency.default_lease = 'abc'" || s_fail=1
reload_until abc
check "ALTER SYSTEM in a session without the library" "$RABC $FILE_" <<<"SELECT lease();"
psql -qX -c "ALTER SYSTEM RESET idempotency.default_lease" || s_fail=1
reload_until ""
err=$(psql -qAtX -d settings_db 2>&1 <<'SQL'
\set VERBOSITY sqlstate
SELECT idempotency.idem_counters_enabled() \g /dev/null
ALTER SYSTEM SET idempotency.default_lease = 'abc';
SQL
)
[ "$err" = "ERROR:  22023" ] || { echo "nopreload settings: ALTER SYSTEM with the library gave: $err"; s_fail=1; }

# With shared_preload_libraries. A value stored while the library was not preloaded:
psql -qX -c "ALTER DATABASE settings_db SET idempotency.default_lease = 'abc'" || s_fail=1
sed -i "s/^shared_preload_libraries = .*/shared_preload_libraries = 'pg_cron,idempotency'/" "$CONF"
restart
check "preloaded: ALTER DATABASE SET stored before" "t | $RABC It comes from ALTER DATABASE ... SET." <<'SQL'
SELECT idempotency.idem_counters_enabled();
SELECT lease();
SQL
psql -qX -c "ALTER DATABASE settings_db RESET idempotency.default_lease" || s_fail=1
err=$(psql -qAtX -c '\set VERBOSITY sqlstate' -c "ALTER DATABASE settings_db SET idempotency.default_lease = 'abc'" 2>&1)
[ "$err" = "ERROR:  22023" ] || { echo "nopreload settings: preloaded ALTER DATABASE SET gave: $err"; s_fail=1; }
err=$(PGOPTIONS='-c idempotency.default_lease=0' psql -qAtX -d settings_db -c "SELECT 1" 2>&1)
case "$err" in
*'FATAL:  0 s is outside the valid range for parameter "idempotency.default_lease" (1 s .. 2147483647 s)'*) ;;
*) echo "nopreload settings: preloaded PGOPTIONS gave: $err"; s_fail=1 ;;
esac
echo "idempotency.default_lease = 'abc'" >>"$CONF"
restart
check "preloaded: postgresql.conf at the start" "$RABC $FILE_" <<<"SELECT lease();"
grep -q 'WARNING:  invalid value for parameter "idempotency.default_lease": "abc"' "$IDEM_PGDIR/server.log" ||
    { echo "nopreload settings: no WARNING in the server log"; s_fail=1; }
check "preloaded: postgresql.conf line removed, loaded session" "$RABC $FILE_ | 60" <<SQL
SELECT lease();
\! sed -i "/^idempotency.default_lease/d" '$CONF'
SELECT pg_reload_conf(), pg_sleep(1) \g /dev/null
SELECT lease();
SQL
reload_until 1min
check "preloaded: postgresql.conf line removed, new session" "60" <<<"SELECT lease();"
check "preloaded: postgresql.conf at a reload" "60 | $RABC $FILE_ | setting could not be applied" <<SQL
SELECT lease();
\! echo "idempotency.default_lease = 'abc'" >>'$CONF'
SELECT pg_reload_conf(), pg_sleep(1) \g /dev/null
SELECT lease();
SELECT error FROM pg_file_settings WHERE name = 'idempotency.default_lease';
SQL
reload_until abc
check "preloaded: postgresql.conf at a reload, new session" "$RABC $FILE_" <<<"SELECT lease();"
sed -i "/^idempotency.default_lease/d" "$CONF"
if [ $s_fail = 0 ]; then
    echo "nopreload: settings: an invalid value, however set, is 22023 where it is used, never the default"
else
    rc=1
fi
exit $rc
