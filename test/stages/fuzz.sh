#!/usr/bin/env bash
#: stage  fuzz
#: about  libFuzzer targets of test/fuzz under ASan+UBSan, bounded (IDEM_FUZZ_SECONDS each, default 60)
#: needs  -
#: runs   host
#: order  230
# A clang build of its own (IDEM_BUILD-fuzz); each target from its corpus in test/fuzz/corpus.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
FB=${IDEM_BUILD:-$ROOT/build}-fuzz
CXX=clang++ cmake -S . -B "$FB" -DIDEM_FUZZ=ON -DIDEM_CLIENTS=OFF -DIDEM_BENCH=OFF -DIDEM_WERROR=ON >/dev/null &&
    cmake --build "$FB" -j2 >/dev/null || exit 1
rc=0
for f in "$FB"/*_fuzz; do
    if [ ! -f "$f" ] || [ ! -x "$f" ]; then continue; fi # not the corpus-*_fuzz directories
    corpus=("$ROOT/test/fuzz/corpus/$(basename "$f")")
    [ -d "${corpus[0]}" ] || corpus=()
    mkdir -p "$FB/corpus-$(basename "$f")"
    "$f" -max_total_time="${IDEM_FUZZ_SECONDS:-60}" -max_len=4096 -timeout=10 \
        "$FB/corpus-$(basename "$f")" "${corpus[@]}" 2>&1 | tail -n 3
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
done
exit $rc
