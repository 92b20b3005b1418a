#!/usr/bin/env bash
#: stage  docs
#: about  every object documented, every signature and snippet of README.md, DEVELOPERS.md and docs/ checked against the installed extension; every repository path the docs and comments name exists
#: needs  server
#: runs   host chroot
#: order  140
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
rc=0
python3 test/docs/doctest.py || rc=1
python3 test/docs/paths.py || rc=1
exit $rc
