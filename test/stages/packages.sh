#!/usr/bin/env bash
#: stage  packages
#: about  .deb of 15, 17, 18 by pg_buildext, lintian, apt-get install into fresh chroots without a compiler, smoke runs; META.json, make dist, pgxn install
#: needs  -
#: runs   host
#: order  210
#: prepare yes
# The packages stage: what a user installs, installed the way a user installs it.
#   1. META.json against the PGXN Meta spec v1 (test/packages/meta.py, with its self-test), and
#      the versions agreeing: META.json, debian/changelog's upstream version, default_version of
#      idempotency.control;
#   2. per major (15 bookworm, 17 trixie, 18 forky): the .deb built by pg_buildext
#      (dpkg-buildpackage, debian/) in a build chroot of that release, lintian over the source
#      and binary packages (any error or warning fails), then the package installed with
#      `apt-get install ./postgresql-NN-idempotency_*.deb` into a FRESH chroot of that release
#      (debootstrap minbase, unpacked anew each run: no compiler, checked before and after the
#      install) and its autopkgtest debian/tests/smoke run there (test/packages/smoke.sh): a cluster, CREATE EXTENSION, claim,
#      complete, replay, mismatch, inbox new + duplicate, outbox emit/next/done, a purge run by
#      pg_cron (postgresql-NN-cron from the archive);
#   `test/stages/packages.sh prepare` makes only the cached chroots.
#   3. PGXN: `make dist` (idempotency-VERSION.zip from git archive of HEAD), installed with
#      pgxnclient (`pgxn install`) in a build chroot (IDEM_PKG_PGXN_MAJOR, default 17), then
#      CREATE EXTENSION and a claim (test/packages/pgxn.sh).
# The fresh chroots' smoke runs go on in the background while the next major builds (pg_cron
# 1.4 on bookworm waits for the next minute). A major's builds run one after the other (-j2).
# Cache (IDEM_PKG_CACHE, default /var/tmp/idem-pkg): base-SUITE.tar, a pristine debootstrap
# minbase; build-SUITE/, the build chroot made from it (remade when its .idem-ready is missing);
# apt-SUITE/, the .debs apt downloaded, bind-mounted into the fresh chroots' apt cache;
# ccache-SUITE/, the compiler cache of the build chroot; out-SUITE/, the last run's packages,
# lintian output and logs. `rm -rf /var/tmp/idem-pkg` makes everything anew.
# Settings: IDEM_PKG_MAJORS (default "15 17 18"), IDEM_PKG_PGPORT (the clusters' port, default
# IDEM_PGPORT + 9; they listen on a socket in their chroot's /tmp only, no TCP, so the three run
# at once), IDEM_PKG_PGXN_MAJOR ("" skips PGXN), IDEM_PKG_FAULT (plants a fault to show the stage
# fails: no-so or no-control, a package without the module or the control file; bad-meta,
# META.json without its license; docs/internals.md "Packages"), IDEM_DEBIAN_MIRROR (as test/chroot).
# Needs root (debootstrap, chroot, mount) and the Debian archive.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
# --prepare (test/run-all --matrix, before this machine's stages): `prepare` below in the background.
if [ "${1:-}" = --prepare ]; then
    "$0" prepare >/tmp/idem-matrix-packages.log 2>&1 &
    exit 0
fi
CACHE=${IDEM_PKG_CACHE:-/var/tmp/idem-pkg}
MAJORS=${IDEM_PKG_MAJORS:-15 17 18}
PGXN_MAJOR=${IDEM_PKG_PGXN_MAJOR-17}
PORT=${IDEM_PKG_PGPORT:-$((${IDEM_PGPORT:-25329} + 9))}
FAULT=${IDEM_PKG_FAULT:-}
# What the build chroots hold besides the base: Build-Depends (dpkg-buildpackage checks them),
# lintian, ccache, and for the PGXN test pgxnclient and a server.
BUILD_PKGS="build-essential debhelper dpkg-dev postgresql-server-dev-all libssl-dev lintian ccache
            pgxnclient"

say() { echo "packages: $*"; }
fail() { echo "packages: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot, mount)"

suite_of() {
    case "$1" in
    15) echo bookworm ;; 17) echo trixie ;; 18) echo forky ;;
    *) fail "unsupported major '$1' (15, 17 or 18)" ;;
    esac
}

# The archive test/chroot uses: IDEM_DEBIAN_MIRROR, else this machine's apt source.
mirror() {
    if [ -n "${IDEM_DEBIAN_MIRROR:-}" ]; then echo "$IDEM_DEBIAN_MIRROR"; return; fi
    local uri
    uri=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
        grep -v -- '-security' | head -n 1 || true)
    [ -n "$uri" ] || uri=$(awk '$1 == "deb" && $3 !~ /security/ { print $2; exit }' \
        /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
    [ -n "$uri" ] || fail "cannot tell this machine's Debian archive (set IDEM_DEBIAN_MIRROR)"
    echo "$uri"
}

mount_all() { # dir
    mountpoint -q "$1/proc" || mount -t proc proc "$1/proc"
    mountpoint -q "$1/dev" || mount --rbind /dev "$1/dev"
    mount --make-rslave "$1/dev" 2>/dev/null || true
}

umount_all() { # dir
    # deepest first: the apt cache bind, then /dev's submounts, /proc
    awk -v d="$1/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
        umount -l "$m" 2>/dev/null || true
    done
}

in_root() { # dir command...: a clean environment, as test/chroot gives its chroots
    local dir=$1
    shift
    chroot "$dir" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
        DEBIAN_FRONTEND=noninteractive "$@"
}

# base-SUITE.tar: debootstrap minbase with the archive configured as test/chroot does (sources,
# forky's Valid-Until, no service starting, no default cluster); nothing else installed.
ensure_base() { # suite
    local suite=$1 tar=$CACHE/base-$1.tar tmp mir
    [ -f "$tar" ] && return
    command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; } ||
        fail "cannot install debootstrap"
    # Debian 12's debootstrap has no script for forky: sid's is the same procedure (test/chroot).
    [ -e "/usr/share/debootstrap/scripts/$suite" ] || ln -s sid "/usr/share/debootstrap/scripts/$suite"
    mir=$(mirror)
    tmp=$CACHE/base-$suite.tmp
    umount_all "$tmp"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    say "making the $suite base (debootstrap minbase from $mir)"
    debootstrap --variant=minbase "$suite" "$tmp" "$mir" >"$CACHE/base-$suite.log" 2>&1 ||
        { tail -n 20 "$CACHE/base-$suite.log" >&2; fail "debootstrap $suite failed (is $mir reachable?)"; }
    local sec=""
    [ "$suite" = bookworm ] &&
        sec="deb $mir $suite-updates main
deb ${mir%/debian}/debian-security $suite-security main"
    printf 'deb %s %s main\n%s\n' "$mir" "$suite" "$sec" >"$tmp/etc/apt/sources.list"
    rm -f "$tmp"/etc/apt/sources.list.d/*.sources
    [ "$suite" = forky ] && echo 'Acquire::Check-Valid-Until "false";' >"$tmp/etc/apt/apt.conf.d/99idem-valid-until"
    printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
    chmod +x "$tmp/usr/sbin/policy-rc.d"
    mkdir -p "$tmp/etc/postgresql-common"
    echo "create_main_cluster = false" >"$tmp/etc/postgresql-common/createcluster.conf"
    rm -rf "$tmp"/var/cache/apt/archives/*.deb
    tar -C "$tmp" -cf "$tar.part" . && mv "$tar.part" "$tar"
    rm -rf "$tmp"
}

# A new root from the base tarball (a half-unpacked one is removed first).
unpack() { # suite dir
    umount_all "$2"
    rm -rf "$2"
    mkdir -p "$2"
    tar -C "$2" -xf "$CACHE/base-$1.tar"
}

apt_opts() { # suite
    if [ "$1" = forky ]; then echo "-o Acquire::Check-Valid-Until=false"; fi
}

ensure_build() { # major suite
    local major=$1 suite=$2 dir=$CACHE/build-$2 lock
    [ -f "$dir/.idem-ready" ] && return
    # one maker at a time (`prepare` in the background, the stage): the others wait for it
    exec {lock}>"$CACHE/.lock-$suite"
    flock "$lock"
    if [ -f "$dir/.idem-ready" ]; then exec {lock}>&-; return; fi
    ensure_base "$suite"
    say "making the $suite build chroot"
    unpack "$suite" "$dir"
    mount_all "$dir"
    # shellcheck disable=SC2046,SC2086 # word splitting of the options and the package list
    { in_root "$dir" apt-get $(apt_opts "$suite") update -qq &&
        in_root "$dir" apt-get install -y -qq --no-install-recommends $BUILD_PKGS "postgresql-$major"; } \
        >"$CACHE/build-$suite.log" 2>&1 ||
        { umount_all "$dir"; tail -n 30 "$CACHE/build-$suite.log" >&2; fail "the $suite build chroot"; }
    umount_all "$dir"
    touch "$dir/.idem-ready"
    exec {lock}>&-
}

# The tree a clone holds (tracked files and new ones git does not ignore), as test/chroot copies it.
copy_tree() { # dest
    mkdir -p "$1"
    git ls-files -z --cached --others --exclude-standard | tar -C "$ROOT" --null -T - -cf - | tar -C "$1" -xf -
}

UPSTREAM=$(sed -n '1s/^[^(]*(\([^-)]*\)-[^)]*).*/\1/p' debian/changelog)
DEBVERSION=$(sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' debian/changelog)

# build_deb major suite: the .deb and lintian in the build chroot; out-SUITE/ gets the results.
build_deb() {
    local major=$1 suite=$2 dir=$CACHE/build-$2 out=$CACHE/out-$2
    local src=$dir/build/idempotency-$UPSTREAM
    rm -rf "$dir/build" "$out"
    mkdir -p "$out" "$CACHE/ccache-$suite" "$dir/var/cache/idem-ccache"
    copy_tree "$src"
    # 3.0 (quilt): the upstream tarball is the tree without debian/.
    tar -C "$dir/build" --exclude="idempotency-$UPSTREAM/debian" -czf "$dir/build/idempotency_$UPSTREAM.orig.tar.gz" \
        "idempotency-$UPSTREAM"
    mount_all "$dir"
    mount --bind "$CACHE/ccache-$suite" "$dir/var/cache/idem-ccache"
    local rc=0
    # pg_buildext updatecontrol: debian/control for the majors this release ships (debian/pgversions).
    in_root "$dir" env CCACHE_DIR=/var/cache/idem-ccache PATH=/usr/lib/ccache:/usr/sbin:/usr/bin:/sbin:/bin \
        DEB_BUILD_OPTIONS=parallel=2 bash -c "cd /build/idempotency-$UPSTREAM && pg_buildext updatecontrol &&
            dpkg-buildpackage -us -uc" >"$out/build.log" 2>&1 || rc=$?
    if [ $rc != 0 ]; then
        umount_all "$dir"
        tail -n 40 "$out/build.log" >&2
        fail "$suite: dpkg-buildpackage failed (rc $rc; $out/build.log)"
    fi
    local deb=postgresql-${major}-idempotency_${DEBVERSION}_amd64.deb
    [ -f "$dir/build/$deb" ] || { umount_all "$dir"; fail "$suite: no $deb built ($(ls "$dir/build"))"; }
    # lintian over the .changes: the source package and the binary; errors and warnings fail.
    in_root "$dir" bash -c "cd /build && lintian --info --display-info --fail-on error,warning \
        idempotency_${DEBVERSION}_amd64.changes" >"$out/lintian.txt" 2>&1 || rc=$?
    [ -n "$FAULT" ] && case $FAULT in no-so | no-control) plant "$dir" "$deb" "$major" || rc=$? ;; esac
    umount_all "$dir"
    cp "$dir/build/$deb" "$out/"
    sed 's/^/    /' "$out/lintian.txt"
    [ $rc = 0 ] || fail "$suite: lintian reports errors or warnings ($out/lintian.txt) or the fault failed"
    say "$suite: built $deb, lintian clean"
}

# The planted faults: the package rebuilt without the module or without the control file.
plant() { # dir deb major
    local what
    case $FAULT in
    no-so) what="usr/lib/postgresql/$3/lib/idempotency.so" ;;
    no-control) what="usr/share/postgresql/$3/extension/idempotency.control" ;;
    esac
    say "planting fault $FAULT: removing /$what from $2"
    in_root "$1" bash -c "cd /build && rm -rf fault && dpkg-deb -R $2 fault && rm fault/$what &&
        sed -i '\\:/$what\$:d' fault/DEBIAN/md5sums && dpkg-deb -b fault $2 >/dev/null"
}

# smoke major suite (in the background): a fresh chroot, apt-get install of the .deb, smoke.sh.
smoke() {
    local major=$1 suite=$2 fresh=$CACHE/fresh-$2 out=$CACHE/out-$2
    local deb=postgresql-${major}-idempotency_${DEBVERSION}_amd64.deb
    unpack "$suite" "$fresh"
    mount_all "$fresh"
    mkdir -p "$CACHE/apt-$suite" "$fresh/tmp/pkg"
    mount --bind "$CACHE/apt-$suite" "$fresh/var/cache/apt/archives"
    cp "$out/$deb" "$fresh/tmp/pkg/"
    # the autopkgtest (debian/tests/smoke) runs test/packages/smoke.sh for the installed major
    mkdir -p "$fresh/tmp/pkg/src/debian/tests" "$fresh/tmp/pkg/src/test/packages"
    cp debian/changelog "$fresh/tmp/pkg/src/debian/"
    cp debian/tests/smoke "$fresh/tmp/pkg/src/debian/tests/"
    cp test/packages/smoke.sh "$fresh/tmp/pkg/src/test/packages/"
    local rc=0
    # shellcheck disable=SC2046 # the options
    in_root "$fresh" bash -c "set -e
        for c in cc gcc g++ c++ clang; do ! command -v \$c || { echo 'a compiler before the install: '\$c; exit 1; }; done
        apt-get $(apt_opts "$suite") update -qq
        cd /tmp/pkg && apt-get install -y -qq ./$deb postgresql-$major-cron >/tmp/pkg/apt.log 2>&1 ||
            { tail -n 30 /tmp/pkg/apt.log; exit 1; }
        cd /tmp/pkg/src && IDEM_PKG_PGPORT=$PORT exec sh debian/tests/smoke" >"$out/smoke.log" 2>&1 || rc=$?
    cp "$fresh/tmp/pkg/apt.log" "$out/apt.log" 2>/dev/null || true
    umount_all "$fresh"
    [ "${IDEM_PKG_KEEP:-}" = 1 ] || rm -rf "$fresh"
    return $rc
}

pgxn() { # major suite zip
    local major=$1 suite=$2 dir=$CACHE/build-$2 out=$CACHE/out-pgxn rc=0
    rm -rf "$out" "$dir/pgxn"
    mkdir -p "$out" "$dir/pgxn"
    cp "$3" test/packages/pgxn.sh "$dir/pgxn/"
    mount_all "$dir"
    mkdir -p "$CACHE/ccache-$suite" "$dir/var/cache/idem-ccache"
    mount --bind "$CACHE/ccache-$suite" "$dir/var/cache/idem-ccache"
    in_root "$dir" bash /pgxn/pgxn.sh "$major" "$PORT" "/pgxn/$(basename "$3")" "$UPSTREAM" >"$out/pgxn.log" 2>&1 || rc=$?
    umount_all "$dir"
    return $rc
}

mkdir -p "$CACHE"
started=$SECONDS
# `packages.sh prepare`: only the cached chroots (network and disk; test/run-all --matrix runs it
# in the background while this machine's stages run).
if [ "${1:-}" = prepare ]; then
    for major in $MAJORS; do ensure_build "$major" "$(suite_of "$major")"; done
    say "build chroots ready ($((SECONDS - started)) s)"
    exit 0
fi

# 1. META.json and the versions.
meta=META.json
if [ "$FAULT" = bad-meta ]; then
    meta=$CACHE/META-fault.json
    python3 -c 'import json,sys; m=json.load(open("META.json")); del m["license"]; json.dump(m, open(sys.argv[1], "w"))' "$meta"
fi
python3 test/packages/meta.py --self-test >/dev/null || fail "test/packages/meta.py --self-test"
python3 test/packages/meta.py "$meta" || fail "$meta is not valid against the PGXN Meta spec v1"
meta_version=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' META.json)
control_version=$(sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" idempotency.control)
[ "$meta_version" = "$UPSTREAM" ] || fail "META.json says $meta_version, debian/changelog $UPSTREAM"
[ "$control_version" = "$UPSTREAM" ] ||
    fail "idempotency.control's default_version is $control_version, the packages' version $UPSTREAM"
say "META.json valid, version $meta_version everywhere"

# 2. per major: build (foreground, the CPU), smoke (background).
smoke_pids=()
smoke_names=()
for major in $MAJORS; do
    suite=$(suite_of "$major")
    t=$SECONDS
    ensure_build "$major" "$suite"
    build_deb "$major" "$suite"
    say "$suite: build chroot and package in $((SECONDS - t)) s"
    smoke "$major" "$suite" &
    smoke_pids+=($!)
    smoke_names+=("$major")
done

# 3. PGXN.
pgxn_rc=0
if [ -n "$PGXN_MAJOR" ]; then
    t=$SECONDS
    make -s dist >/dev/null || fail "make dist"
    zip=idempotency-$UPSTREAM.zip
    [ -f "$zip" ] || fail "make dist made no $zip"
    suite=$(suite_of "$PGXN_MAJOR")
    ensure_build "$PGXN_MAJOR" "$suite"
    pgxn "$PGXN_MAJOR" "$suite" "$ROOT/$zip" || pgxn_rc=$?
    sed 's/^/    /' "$CACHE/out-pgxn/pgxn.log"
    say "pgxn: $zip installed with pgxnclient on $PGXN_MAJOR: rc $pgxn_rc ($((SECONDS - t)) s)"
fi

bad=()
for i in "${!smoke_pids[@]}"; do
    rc=0
    wait "${smoke_pids[$i]}" || rc=$?
    major=${smoke_names[$i]}
    suite=$(suite_of "$major")
    sed 's/^/    /' "$CACHE/out-$suite/smoke.log"
    if [ $rc = 0 ]; then say "$major ($suite): installed into a fresh chroot with apt, smoke run passed"; else
        say "$major ($suite): FAILED (rc $rc, $CACHE/out-$suite/smoke.log)"
        bad+=("$major")
    fi
done
[ $pgxn_rc = 0 ] || bad+=(pgxn)
say "took $((SECONDS - started)) s"
[ ${#bad[@]} = 0 ] || fail "failed: ${bad[*]}"
say "ok: majors $MAJORS${PGXN_MAJOR:+, PGXN on $PGXN_MAJOR}"
