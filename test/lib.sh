# shellcheck shell=bash
# What the test scripts share; sourced (test/pgcluster, test/pgbouncer and the stages that manage
# clusters: test/stages/citus.sh, failover.sh, nopreload.sh, standby.sh).

# as_pg CMD...: CMD as the postgres OS user when run as root (PostgreSQL's servers refuse root,
# PgBouncer too), from / (postgres may not enter the caller's directory, e.g. a clone under
# /root, and PostgreSQL's programs would say so on every call); as the caller otherwise.
as_pg() {
    if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}
