# shellcheck shell=bash
# What the test scripts share; sourced (test/pgcluster, test/pgbouncer and the stages of
# test/stages/ that manage clusters or show a suite's differences).

# as_pg CMD...: CMD as the postgres OS user when run as root (PostgreSQL's servers refuse root,
# PgBouncer too), from / (postgres may not enter the caller's directory, e.g. a clone under
# /root, and PostgreSQL's programs would say so on every call); as the caller otherwise.
as_pg() {
    if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

# show_diffs FILE: a failed suite's differences, whole, or their path and first 200 lines when long.
show_diffs() {
    [ -f "$1" ] || return 0
    local n
    n=$(wc -l <"$1")
    if [ "$n" -le 400 ]; then
        cat "$1"
    else
        echo "the differences are $n lines, in $1; the first 200:"
        head -n 200 "$1"
    fi
}
