#!/usr/bin/env bash
#: stage  isolation
#: about  pg_isolation_regress over test/isolation/specs
#: needs  server
#: runs   host chroot
#: order  40
#: tests  test/isolation/specs/%.spec
# Every spec, or the ones IDEM_TESTS names, IDEM_REPEAT times (default once); the whole diff on a
# failure.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. test/lib.sh
specs=()
if [ -n "${IDEM_TESTS:-}" ]; then
    read -r -a specs <<<"$IDEM_TESTS"
else
    for s in test/isolation/specs/*.spec; do specs+=("$(basename "$s" .spec)"); done
fi
pgxs=$(dirname "$(pg_config --pgxs)")/..
mkdir -p test/isolation/output_iso
rc=0
for ((run = 1; run <= ${IDEM_REPEAT:-1} && rc == 0; run++)); do
    [ "${IDEM_REPEAT:-1}" -gt 1 ] && echo "run $run of $IDEM_REPEAT"
    "$pgxs/test/isolation/pg_isolation_regress" --inputdir=test/isolation \
        --outputdir=test/isolation/output_iso --bindir="$(pg_config --bindir)" \
        --dbname=isolation_regression --load-extension=idempotency "${specs[@]}" 2>&1 | tail -n 40
    rc=${PIPESTATUS[0]}
done
[ "$rc" = 0 ] || show_diffs test/isolation/output_iso/regression.diffs
exit "$rc"
