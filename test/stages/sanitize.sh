#!/usr/bin/env bash
#: stage  sanitize
#: about  the unit tests under ASan+UBSan
#: needs  -
#: runs   host
#: order  240
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
SB=${IDEM_BUILD:-build}-asan
cmake -S . -B "$SB" -DIDEM_SANITIZE=ON -DIDEM_CLIENTS=OFF -DIDEM_BENCH=OFF -DIDEM_WERROR=ON >/dev/null &&
    cmake --build "$SB" -j2 >/dev/null || exit 1
ctest --test-dir "$SB" -j2 2>&1 | tail -n 5
exit "${PIPESTATUS[0]}"
