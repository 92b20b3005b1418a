#!/usr/bin/env bash
# Without shared_preload_libraries the extension works in full and says that the counters are
# off: a second throwaway cluster (port IDEM_NOPRELOAD_PGPORT, default IDEM_PGPORT + 1, pg_cron
# only) runs the pgTAP ops suite, whose counter tests branch on the preload, checks
# idem_counters / idem_stats / idem_stats_reset, and runs the regress suite of every record and
# inbox state (sql/lifecycle_states.sql) against expected/lifecycle_states_nopreload.out: the
# same answers as with the preload, every counter NULL.
set -uo pipefail
cd "$(dirname "$0")/../.."
export IDEM_PGPORT=${IDEM_NOPRELOAD_PGPORT:-$((${IDEM_PGPORT:-54329} + 1))}
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
SELECT idem_counters_enabled();
SELECT count(*) || ' counters, ' || count(value) || ' values' FROM idem_counters();
SELECT outcome FROM idem_claim('nopreload', 'k');
SELECT scope || ' ' || processing FROM idem_stats;
SQL
)
want='pg_cron
f
8 counters, 0 values
claimed
nopreload 1'
if [ "$got" != "$want" ]; then
    echo "nopreload: unexpected answers"; diff <(echo "$want") <(echo "$got"); rc=1
fi
# idem_stats_reset without preload: 55000 (checked apart: psql stops the heredoc on the error)
err=$(psql -qAtX -d tap_regression -c "\set VERBOSITY sqlstate" -c "SELECT idem_stats_reset()" 2>&1)
[ "$err" = "ERROR:  55000" ] || { echo "nopreload: idem_stats_reset gave: $err"; rc=1; }
# every record and inbox state: the regress suite with its expected output for this cluster
# (PostgreSQL 15's pg_regress reads expected/ under --inputdir; 16 and later under --expecteddir,
# "." unless given)
out=$(mktemp -d /tmp/idem-nopreload.XXXXXX)
mkdir -p "$out/sql" "$out/expected"
cp sql/lifecycle_states.sql "$out/sql/"
cp expected/lifecycle_states_nopreload.out "$out/expected/lifecycle_states.out"
regress=$(dirname "$(pg_config --pgxs)")/../test/regress/pg_regress
expecteddir=()
"$regress" --help | grep -q -- --expecteddir && expecteddir=(--expecteddir="$out")
PGOPTIONS= "$regress" --inputdir="$out" "${expecteddir[@]}" --outputdir="$out" \
    --bindir="$(pg_config --bindir)" --dbname=nopreload_regression --load-extension=idempotency \
    lifecycle_states >"$out/pg_regress.log" 2>&1
prc=$?
grep -E '^(test|ok|not ok) ' "$out/pg_regress.log"
if [ $prc != 0 ]; then
    echo "nopreload: lifecycle_states differs from expected/lifecycle_states_nopreload.out"
    tail -n 5 "$out/pg_regress.log"; head -n 200 "$out/regression.diffs" 2>/dev/null; rc=1
else
    rm -rf "$out"
fi
[ $rc = 0 ] && echo "nopreload: extension works without preload; counters reported off; reset is 55000; every state counted as with the preload"
exit $rc
