#!/usr/bin/env python3
"""The docs stage, part 2: every repository path the docs and the code comments name exists.

  python3 test/docs/paths.py        (from anywhere; exit 1 listing file:line: path when one is missing)

Scans every tracked .md file (whole text) and the comments of tracked sources (.cpp .hpp .h .c .js
.go: // and /* */; .sql: -- and /* */; .py: # and docstrings; .sh and the scripts without extension
under test/, demo/, bench/, .ci/, examples/: #). A repository path is a token that starts with a
top-level tracked directory (src/, docs/, test/ ...) or is a top-level tracked file (README.md,
Makefile ...); a markdown link's target ([x](settings.md#bounds)) is resolved from the .md file's
directory, as GitHub does, and ignored when it leaves the repository (../shared/...). Placeholders
(<...>, *, {...}, $VAR, NN, MAJOR, ...) are not paths. A directory counts when it exists.
Without git (a copy of the tree, as in the Debian chroots) the tree is walked instead.
"""
import io
import os
import re
import subprocess
import sys
import tokenize

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# Paths that are not in the repository yet may be named: each is a build or run output (never
# tracked) or is outside the repository; a path under one is allowed too. Keep it short.
ALLOWED = {
    "examples/go/bin": "examples/go/build's default output directory (examples/go/.gitignore)",
    "src/backend": "PostgreSQL's source tree, not this repository's (src/fingerprints_fast.cpp)",
    "src/port": "PostgreSQL's source tree, not this repository's (test/cassert/build-server)",
}
# Frozen text that names the tree it was made from, not this one: its paths are history.
FROZEN = {
    "test/upgrade/idempotency--0.7.sql": "0.7's install as commit 51ad4b2 built it (never edited)",
    "test/upgrade/idempotency--0.7--0.8.sql": "0.8's update as commit 51ad4b2 built it (never edited)",
    "test/upgrade/idempotency--1.0.0.sql": "1.0.0's install as released (never edited)",
    "test/upgrade/idempotency--1.1.0.sql": "1.1.0's install as released (never edited)",
}
WALK_SKIP = {".git", "build", "results", "tmp_check", "log", "output_iso", "bin", "node_modules", "__pycache__"}
C_LIKE = (".cpp", ".hpp", ".h", ".c", ".js", ".go")
SCRIPT_DIRS = ("test/", "demo/", "bench/", ".ci/", "examples/")
PLACEHOLDER = re.compile(r"[<>*{}$…\[\]]|\.\.\.|(^|[/_.-])(N+|X+|NAME|LANG|MAJOR|MINOR|VERSION|FEATURE)([/_.-]|$)")
LINK = re.compile(r"\[[^\[\]]*\]\(([^()\s]+)\)")
URL = re.compile(r"^[A-Za-z][\w+.-]*:")


def git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, check=True, text=True).stdout


def git_files():
    """Tracked and untracked non-ignored files (what the chroots' copy holds); None without a
    repository of its own at ROOT (no git, no .git, or a copy inside another repository)."""
    try:
        if os.path.realpath(git("rev-parse", "--show-toplevel").strip()) != os.path.realpath(ROOT):
            return None
        out = git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        return sorted({f for f in out.split("\0") if f and os.path.lexists(os.path.join(ROOT, f))})
    except (OSError, subprocess.CalledProcessError):
        return None


def walk_files():
    files = []
    for d, dirs, names in os.walk(ROOT):
        dirs[:] = sorted(x for x in dirs if x not in WALK_SKIP and not x.startswith("build-"))
        names += [x for x in dirs if os.path.islink(os.path.join(d, x))]  # a link to a directory
        files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names if not n.endswith((".o", ".so", ".bc"))]
    return sorted(files)


FILES = git_files() or walk_files()
EXISTING = set(FILES)
for f in FILES:
    while "/" in f:
        f = os.path.dirname(f)
        EXISTING.add(f)
TOP = sorted({f.split("/")[0] + ("/" if "/" in f else "") for f in FILES}, key=len, reverse=True)
TOKEN = re.compile(r"(?<![\w./~@:-])(?:\./)?((?:%s)[\w./<>{}*$…+@\[\]-]*)" % "|".join(re.escape(t) for t in TOP))


def comments_c(text, sql=False):
    """(offset, comment) of // or -- comments and /* */ blocks, skipping string literals."""
    line = r"--[^\n]*" if sql else r"//[^\n]*"
    strings = r"'(?:''|[^'])*'" if sql else r"R\"([^(\s]*)\(.*?\)\1\"|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])'|`(?:\\.|[^`\\])*`"
    for m in re.finditer(r"(%s|/\*.*?\*/)|%s" % (line, strings), text, re.S):
        if m.group(1):
            yield m.start(), m.group(1)


def comments_hash(text):
    """# comments of a shell script: a # at the start of a word, outside quotes (line by line)."""
    offset = 0
    for ln in text.splitlines(keepends=True):
        for m in re.finditer(r"(?:^|(?<=\s))#", ln):
            before = ln[:m.start()]
            if before.count("'") % 2 == 0 and before.count('"') % 2 == 0:
                yield offset + m.start(), ln[m.start():]
                break
        offset += len(ln)


def comments_py(text):
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    prev = tokenize.NEWLINE
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            docstring = tok.type == tokenize.STRING and prev in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
            if tok.type == tokenize.COMMENT or docstring:
                yield starts[tok.start[0] - 1] + tok.start[1], tok.string
            if tok.type not in (tokenize.NL, tokenize.COMMENT):
                prev = tok.type
    except (tokenize.TokenError, SyntaxError):
        yield from comments_hash(text)


def regions(path, text):
    """The parts of a file to scan: (offset, text)."""
    if path.endswith(".md"):
        return [(0, text)]
    if path.endswith(C_LIKE):
        return list(comments_c(text))
    if path.endswith(".sql"):
        return list(comments_c(text, sql=True))
    if path.endswith(".py"):
        return list(comments_py(text))
    if path.endswith(".sh") or ("." not in os.path.basename(path) and path.startswith(SCRIPT_DIRS)
                                and text.startswith("#!")):
        return list(comments_hash(text))
    return []


def clean(p):
    p = p.split("#")[0]
    return p.rstrip(".,:;)'\"`")


def references(path, text):
    """(line, path as written, path from the root or None when outside the repository)."""
    lineno = lambda off: text.count("\n", 0, off) + 1
    for off, part in regions(path, text):
        if path.endswith(".md"):
            for m in LINK.finditer(part):
                target = clean(m.group(1))
                if target and not URL.match(target) and not PLACEHOLDER.search(target):
                    resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
                    yield lineno(off + m.start(1)), target, None if resolved.startswith("..") else resolved
            part = LINK.sub(lambda m: " " * len(m.group(0)), part)
        for m in TOKEN.finditer(part):
            p = clean(m.group(1))
            top = p if "/" not in p else p.split("/")[0] + "/"
            if p and top in TOP and not PLACEHOLDER.search(p):
                yield lineno(off + m.start(1)), p, os.path.normpath(p)


def exists(p):
    """A path exists when tracked, when it is under an ALLOWED path, or when it is the program
    built from p.cpp (demo/payment_demo)."""
    return p in EXISTING or p + ".cpp" in EXISTING or any(p == a or p.startswith(a + "/") for a in ALLOWED)


def main():
    checked, missing = 0, []
    for path in FILES:
        if path in FROZEN:
            continue
        try:
            with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        for line, written, resolved in references(path, text):
            if resolved is None:
                continue
            checked += 1
            if not exists(resolved):
                missing.append(f"{path}:{line}: {written}")
    print("\n".join(missing + [f"paths: {checked} references checked, {len(missing)} missing"]))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
