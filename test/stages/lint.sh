#!/usr/bin/env bash
#: stage  lint
#: about  clang-format over the C++, shellcheck over the shell, pyflakes3 over the Python, gofmt and go vet over the Go, eslint over the JavaScript, test/drift over what is written twice; each check's self-test
#: needs  deps:lint
#: runs   host
#: order  10
# test/lint over the tree (with IDEM_LINT_BASE=<commit>, also the commit subjects since then),
# then its self-test (a planted fault per check), then the test command's own checks: a mistyped
# stage is an error, not an empty green run, and the registry of test/stages/ is whole.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
rc=0
python3 test/lint || rc=1
python3 test/lint --self-test | tail -n 1
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
# what is written twice (table shapes, purge conditions, the purge round) held equal
python3 test/drift || rc=1
python3 test/drift --self-test || rc=1
test/run-all nosuchstage >/dev/null 2>&1
[ $? = 2 ] || { echo "lint: test/run-all nosuchstage did not exit 2"; rc=1; }
[ "$(test/run-all --list | awk '{print $1}' | grep -c -x -e regress -e citus)" = 2 ] ||
    { echo "lint: test/run-all --list does not name regress and citus"; rc=1; }
test/run-all --check-registry || rc=1
# The registry's own planted faults, each in a copy of test/stages/: a new stage file is all a new
# stage takes (--list names it, in its order), and each broken declaration is refused.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plant() { # NAME: a copy of test/stages/ in $tmp/NAME
    mkdir -p "$tmp/$1" && cp -p test/stages/*.sh "$tmp/$1/"
}
plant added
printf '#!/usr/bin/env bash\n#: stage  zz_new\n#: about  a planted stage\n#: needs  -\n#: runs   host\n#: order  15\nexit 0\n' >"$tmp/added/zz_new.sh"
chmod +x "$tmp/added/zz_new.sh"
[ "$(IDEM_STAGES_DIR=$tmp/added test/run-all --list | awk '{print $1}' | sed -n 2p)" = zz_new ] ||
    { echo "lint: a stage file added to the registry is not listed second (order 15)"; rc=1; }
caught=0
for fault in undeclared wrong-name same-order bad-needs bad-runs no-about; do
    plant "$fault"
    f=$tmp/$fault/cron.sh
    case $fault in
    undeclared) sed -i '/^#: /d' "$f" ;;
    wrong-name) sed -i 's/^#: stage  cron/#: stage  crontab/' "$f" ;;
    same-order) sed -i 's/^#: order  50/#: order  40/' "$f" ;;
    bad-needs) sed -i 's/^#: needs  server/#: needs  srever/' "$f" ;;
    bad-runs) sed -i 's/^#: runs   host chroot/#: runs   hots chroot/' "$f" ;;
    no-about) sed -i '/^#: about/d' "$f" ;;
    esac
    if IDEM_STAGES_DIR=$tmp/$fault test/run-all --check-registry >/dev/null 2>&1; then
        echo "lint: the registry check missed the planted fault $fault"; rc=1
    elif IDEM_STAGES_DIR=$tmp/$fault test/run-all unit >/dev/null 2>&1; [ $? != 2 ]; then
        echo "lint: test/run-all did not refuse to run with the planted fault $fault (exit 2)"; rc=1
    else
        caught=$((caught + 1))
    fi
done
echo "registry self-test: a planted stage listed; $caught of 6 planted faults caught"
exit $rc
