#!/usr/bin/env bash
#: stage  programs
#: about  the libpqxx programs of test/programs and the README demos against the cluster
#: needs  server programs
#: runs   host chroot
#: order  180
#: parts  yes
#: tests  test/programs/%.cpp
# test/stages/programs.sh --parts   the programs of the build (IDEM_BUILD), one per line: the ones
#                                 that leave the cluster alone, the README demos, then the ones
#                                 that restart or crash it (failover_test is the failover stage's)
#                                 (IDEM_TESTS: only the programs it names, in its order:
#                                 test/run-all programs kill_test)
# test/stages/programs.sh NAME      runs build/NAME --ci
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${IDEM_BUILD:-build}
RESTARTS_CLUSTER="kill_test recovery_test crash_test outbox_fault_test"
if [ "${1:-}" = --parts ] && [ -n "${IDEM_TESTS:-}" ]; then
    # shellcheck disable=SC2086 # a list of words, split on purpose
    printf '%s\n' $IDEM_TESTS
    exit 0
fi
if [ "${1:-}" = --parts ]; then
    for t in "$BUILD"/*_test; do
        [ -x "$t" ] || continue
        case " $RESTARTS_CLUSTER failover_test " in *" $(basename "$t") "*) continue ;; esac
        basename "$t"
    done
    for name in payment_demo inbox_demo purchase_demo $RESTARTS_CLUSTER; do
        [ -x "$BUILD/$name" ] && echo "$name"
    done
    exit 0
fi
exec "$BUILD/${1:?usage: test/stages/programs.sh --parts | NAME}" --ci
