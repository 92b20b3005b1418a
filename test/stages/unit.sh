#!/usr/bin/env bash
#: stage  unit
#: about  GoogleTest over the core (core/, no server), and the boundary lint
#: needs  cmake
#: runs   host chroot
#: order  20
# ctest over the CMake build of test/run-all (IDEM_BUILD).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ctest --test-dir "${IDEM_BUILD:-build}" --output-on-failure -j2 2>&1 | tail -n 15
exit "${PIPESTATUS[0]}"
