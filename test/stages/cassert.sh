#!/usr/bin/env bash
#: stage  cassert
#: about  the module (ASan+UBSan) under a --enable-cassert server: regress, isolation, races, the fault suite
#: needs  programs
#: runs   host
#: order  250
#: prepare yes
# The module under an assertion-enabled server, with AddressSanitizer + UndefinedBehaviorSanitizer
# in the server and in the module. Proves that the suites' paths through the access methods
# (src/direct_access.cpp, src/records_direct.cpp, src/inbox.cpp), the custom scan
# (src/records_claim_scan.cpp) and the module's locks break none of PostgreSQL's Assert()s, write
# past no palloc chunk (CLOBBER_FREED_MEMORY, MEMORY_CONTEXT_CHECKING), leak no buffer pin,
# relcache reference or snapshot, and that the module's C++ does no out-of-bounds access, use
# after free or undefined behaviour on those paths.
#   1. test/cassert/build-server: the server (cached under /var/tmp/idem-cassert);
#   2. the module built against it with -fsanitize=address,undefined -fno-sanitize-recover=all,
#      in a copy of the tree (/var/tmp/idem-cassert/<version>/module; the host's in-tree build and
#      install are untouched), installed into that server's prefix;
#   3. a cluster of that server (test/pgcluster, its own port and directory, pg_cron and the module
#      preloaded, max_stack_depth 6MB), then: regress (make installcheck, without test/regress/sql/memory.sql:
#      its RSS check cannot hold under ASan), isolation, the races stage
#      (test/stages/races.sh) and the libpqxx fault suite (the client programs in $IDEM_BUILD,
#      which test/run-all builds; missing ones: the suite is reported as not run, a failure);
#   4. the verdict: any suite failing, or in the server log (a client program's sanitizer report
#      fails its suite): an assertion failure (TRAP:), a sanitizer
#      report, "detected write past chunk end", a resource leak warning, a PANIC, or a process
#      that died of a signal other than SIGKILL (kill_test, recovery_test and outbox_fault_test
#      SIGKILL backends and relays on purpose; a failed Assert or a sanitizer report is SIGABRT,
#      abort_on_error=1). The offending lines are printed.
# Settings: IDEM_CASSERT_PGPORT (default IDEM_PGPORT + 1, else 54330), IDEM_CASSERT_OUT (the logs,
# default /tmp/idem-cassert-<port>, kept after the run), IDEM_CASSERT_SUITES (default
# "regress isolation races client"), IDEM_CASSERT_CLIENTS (the client programs, default
# "faults_test recovery_test outbox_fault_test"), IDEM_BUILD (default build/).
# Needs root (the build).
# shellcheck disable=SC2317 # the suites' functions are called through timed
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
# --prepare (test/run-all --matrix, before this machine's stages): the server's packages in the
# foreground (two apt-get installs at once would fight over dpkg's lock), then the server itself
# (13 minutes of CPU when not cached) in the background at a lower priority than the tests; the
# stage waits for it.
if [ "${1:-}" = --prepare ]; then
    { test/install-deps && test/cassert/build-server --tools; } >/tmp/idem-matrix-cassert.log 2>&1 &&
        { nice -n 10 test/cassert/build-server >>/tmp/idem-matrix-cassert.log 2>&1 & }
    exit 0
fi
BUILD=${IDEM_BUILD:-$ROOT/build}
PORT=${IDEM_CASSERT_PGPORT:-$((${IDEM_PGPORT:-25329} + 1))}
OUT=${IDEM_CASSERT_OUT:-/tmp/idem-cassert-$PORT}
SUITES=${IDEM_CASSERT_SUITES:-regress isolation races client}
# The client programs that restart or crash the cluster run last (as in test/run-all).
RESTARTS_CLUSTER="kill_test recovery_test crash_test outbox_fault_test"
failures=()

say() { printf '\n--- cassert: %s\n' "$*"; }
fail() { failures+=("$1"); echo "cassert: FAILED: $1"; }

# Copies the tracked and untracked-not-ignored files into dir, rewriting only files whose content
# differs (a fresh mtime, so make rebuilds exactly those), and removes files no longer in the tree.
tree_files() { # the tree's files: git's list, else (a copy without .git, as in test/chroot) all
    # but what .gitignore names
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files -co --exclude-standard
    else
        find . -type f ! -name '*.o' ! -name '*.so' ! -name '*.bc' ! -path './build*' \
            ! -path './results/*' ! -path './regression.*' ! -path './tmp_check/*' ! -path './log/*' \
            ! -path './idempotency--*.sql' ! -path './test/isolation/results/*' \
            ! -path './test/isolation/output_iso/*' ! -path '*/__pycache__/*' | sed 's|^\./||'
    fi
}

sync_tree() { # dir
    local dst=$1 f
    mkdir -p "$dst"
    tree_files | sort >"$dst/.files.new"
    while IFS= read -r f; do
        [ -f "$f" ] || continue
        cmp -s "$f" "$dst/$f" && continue
        mkdir -p "$dst/$(dirname "$f")"
        cp "$f" "$dst/$f"
    done <"$dst/.files.new"
    if [ -f "$dst/.files" ]; then
        comm -23 "$dst/.files" "$dst/.files.new" | while IFS= read -r f; do rm -f "$dst/$f"; done
    fi
    mv "$dst/.files.new" "$dst/.files"
}

build_module() { # prefix dir
    local prefix=$1 dir=$2 so
    sync_tree "$dir"
    # From clean (about 20 s of CPU): objects kept from an earlier run were built with the flags
    # of then, and an incremental build once hid a -Werror failure that a fresh machine met.
    make -C "$dir" -s PG_CONFIG="$prefix/bin/pg_config" clean >/dev/null 2>&1 || true
    # CFLAGS/CXXFLAGS of that server carry the sanitizers; PGXS adds them to the module's.
    # IDEM_WERROR=1: a warning fails the build, as in every build of test/run-all.
    if ! { make -C "$dir" -s -j2 PG_CONFIG="$prefix/bin/pg_config" IDEM_WERROR=1 &&
        "$dir/test/upgrade/scripts" prune "$prefix/bin/pg_config" &&
        make -C "$dir" -s PG_CONFIG="$prefix/bin/pg_config" install; } >"$OUT/module-build.log" 2>&1; then
        tail -n 30 "$OUT/module-build.log"
        return 1
    fi
    so="$("$prefix/bin/pg_config" --pkglibdir)/idempotency.so"
    # The module really is instrumented: it calls into both runtimes.
    local syms
    syms=$(nm -D --undefined-only "$so")
    grep -q __asan_report <<<"$syms" ||
        { echo "cassert: $so has no AddressSanitizer instrumentation"; return 1; }
    grep -q __ubsan_handle <<<"$syms" ||
        { echo "cassert: $so has no UndefinedBehaviorSanitizer instrumentation"; return 1; }
}

# Reports go to stderr: the server's to its log (scanned below), a client program's to the
# suite's output (that suite fails). A report ends the process (SIGABRT), as in PostgreSQL's
# CI. No leak detection: PostgreSQL leaks by design (memory contexts, exit without freeing).
sanitizer_env() {
    chmod 755 "$OUT"
    export ASAN_OPTIONS="print_stacktrace=1:abort_on_error=1:detect_leaks=0:detect_stack_use_after_return=0"
    export UBSAN_OPTIONS="print_stacktrace=1:abort_on_error=1:halt_on_error=1"
}

timed() { # name command... ; runs a suite, records its time and verdict
    local name=$1 t0=$SECONDS rc
    shift
    say "$name"
    "$@"
    rc=$?
    printf 'cassert: %s: %s in %d s\n' "$name" "$([ $rc = 0 ] && echo ok || echo FAILED)" $((SECONDS - t0))
    [ "$rc" = 0 ] || fail "$name"
}

# regress without test/regress/sql/memory.sql: it measures the backend's RSS, which ASan's
# quarantine of freed memory keeps high (rss_back_within_20_mb is f); the other 19 files run as they are.
run_regress() { # prefix dir
    local rc tests
    tests=$(find test/regress/sql -name '*.sql' ! -name memory.sql -printf '%f\n' | sed 's/\.sql$//' | sort | tr '\n' ' ')
    "$2/test/upgrade/scripts" add "$1/bin/pg_config" || return 1
    # ISOLATION= : the specs run once, in run_isolation
    make -C "$2" -s PG_CONFIG="$1/bin/pg_config" REGRESS="$tests" ISOLATION= installcheck 2>&1 | tail -n 40
    rc=${PIPESTATUS[0]}
    "$2/test/upgrade/scripts" remove "$1/bin/pg_config" || rc=1
    [ "$rc" = 0 ] || { [ -f "$2/regression.diffs" ] && head -n 200 "$2/regression.diffs"; }
    return "$rc"
}

run_isolation() { # prefix dir
    local specs rc pgxs
    pgxs=$(dirname "$("$1/bin/pg_config" --pgxs)")/..
    specs=$(find test/isolation/specs -name '*.spec' -printf '%f\n' | sed 's/\.spec$//' | sort)
    mkdir -p "$2/test/isolation/output_iso"
    # shellcheck disable=SC2086 # one argument per spec
    "$pgxs/test/isolation/pg_isolation_regress" --inputdir=test/isolation \
        --outputdir="$2/test/isolation/output_iso" --bindir="$1/bin" \
        --dbname=isolation_regression --load-extension=idempotency $specs 2>&1 | tail -n 40
    rc=${PIPESTATUS[0]}
    [ "$rc" = 0 ] || head -n 200 "$2/test/isolation/output_iso/regression.diffs" 2>/dev/null
    return "$rc"
}

run_client() { # name ; one libpqxx program of the fault suite, --ci
    local t="$BUILD/$1"
    [ -x "$t" ] || { echo "cassert: $t missing (test/run-all builds it with IDEM_CLIENTS=ON)"; return 1; }
    "$t" --ci
}

# The fault suite's programs, the ones restarting the cluster last. Not concurrency_test,
# kill_test and crash_test by default: under ASan they take 3.5, over 6 and ~2 minutes (the CI
# budget), crash_test's orphan check counts on a restart finishing within its timing, and what
# they drive at the server is in the races, isolation, faults_test and recovery_test runs as well
# (all of them run on the ordinary server in the programs stage).
CLIENTS=${IDEM_CASSERT_CLIENTS:-faults_test recovery_test outbox_fault_test}
client_names() {
    local n
    for n in $CLIENTS; do
        case " $RESTARTS_CLUSTER " in *" $n "*) ;; *) echo "$n" ;; esac
    done
    for n in $CLIENTS; do
        case " $RESTARTS_CLUSTER " in *" $n "*) echo "$n" ;; esac
    done
}

# The verdict on the logs. A SIGKILL (signal 9) is the tests' own doing; every other signal is a
# crash (SIGABRT: a failed Assert or a sanitizer report; SIGSEGV ...).
scan_logs() { # server-log
    local log=$1 bad
    bad=$(grep -a -E 'TRAP:|runtime error:|AddressSanitizer|UndefinedBehaviorSanitizer|detected write past chunk end|problem in alloc set|leak:|reference leak|still active|PANIC:|terminated by signal ([0-8]|[1-9][0-9])\b|terminated by exception' "$log" |
        grep -a -v -E 'terminated by signal 9\b' || true)
    if [ -n "$bad" ]; then
        echo "cassert: the server log ($log) says:"
        echo "$bad" | head -n 40
        # a sanitizer report's first frames: where it happened
        grep -a -A 8 -m 1 -E 'ERROR: AddressSanitizer|runtime error:' "$log" | grep -a -E '^ *#[0-9]|of size|runtime error' | head -n 8
        fail "server log"
    fi
}

main() {
    local prefix rc work
    [ "$(id -u)" = 0 ] || { echo "cassert: needs root (builds under /var/tmp, runs the server as postgres)"; return 77; }
    rm -rf "$OUT"
    mkdir -p "$OUT"
    say "the server: test/cassert/build-server"
    local t0=$SECONDS
    prefix=$(test/cassert/build-server)
    rc=$?
    [ "$rc" = 0 ] || return $rc # 77: cannot build it here
    printf 'cassert: server %s (%d s)\n' "$prefix" $((SECONDS - t0))
    export ASAN_OPTIONS=detect_leaks=0 # pg_config, run by PGXS, leaks by design
    work="$(dirname "$prefix")/module"
    say "the module, -fsanitize=address,undefined, in $work"
    t0=$SECONDS
    build_module "$prefix" "$work" || return 1
    printf 'cassert: module built and installed into %s (%d s)\n' "$prefix" $((SECONDS - t0))

    sanitizer_env
    export PATH="$prefix/bin:$PATH" IDEM_PGPORT=$PORT IDEM_PGDIR=$OUT/cluster
    # ASan's frames are larger: test/regress/sql/hostile.sql's 10,000-deep jsonb needs more than the default
    # 2 MB of max_stack_depth (the stack's limit is 8 MB).
    export IDEM_PGCONF="max_stack_depth = 6MB"
    test/pgcluster stop >/dev/null 2>&1
    eval "$(test/pgcluster start)" || return 1
    export PGHOST PGPORT PGUSER PGDATABASE
    trap 'cp "$IDEM_PGDIR/server.log" "$OUT/server.log" 2>/dev/null; test/pgcluster stop >/dev/null 2>&1' EXIT
    [ "$(psql -AtX -c 'SHOW debug_assertions')" = on ] || { echo "cassert: the server has no assertions"; return 1; }
    echo "cassert: cluster on port $PORT, $(psql -AtX -c 'SELECT version()' | cut -d, -f1), debug_assertions on"

    local s n
    for s in $SUITES; do
        case $s in
        regress) timed regress run_regress "$prefix" "$work" ;;
        isolation) timed isolation run_isolation "$prefix" "$work" ;;
        races) timed races test/stages/races.sh ;;
        client) for n in $(client_names); do timed "client:$n" run_client "$n"; done ;;
        *) fail "unknown suite $s" ;;
        esac
    done

    cp "$IDEM_PGDIR/server.log" "$OUT/server.log"
    say "the server log: $OUT/server.log"
    scan_logs "$OUT/server.log"
    if [ ${#failures[@]} != 0 ]; then
        echo "cassert: ${#failures[@]} failure(s): ${failures[*]}"
        return 1
    fi
    echo "cassert: every suite passed; no assertion failure, sanitizer report or crash in the logs"
}

main "$@"
exit $?
