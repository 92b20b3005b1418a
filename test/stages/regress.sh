#!/usr/bin/env bash
#: stage  regress
#: about  pg_regress over test/regress/sql against test/regress/expected (make installcheck, PGXS)
#: needs  server
#: runs   host chroot
#: order  30
#: tests  test/regress/sql/%.sql
# Every file of test/regress/sql, or the ones IDEM_TESTS names, IDEM_REPEAT times (default once);
# the whole diff on a failure. test/regress/sql/upgrade.sql makes a 0.7 database from the frozen
# fixtures, added to the server's extension directory for this stage only.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. test/lib.sh
test/upgrade/scripts add || exit 1
args=()
[ -n "${IDEM_TESTS:-}" ] && args=("REGRESS=$IDEM_TESTS")
rc=0
for ((run = 1; run <= ${IDEM_REPEAT:-1} && rc == 0; run++)); do
    [ "${IDEM_REPEAT:-1}" -gt 1 ] && echo "run $run of $IDEM_REPEAT"
    make -s installcheck ISOLATION= "${args[@]}" 2>&1 | tail -n 40
    rc=${PIPESTATUS[0]}
done
test/upgrade/scripts remove || rc=1
[ "$rc" = 0 ] || show_diffs regression.diffs
exit "$rc"
