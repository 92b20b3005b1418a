#!/usr/bin/env bash
#: stage  webhooks_diff
#: about  the official webhook libraries (npm) against the extension
#: needs  server deps:webhooks
#: runs   host chroot
#: order  150
# The webhooks_diff stage: the extension's webhook signatures against the
# official libraries (npm standardwebhooks, svix, stripe), test/webhooks/diff.js. The packages
# come from the npm registry at the versions of test/webhooks/package-lock.json (`npm ci`),
# into IDEM_WH_NODE_CACHE (default /var/tmp/idem-webhooks-node), reused while the lock file is
# unchanged. Then a self-check: the same run with a planted fault (IDEM_WH_PLANT=1: stale
# timestamps accepted) must fail.
# Needs node and npm (test/install-deps webhooks) and the cluster of test/run-all (PG*).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
CACHE=${IDEM_WH_NODE_CACHE:-/var/tmp/idem-webhooks-node}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "webhooks_diff: node and npm are needed (test/install-deps webhooks)" >&2
    exit 1
fi
# Node uses its own list of authorities; add the system's (which test/chroot keeps in step with
# this machine's additions).
[ -n "${NODE_EXTRA_CA_CERTS:-}" ] || [ ! -f /etc/ssl/certs/ca-certificates.crt ] ||
    export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
stamp=$(sha256sum test/webhooks/package-lock.json | cut -d' ' -f1)
if [ "$(cat "$CACHE/.stamp" 2>/dev/null)" != "$stamp" ] || [ ! -d "$CACHE/node_modules" ]; then
    echo "webhooks_diff: npm ci into $CACHE"
    if ! { rm -rf "$CACHE" && mkdir -p "$CACHE" &&
        cp test/webhooks/package.json test/webhooks/package-lock.json "$CACHE/" &&
        (cd "$CACHE" && npm ci --no-audit --no-fund --loglevel=error >/dev/null); }; then
        echo "webhooks_diff: npm ci failed (on SELF_SIGNED_CERT_IN_CHAIN, trust the intercepting proxy's CA: DEVELOPERS.md, \"The two commands\")" >&2
        exit 1
    fi
    echo "$stamp" >"$CACHE/.stamp"
else
    echo "webhooks_diff: packages from $CACHE (lock file unchanged)"
fi
export NODE_PATH=$CACHE/node_modules
node test/webhooks/diff.js || exit 1
echo "webhooks_diff: self-check, a planted fault (stale timestamps accepted) must fail"
if IDEM_WH_PLANT=1 IDEM_WH_CASES=${IDEM_WH_PLANT_CASES:-1000} node test/webhooks/diff.js >/tmp/idem-webhooks-plant.log 2>&1; then
    echo "webhooks_diff: the planted fault was not caught" >&2
    cat /tmp/idem-webhooks-plant.log >&2
    exit 1
fi
grep -E 'UNLISTED' /tmp/idem-webhooks-plant.log | head -n 2 | cut -c 1-300 | sed 's/^/  (planted) /'
echo "webhooks_diff: the planted fault was caught:" \
    "$(grep -oE '[0-9]+ unlisted disagreement\(s\)' /tmp/idem-webhooks-plant.log) with it"
