#!/usr/bin/env bash
#: stage  crosslang
#: about  independent implementations in Python's standard library against the extension (test/crosslang)
#: needs  server
#: runs   host chroot
#: order  130
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
rc=0
for t in test/crosslang/*.py; do python3 "$t" || rc=1; done
exit $rc
