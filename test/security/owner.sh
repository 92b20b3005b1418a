#!/usr/bin/env bash
# The database owner's attack (docs/security.md "The database owner"), the security stage's part
# "owner". A role that is no superuser owns the database (and so, on PostgreSQL 15 and later,
# schema public) and plants test/security/owner_decoys.sql: an all-text overload and an
# overload with one more defaulted argument of every routine of the extension, in public and in a
# schema of its own, and views named as the extension's, with the database's search path set to
# them. Then, as the superuser:
#  1. on the 1.x layout (the frozen 1.1.0 and 1.0.0 installs: functions in public), the planted
#     fault: 1.1.0's documented statements run the owner's code, the 1.1.0 pg_cron job's CALL is
#     ambiguous (42725), and a function the owner created first with a signature that 1.1.0 adds
#     stops ALTER EXTENSION UPDATE. The check fails unless it sees all three.
#  2. the 1.1.0 database, decoys and all, is updated to 2.0.0 (the owner cannot stop it), and
#     2.0.0's documented statements and the job's command (as idem_schedule_purge makes it) run
#     none of the owner's code and answer as documented;
#  3. the owner cannot create in schema idempotency (42501), so no update can meet its objects.
# Every documented statement of README.md and docs/ runs against such an owner in the docs'
# own run (test/docs/doctest.py with IDEM_DOCS_OWNER_ATTACK=1, the stage's part "owner" too).
# Needs the running test cluster (PGHOST/PGPORT/PGUSER, a superuser) and write access to the
# extension directory (the frozen fixtures, test/upgrade/scripts). Exits non-zero on a failure.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OWNER=idem_owner_attack
SUPER=${PGUSER:-postgres}
failures=0
say() { echo "security: owner: $*"; }
bad() { echo "security: owner: FAIL: $*" >&2; failures=$((failures + 1)); }
sq() { PGOPTIONS='-c client_min_messages=warning' psql -X -q -v ON_ERROR_STOP=1 -U "$SUPER" "$@"; }
# one statement as the superuser in a fresh session (the database's search path applies): its
# output, or its error's SQLSTATE and message
as_super() { # db sql
    PGOPTIONS='-c client_min_messages=warning' psql -X -qtA -v ON_ERROR_STOP=1 -v VERBOSITY=sqlstate \
        -U "$SUPER" -d "$1" -c "$2" 2>&1 | tr '\n' ' ' | sed 's/ *$//'
}
fired() { sq -d "$1" -tAc "SELECT coalesce(string_agg(name || ' as ' || who, ', ' ORDER BY at), '') FROM public.owner_decoy_fired"; }
expect() { # what got want
    if [ "$2" = "$3" ]; then say "$1: $2"; else bad "$1: got '$2', want '$3'"; fi
}
new_db() { # name [version]
    local version=""
    if [ -n "${2:-}" ]; then version=" VERSION '$2'"; fi
    sq -d postgres -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1 OWNER $OWNER" || exit 1
    sq -d "$1" -c "CREATE EXTENSION idempotency$version" || exit 1
}
plant() { # db
    psql -X -q -v ON_ERROR_STOP=1 -U $OWNER -d "$1" -f test/security/owner_decoys.sql >/dev/null ||
        { bad "planting the decoys in $1"; return; }
    say "$1: $(sq -d "$1" -tAc "SELECT count(*) || ' decoys of ' || count(DISTINCT name) || ' names' FROM public.owner_decoys") planted by $OWNER"
}

test/upgrade/scripts add || exit 1
trap 'test/upgrade/scripts remove' EXIT
sq -d postgres -c "DROP ROLE IF EXISTS $OWNER" -c "CREATE ROLE $OWNER LOGIN" \
    -c "DO \$\$BEGIN CREATE ROLE idempotency_user; EXCEPTION WHEN duplicate_object THEN NULL; END\$\$" || exit 1

# --- 1. the 1.x layout: the attack succeeds (what the checks below must catch) -----------------------
OLD=idem_owner_11
new_db $OLD 1.1.0
plant $OLD
as_super $OLD "SELECT idem_bind('scope', 'user:', 'idempotency_user')" >/dev/null
as_super $OLD "CALL idem_purge_loop(max_duration => '1 minute')" >/dev/null
expect "1.1.0, the superuser's documented statements ran" "$(fired $OLD)" \
    "idem_bind as $SUPER, idem_purge_loop as $SUPER"
job_11=$(as_super $OLD "DO \$idem_purge\$DECLARE deleted bigint; BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    CALL public.idem_purge_loop(1000, interval '4 minutes', false, interval '0', interval '0', deleted);
    END\$idem_purge\$")
expect "1.1.0, the pg_cron job's CALL" "${job_11%%:*}" "ERROR"
case "$job_11" in *42725*) say "1.1.0, the pg_cron job: 42725 (ambiguous): purging stopped" ;;
*) bad "1.1.0's job: no 42725: $job_11" ;; esac
OLD10=idem_owner_10
new_db $OLD10 1.0.0
psql -X -q -v ON_ERROR_STOP=1 -U $OWNER -d $OLD10 -c "CREATE FUNCTION public.idem_fingerprint(doc bytea,
    exclude text[] DEFAULT NULL, include text[] DEFAULT NULL, exact_numbers boolean DEFAULT false)
    RETURNS bytea LANGUAGE sql AS 'SELECT NULL::bytea'" || bad "the owner's idem_fingerprint(bytea, ...)"
blocked=$(as_super $OLD10 "ALTER EXTENSION idempotency UPDATE TO '1.1.0'")
case "$blocked" in *42723*) say "1.0.0 -> 1.1.0 with the owner's idem_fingerprint(bytea, ...) first: 42723, not updated" ;;
*) bad "the owner's function did not stop the 1.x update: $blocked" ;; esac
sq -d postgres -c "DROP DATABASE $OLD10 WITH (FORCE)" >/dev/null

# --- 2. 2.0.0: the update goes through, and nothing of the owner's runs ------------------------------
sq -d $OLD -c "TRUNCATE public.owner_decoy_fired" -c "DELETE FROM idempotency.bindings" >/dev/null
updated=$(as_super $OLD "ALTER EXTENSION idempotency UPDATE")
expect "1.1.0 -> 2.0.0 beside the owner's decoys" "$updated" ""
expect "version" "$(sq -d $OLD -tAc "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'")" "2.0.0"
expect "2.0.0, SELECT idempotency.idem_bind('scope', 'user:', 'idempotency_user')" \
    "$(as_super $OLD "SELECT idempotency.idem_bind('scope', 'user:', 'idempotency_user')")" "t"
expect "2.0.0, CALL idempotency.idem_purge_loop(max_duration => '1 minute')" \
    "$(as_super $OLD "CALL idempotency.idem_purge_loop(max_duration => '1 minute')")" "0"
# the pg_cron job's CALL, as idem_schedule_purge writes it (the real job: the stage's pg_cron part)
expect "2.0.0, the pg_cron job's CALL idempotency.idem_purge_loop(1000, ...)" \
    "$(as_super $OLD "DO \$idem_purge\$DECLARE deleted bigint; BEGIN PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true); CALL idempotency.idem_purge_loop(1000, interval '4 minutes', false, interval '0', interval '0', deleted); END\$idem_purge\$")" ""
expect "2.0.0, the binding the superuser asked for" \
    "$(sq -d $OLD -tAc "SELECT string_agg(kind || ' ' || prefix || ' ' || role, ', ') FROM idempotency.idem_bindings")" \
    "scope user: idempotency_user"
expect "2.0.0, decoys that ran" "$(fired $OLD)" ""

# --- 3. the owner cannot create where the extension's names live -------------------------------------
denied=$(psql -X -qtA -v VERBOSITY=sqlstate -U $OWNER -d $OLD \
    -c "CREATE FUNCTION idempotency.idem_next_release() RETURNS int LANGUAGE sql AS 'SELECT 1'" 2>&1)
expect "the owner's CREATE FUNCTION idempotency.idem_next_release()" "$denied" "ERROR:  42501"
denied=$(psql -X -qtA -v VERBOSITY=sqlstate -U $OWNER -d $OLD -c "ALTER SCHEMA idempotency RENAME TO idem_old" 2>&1)
expect "the owner's ALTER SCHEMA idempotency RENAME" "$denied" "ERROR:  42501"
expect "owner of schema idempotency" \
    "$(sq -d $OLD -tAc "SELECT nspowner::regrole FROM pg_namespace WHERE nspname = 'idempotency'")" "$SUPER"

sq -d postgres -c "DROP DATABASE $OLD WITH (FORCE)" -c "DROP ROLE $OWNER" >/dev/null
if [ $failures = 0 ]; then say ok; exit 0; fi
say "$failures failure(s)"
exit 1
