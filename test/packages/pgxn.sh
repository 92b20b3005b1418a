#!/usr/bin/env bash
# The PGXN distribution installed with pgxnclient, inside a build chroot of test/stages/packages.sh
# (it compiles), as root:
#   bash pgxn.sh MAJOR PORT ZIP VERSION
# `pgxn install ZIP` (make and make install against that major's pg_config), a cluster as the
# postgres OS user (a socket in /tmp only), CREATE EXTENSION (version VERSION) and a claim; then
# `pgxn uninstall ZIP`, which leaves the cached chroot as it was.
set -euo pipefail
MAJOR=${1:?major} PORT=${2:?port} ZIP=${3:?zip} VERSION=${4:?version}
BIN=/usr/lib/postgresql/$MAJOR/bin
DATA=/var/tmp/pgxn-pg
fail() { echo "pgxn $MAJOR: FAIL: $*" >&2; exit 1; }
ok() { echo "pgxn $MAJOR: ok: $*"; }
export MAKEFLAGS=-j2 PATH=/usr/lib/ccache:$PATH CCACHE_DIR=/var/cache/idem-ccache

pgxn --version
pgxn install --pg_config "$BIN/pg_config" "$ZIP" >/var/tmp/pgxn-install.log 2>&1 ||
    { tail -n 30 /var/tmp/pgxn-install.log; fail "pgxn install $ZIP"; }
[ -f "/usr/lib/postgresql/$MAJOR/lib/idempotency.so" ] || fail "pgxn install left no idempotency.so"
ok "pgxn install $(basename "$ZIP") (built with $BIN/pg_config)"

rm -rf $DATA
mkdir -p $DATA
chown postgres: $DATA
as_pg() { (cd / && runuser -u postgres -- "$@"); }
as_pg "$BIN/initdb" -D $DATA/data -U postgres --auth=trust --no-sync >$DATA/initdb.log 2>&1 || { cat $DATA/initdb.log; fail initdb; }
printf "port = %s\nlisten_addresses = ''\nunix_socket_directories = '/tmp'\nfsync = off\n" "$PORT" >>$DATA/data/postgresql.conf
as_pg "$BIN/pg_ctl" -D $DATA/data -l $DATA/server.log -w -t 60 start >/dev/null || { tail $DATA/server.log; fail "server start"; }
trap 'as_pg "$BIN/pg_ctl" -D $DATA/data -m immediate -w stop >/dev/null 2>&1 || true' EXIT
q() { psql -X -qtA -v ON_ERROR_STOP=1 -h /tmp -p "$PORT" -U postgres -d postgres -c "$1"; }
got=$(q "CREATE EXTENSION idempotency; SELECT extversion FROM pg_extension WHERE extname = 'idempotency'") || fail "CREATE EXTENSION: $got"
[ "$got" = "$VERSION" ] || fail "CREATE EXTENSION installed version [$got], expected [$VERSION]"
ok "CREATE EXTENSION idempotency: $got"
got=$(q "SELECT outcome, attempt FROM idempotency.idem_claim('pgxn/op', 'k-1', idempotency.idem_fingerprint('{\"a\": 1}'))") || fail "claim: $got"
[ "$got" = "claimed|1" ] || fail "claim: expected [claimed|1], got [$got]"
ok "claim: $got"
as_pg "$BIN/pg_ctl" -D $DATA/data -m fast -w stop >/dev/null
trap - EXIT
pgxn uninstall --pg_config "$BIN/pg_config" "$ZIP" >/var/tmp/pgxn-uninstall.log 2>&1 ||
    { tail -n 20 /var/tmp/pgxn-uninstall.log; fail "pgxn uninstall"; }
[ ! -e "/usr/lib/postgresql/$MAJOR/lib/idempotency.so" ] || fail "pgxn uninstall left idempotency.so"
ok "pgxn uninstall: the chroot's server is as it was"
