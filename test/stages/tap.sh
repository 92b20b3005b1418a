#!/usr/bin/env bash
#: stage  tap
#: about  pgTAP suites of test/tap (pg_prove)
#: needs  server
#: runs   host chroot
#: order  60
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
psql -qX -c "DROP DATABASE IF EXISTS tap_regression" -c "CREATE DATABASE tap_regression" >/dev/null || exit 1
pg_prove -d tap_regression test/tap/*.sql
