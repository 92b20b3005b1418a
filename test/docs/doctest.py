#!/usr/bin/env python3
"""The docs stage: the documentation against the installed extension (docs/testing.md "Docs").

  test/docs/doctest.py [--show] [FILE.md ...]     default: README.md DEVELOPERS.md docs/**/*.md

1. Coverage. Every function, procedure, view and type of the extension (pg_depend) has a
   "### name" heading in docs/, every overload of every function and procedure has a signature
   block (```sql signature) whose argument modes, names, types, defaults and return type are the
   installed ones, every idempotency.* setting has a heading in docs/settings.md, every SQLSTATE
   the sources raise is in docs/sqlstates.md, and every idem_* / idempotency.* name the docs
   mention exists.
2. Snippets, the way doctest runs them. Each page runs in a fresh database (IDEM_DOCS_DB,
   default "shop") with the extension; its ```sql blocks run in order, each in its own psql
   session (psql -X -q, VERBOSITY verbose without LOCATION lines, SHOW_CONTEXT never,
   client_min_messages warning, TimeZone UTC); a block must succeed unless an ```output block
   follows it, and then its output must match that block (alignment and blank lines aside;
   ```output varies=col,... ignores those columns). ```python blocks of a page run in one
   interpreter, and an ```output block after one is compared with what it printed.
   ```sql skip: REASON blocks are not run (the reason is required).
--show prints every block's actual output (for writing the output blocks; check them by hand).
Needs psql and the connection environment (PGHOST, PGPORT, PGUSER) of a running server with the
extension installed. Exit status 0 when everything holds.
"""
import glob
import itertools
import json
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DB = os.environ.get("IDEM_DOCS_DB", "shop")
ADMIN_DB = os.environ.get("IDEM_DOCS_ADMIN_DB", "postgres")
SESSION_OPTIONS = "-c client_min_messages=warning -c TimeZone=UTC -c DateStyle=ISO,YMD -c lc_messages=C"
failures = []


def fail(where, msg):
    failures.append(f"{where}: {msg}")
    print(f"FAIL {where}: {msg}")


# ---------------------------------------------------------------------------------------------
# Markdown: fenced blocks with their info strings and line numbers.

FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*(.*)$")


class Block:
    def __init__(self, path, line, lang, attrs, text):
        self.path, self.line, self.lang, self.attrs, self.text = path, line, lang, attrs, text
        self.output = None  # the ```output block that follows, if any

    @property
    def where(self):
        return f"{os.path.relpath(self.path, ROOT)}:{self.line}"


def blocks_of(path):
    out, lines = [], open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(fence) and lines[i].strip().strip(fence[0]) == ""):
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            i += 1
        i += 1
        lang, _, attrs = info.partition(" ")
        out.append(Block(path, start, lang.lower(), attrs.strip(), "\n".join(body) + "\n"))
    # attach each output block to the runnable block before it
    result, prev = [], None
    for b in out:
        if b.lang == "output":
            if prev is None or prev.output is not None or not runnable(prev):
                fail(b.where, "an ```output block must follow a runnable ```sql or ```python block")
            else:
                prev.output = b
            continue
        result.append(b)
        prev = b
    return result


def runnable(b):
    return b.lang in ("sql", "python") and b.attrs == ""


def headings_of(path):
    names = set()
    for line in open(path, encoding="utf-8"):
        m = re.match(r"^#{2,4}\s+(.*?)\s*$", line)
        if m:
            names.add(m.group(1).replace("`", "").strip())
    return names


# ---------------------------------------------------------------------------------------------
# psql

def psql(db, sql, extra=(), options=SESSION_OPTIONS):
    env = dict(os.environ, PGOPTIONS=options, PGTZ="UTC")
    return subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", db, *extra],
                          input=sql, capture_output=True, text=True, env=env)


def query(db, sql):
    """Rows of a catalogue query (unaligned, tuples only, fields split on the unit separator)."""
    r = psql(db, sql, ["-A", "-t", "-F", "\x1f"])
    if r.returncode != 0:
        raise SystemExit(f"doctest: query failed: {r.stderr.strip()}\n{sql}")
    return [line.split("\x1f") for line in r.stdout.split("\n") if line != ""]


# IDEM_DOCS_OWNER_ATTACK=1 (the security stage): each page's database belongs to a role that is
# no superuser, which plants its overloads of every routine and view of the extension in public and
# in a schema of its own and sets the database's search path to them (test/security/owner_decoys.sql)
# after CREATE EXTENSION; the snippets then run as ever, and a page fails when any decoy ran. An
# ```output owner-decoys-listed block (a query that lists such objects) is not compared then.
OWNER = "idem_docs_owner" if os.environ.get("IDEM_DOCS_OWNER_ATTACK") == "1" else None


def fresh_database(role_names=()):
    r = psql(ADMIN_DB, f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE);')
    if r.returncode != 0:
        raise SystemExit(f"doctest: {r.stderr.strip()}")
    for role in role_names:  # roles are cluster-wide: the page's own, left by an earlier run
        psql(ADMIN_DB, f'DROP ROLE IF EXISTS "{role}";')
    owner = ""
    if OWNER:
        psql(ADMIN_DB, f'DROP ROLE IF EXISTS "{OWNER}"; CREATE ROLE "{OWNER}" LOGIN;')
        owner = f' OWNER "{OWNER}"'
    r = psql(ADMIN_DB, f'CREATE DATABASE "{DB}"{owner};')
    r2 = psql(DB, "CREATE EXTENSION idempotency;") if r.returncode == 0 else r
    if r2.returncode == 0 and OWNER:
        # as the owner, who may not set lc_messages
        r2 = psql(DB, open(os.path.join(ROOT, "test", "security", "owner_decoys.sql")).read(), ["-U", OWNER],
                  options="-c client_min_messages=warning")
    if r2.returncode != 0:
        raise SystemExit(f"doctest: cannot make database {DB}: {r.stderr.strip()} {r2.stderr.strip()}")


def owner_decoys_fired(path):
    """Fails the page when a decoy of the database owner ran (IDEM_DOCS_OWNER_ATTACK)."""
    planted = query(DB, "SELECT count(*) FROM public.owner_decoys")[0][0]
    fired = query(DB, "SELECT name || ' as ' || who FROM public.owner_decoy_fired ORDER BY at")
    owner_attack["planted"] += int(planted)
    owner_attack["pages"] += 1
    for (what,) in fired:
        fail(os.path.relpath(path, ROOT), f"the database owner's decoy {what} ran")


owner_attack = {"planted": 0, "pages": 0}


# ---------------------------------------------------------------------------------------------
# Output comparison

SEP = re.compile(r"^-+(\+-+)*$")
FOOTER = re.compile(r"^\(\d+ rows?\)$")
PSQL_PREFIX = re.compile(r"^psql:[^:]*:\d+: ")


def normalize(text, varies=()):
    lines = []
    for line in text.split("\n"):
        line = PSQL_PREFIX.sub("", line.rstrip())
        if line.strip() == "" or line.startswith("LOCATION:"):
            continue
        lines.append(line)
    out, cols = [], None
    for line in lines:
        s = line.strip()
        if SEP.match(s) and out:
            cols = [c.strip() for c in out[-1].split("|")]
            out[-1] = " | ".join(cols)
            out.append("+".join("-" for _ in cols))
            continue
        if FOOTER.match(s):
            cols = None
            out.append(s)
            continue
        if cols is not None:
            cells = [c.strip() for c in line.split("|")]
            if len(cells) == len(cols):
                cells = ["*" if cols[j] in varies else c for j, c in enumerate(cells)]
            out.append(" | ".join(cells))
            continue
        out.append(s)
    return out


def varies_of(attrs):
    m = re.search(r"varies=(\S+)", attrs)
    return set(m.group(1).split(",")) if m else set()


def compare(block, actual):
    exp = normalize(block.output.text, varies_of(block.output.attrs))
    act = normalize(actual, varies_of(block.output.attrs))
    if exp == act:
        return True
    import difflib
    diff = "\n".join(difflib.unified_diff(exp, act, "expected (docs)", "actual", lineterm="", n=2))
    fail(block.where, "output differs:\n" + diff)
    return False


# ---------------------------------------------------------------------------------------------
# Snippets

PY_DRIVER = r"""
import contextlib, io, json, sys, traceback
blocks = json.load(sys.stdin)
env, outs = {"__name__": "__doc__"}, []
for code in blocks:
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            exec(compile(code, "<doc>", "exec"), env)
    except Exception:
        buf.write(traceback.format_exc())
        outs.append({"out": buf.getvalue(), "ok": False})
        break
    outs.append({"out": buf.getvalue(), "ok": True})
json.dump(outs, sys.stdout)
"""


def run_page(path, blocks, show):
    sql = [b for b in blocks if b.lang == "sql"]
    py = [b for b in blocks if b.lang == "python"]
    for b in sql + py:
        if b.attrs.startswith("skip") and not re.match(r"skip:\s*\S", b.attrs):
            fail(b.where, "a skipped block needs a reason: ```%s skip: REASON" % b.lang)
        elif b.attrs and not b.attrs.startswith(("skip", "signature")):
            fail(b.where, f"unknown block attributes '{b.attrs}'")
    run_sql = [b for b in sql if runnable(b)]
    run_py = [b for b in py if runnable(b)]
    if not run_sql and not run_py:
        return 0, 0
    ran = 0
    if run_sql:
        roles = sorted(set(re.findall(r"(?i)\bCREATE\s+ROLE\s+(\w+)", "".join(b.text for b in run_sql))))
        fresh_database(roles)
        for b in run_sql:
            r = psql(DB, b.text, ["-v", "VERBOSITY=verbose", "-v", "SHOW_CONTEXT=never"])
            actual = r.stdout + r.stderr
            ran += 1
            if show:
                print(f"----- {b.where}\n{actual}", end="")
            if b.output is not None and not (OWNER and "owner-decoys-listed" in b.output.attrs):
                compare(b, actual)
            elif r.returncode != 0:
                fail(b.where, "the snippet failed:\n" + actual.strip())
        if OWNER:
            owner_decoys_fired(path)
        psql(ADMIN_DB, f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE);')
        for role in roles:
            psql(ADMIN_DB, f'DROP ROLE IF EXISTS "{role}";')
    if run_py:
        r = subprocess.run([sys.executable, "-c", PY_DRIVER], input=json.dumps([b.text for b in run_py]),
                           capture_output=True, text=True)
        outs = json.loads(r.stdout) if r.returncode == 0 else []
        for b, o in itertools.zip_longest(run_py, outs):
            if o is None:
                fail(b.where, "not run (an earlier python block failed)" + (": " + r.stderr if r.stderr else ""))
                continue
            ran += 1
            if show:
                print(f"----- {b.where}\n{o['out']}", end="")
            if b.output is not None:
                compare(b, o["out"])
            elif not o["ok"]:
                fail(b.where, "the snippet failed:\n" + o["out"])
    return ran, len([b for b in sql + py if b.attrs.startswith("skip")])


# ---------------------------------------------------------------------------------------------
# Signatures: "name(arg, ...) [RETURNS type]"; an argument is "[IN|OUT|INOUT] name type
# [DEFAULT expr]", and "a | b" inside one argument gives alternatives ("secret text | secrets
# text[]", "payload text | bytea"), one overload each.

def split_top(s, sep=","):
    parts, depth, quote, cur = [], 0, False, []
    i = 0
    while i < len(s):
        c = s[i]
        if quote:
            cur.append(c)
            if c == "'":
                quote = False
        elif c == "'":
            quote = True
            cur.append(c)
        elif c in "([":
            depth += 1
            cur.append(c)
        elif c in ")]":
            depth -= 1
            cur.append(c)
        elif depth == 0 and s.startswith(sep, i):
            parts.append("".join(cur))
            cur = []
            i += len(sep)
            continue
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip() != ""]


def parse_arg(text, inherit_name=None):
    m = re.match(r"(?is)^(?:(IN|OUT|INOUT|VARIADIC)\s+)?(.*?)(?:\s+DEFAULT\s+(.*))?$", text.strip())
    mode = (m.group(1) or "IN").upper()
    rest, default = m.group(2).strip(), m.group(3)
    words = rest.split(None, 1)
    if len(words) == 2:
        name, typ = words
    elif inherit_name is not None:
        name, typ = inherit_name, rest
    else:
        name, typ = "", rest
    return (mode, name, typ.strip(), default.strip() if default else None)


def expand_args(arglist):
    choices = []
    for a in split_top(arglist):
        alts = split_top(a, "|")
        first = parse_arg(alts[0])
        choices.append([first] + [parse_arg(x, first[1]) for x in alts[1:]])
    return [list(c) for c in itertools.product(*choices)]


SIG = re.compile(r"(?is)(?:^|\n)\s*(?:(FUNCTION|PROCEDURE)\s+)?([a-z_][a-z0-9_.]*)\s*\(")


def parse_signatures(block):
    """[(name, kind or None, [args], returns or None, where)] of a signature block."""
    text, sigs, pos = block.text, [], 0
    while True:
        m = SIG.search(text, pos)
        if not m:
            break
        kind, name = (m.group(1) or "").upper() or None, m.group(2).split(".")[-1]
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        args = text[m.end():i - 1]
        tail = re.match(r"(?is)\s*(?:RETURNS\s+(.*?))?\s*(?=;|\n\s*\n|\n\s*(?:FUNCTION\s+|PROCEDURE\s+)?[a-z_][a-z0-9_.]*\s*\(|$)",
                        text[i:])
        ret = re.sub(r"\s+", " ", tail.group(1)).strip() if tail and tail.group(1) else None
        line = block.line + text[:m.start()].count("\n") + (1 if text[m.start()] == "\n" else 0)
        for alt in expand_args(args):
            sigs.append((name, kind, alt, ret, f"{os.path.relpath(block.path, ROOT)}:{line}"))
        pos = i + (tail.end() if tail else 0)
    return sigs


def installed_routines():
    # the extension's types as the signature blocks write them: unqualified
    rows = query(DB, """
        SET search_path = pg_catalog, idempotency;
        SELECT p.oid, p.proname, p.prokind, pg_get_function_arguments(p.oid),
               coalesce(pg_get_function_result(p.oid), ''),
               pg_get_function_identity_arguments(p.oid)
        FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
        JOIN pg_proc p ON p.oid = d.objid
        WHERE d.classid = 'pg_proc'::regclass AND d.refclassid = 'pg_extension'::regclass
          AND d.deptype = 'e' AND e.extname = 'idempotency'
        ORDER BY p.proname, p.oid""")
    out = []
    for oid, name, kind, args, result, ident in rows:
        out.append({"oid": oid, "name": name, "kind": "PROCEDURE" if kind == "p" else "FUNCTION",
                    "args": [parse_arg(a) for a in split_top(args)], "result": result,
                    "ident": f"{name}({ident})", "decl": f"{name}({args})" + (f" RETURNS {result}" if result else "")})
    return out


class TypeNames:
    """Server-normalised type names (to_regtype + format_type), asked in batches."""

    def __init__(self):
        self.cache = {}

    def load(self, names):
        todo = sorted({n for n in names if n not in self.cache})
        if not todo:
            return
        values = ",".join("(%s)" % quote(n) for n in todo)
        for t, f in query(DB, f"SELECT t, coalesce(format_type(to_regtype(t), NULL), '?' || t) FROM (VALUES {values}) v(t)"):
            self.cache[t] = f

    def __getitem__(self, n):
        return self.cache[n]


def quote(s):
    return "'" + s.replace("'", "''") + "'"


def setof_split(r):
    r = r.strip()
    if r.upper().startswith("SETOF "):
        return True, r[6:].strip()
    return False, r


def check_signatures(doc_blocks, routines):
    sigs = [s for b in doc_blocks if b.lang == "sql" and b.attrs == "signature" for s in parse_signatures(b)]
    types = TypeNames()
    types.load([a[2] for s in sigs for a in s[2]] + [a[2] for r in routines for a in r["args"]] +
               [setof_split(s[3])[1] for s in sigs if s[3]] + [setof_split(r["result"])[1] for r in routines if r["result"]])
    # defaults are compared by value: (doc)::type IS NOT DISTINCT FROM (installed)
    default_pairs = []

    def args_key(args):
        return [(m, n, types[t]) for m, n, t, _ in args]

    matched = set()
    for name, kind, args, ret, where in sigs:
        cands = [r for r in routines if r["name"] == name]
        if not cands:
            fail(where, f"signature of {name}(...): no such function or procedure is installed")
            continue
        same = [r for r in cands if args_key(r["args"]) == args_key(args)]
        if not same:
            fail(where, f"signature {name}({', '.join(' '.join(x for x in a[:3] if x != 'IN') for a in args)}) "
                        f"matches no installed overload; installed:\n    " + "\n    ".join(r["decl"] for r in cands))
            continue
        r = same[0]
        matched.add(r["oid"])
        if kind and kind != r["kind"]:
            fail(where, f"{name} is a {r['kind'].lower()}, not a {kind.lower()}")
        if r["kind"] == "PROCEDURE":
            if ret:
                fail(where, f"{name} is a procedure: no RETURNS")
        else:
            if not ret:
                fail(where, f"{name}: RETURNS missing (installed: {r['result']})")
            else:
                ds, dt = setof_split(ret)
                isetof, it = setof_split(r["result"])
                if ds != isetof or types[dt] != types[it]:
                    fail(where, f"{name}: RETURNS {ret}, installed RETURNS {r['result']}")
        for (m, n, t, d), (_, _, it, idf) in zip(args, r["args"]):
            if (d is None) != (idf is None):
                fail(where, f"{name}: argument {n}: " + (f"installed DEFAULT {idf}, the docs give none" if d is None
                                                          else f"DEFAULT {d} in the docs, installed has none"))
            elif d is not None:
                default_pairs.append((where, name, n, t, d, idf))
    if default_pairs:
        values = ",".join("(%d, (%s)::%s IS NOT DISTINCT FROM (%s))" % (i, d, types[t], idf)
                          for i, (_, _, _, t, d, idf) in enumerate(default_pairs))
        r = psql(DB, f"SELECT i, ok FROM (VALUES {values}) v(i, ok) WHERE NOT ok", ["-A", "-t"])
        if r.returncode != 0:
            fail("signatures", "cannot compare the defaults: " + r.stderr.strip())
        for line in r.stdout.split():
            where, name, n, t, d, idf = default_pairs[int(line.split("|")[0])]
            fail(where, f"{name}: argument {n} DEFAULT {d} in the docs, installed DEFAULT {idf}")
    for r in routines:
        if r["oid"] not in matched:
            fail("docs/", f"no signature block documents {r['kind'].lower()} {r['ident']}; installed: {r['decl']}")
    return len(sigs)


# ---------------------------------------------------------------------------------------------
# Coverage of objects, settings, SQLSTATEs and names

def check_objects(doc_files, routines):
    heads = set()
    for f in doc_files:
        heads |= headings_of(f)
    objs = query(DB, """
        SELECT 'view', c.relname FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
          JOIN pg_class c ON c.oid = d.objid
         WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e' AND e.extname = 'idempotency'
           AND c.relkind = 'v'
        UNION ALL
        SELECT 'table', n.nspname || '.' || c.relname FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
          JOIN pg_class c ON c.oid = d.objid JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e' AND e.extname = 'idempotency'
           AND c.relkind = 'r'
        UNION ALL
        SELECT 'type', t.typname FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
          JOIN pg_type t ON t.oid = d.objid
         WHERE d.classid = 'pg_type'::regclass AND d.deptype = 'e' AND e.extname = 'idempotency'
           -- not array types, nor the row types of tables and views (members themselves on 17+)
           AND t.typcategory <> 'A'
           AND (t.typrelid = 0 OR (SELECT c.relkind FROM pg_class c WHERE c.oid = t.typrelid) = 'c')""")
    names = {(r["kind"].lower(), r["name"]) for r in routines} | {(k, n) for k, n in objs}
    n = 0
    for kind, name in sorted(names):
        n += 1
        if name not in heads and f"type {name}" not in heads and f"view {name}" not in heads \
                and f"table {name}" not in heads:
            fail("docs/", f"{kind} {name} has no '### {name}' heading")
    return n, {nm for _, nm in names}


def check_settings(doc_files):
    settings = [r[0] for r in query(DB, "SELECT name FROM pg_settings WHERE name LIKE 'idempotency.%' ORDER BY 1")]
    path = os.path.join(ROOT, "docs", "settings.md")
    heads = headings_of(path) if os.path.exists(path) else set()
    for s in settings:
        if s not in heads:
            fail("docs/settings.md", f"setting {s} has no '### {s}' heading")
    return settings


def check_sqlstates():
    """Every SQLSTATE the sources raise appears in docs/sqlstates.md as `CODE`."""
    inc = subprocess.run(["pg_config", "--includedir-server"], capture_output=True, text=True).stdout.strip()
    macro = {}
    for m in re.finditer(r"#define (ERRCODE_\w+)\s+MAKE_SQLSTATE\('(.)','(.)','(.)','(.)','(.)'\)",
                         open(os.path.join(inc, "utils", "errcodes.h")).read()):
        macro[m.group(1)] = "".join(m.group(i) for i in range(2, 7))
    sources = [p for p in glob.glob(os.path.join(ROOT, "src", "**", "*"), recursive=True) +
               glob.glob(os.path.join(ROOT, "core", "**", "*"), recursive=True)
               if p.endswith((".cpp", ".hpp", ".h", ".sql"))]
    text = {p: open(p, encoding="utf-8").read() for p in sources}
    named = {}  # core constants: sqlstate::name -> code
    for t in text.values():
        for m in re.finditer(r'constexpr const char \*(\w+) = "([0-9A-Z]{5})"', t):
            named[m.group(1)] = m.group(2)
    codes = {}
    for p, t in text.items():
        t = re.sub(r"//[^\n]*|--[^\n]*", "", t)  # not the comments
        found = [macro[m] for m in re.findall(r"\b(ERRCODE_\w+)", t) if m in macro]
        found += [m for m in re.findall(r"ERRCODE\s*=\s*'([0-9A-Z]{5})'", t)]
        found += ["".join(m) for m in re.findall(r"MAKE_SQLSTATE\('(.)', '(.)', '(.)', '(.)', '(.)'\)", t)]
        found += [named[m] for m in re.findall(r"sqlstate::(\w+)", t) if m in named]
        for c in found:
            codes.setdefault(c, os.path.relpath(p, ROOT))
    path = os.path.join(ROOT, "docs", "sqlstates.md")
    doc = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    for c, where in sorted(codes.items()):
        if f"`{c}`" not in doc:
            fail("docs/sqlstates.md", f"SQLSTATE {c} (raised in {where}) is not listed")
    return codes


def metric_names():
    """The Prometheus metrics monitoring/postgres_exporter.yml defines: query_column for each
    column that is not a LABEL (read without a YAML library: its top-level keys, its columns)."""
    names, query, column = set(), None, None
    for line in open(os.path.join(ROOT, "monitoring", "postgres_exporter.yml"), encoding="utf-8"):
        if m := re.match(r"^([a-z_]+):\s*$", line):
            query = m.group(1)
        elif m := re.match(r"^\s+- ([a-z_]+):\s*$", line):
            column = m.group(1)
        elif (m := re.match(r'^\s+usage: "([A-Z]+)"', line)) and m.group(1) != "LABEL":
            names.add(f"{query}_{column}")
    return names


# the languages of the client packages' code blocks (their module names start with idempotency.)
CLIENT_LANGS = {"js", "javascript", "go", "python", "py"}


def check_names(doc_files, known, settings):
    """idem_* and idempotency.* names in prose and in blocks that are not run must exist (a run
    block is checked by running it); an idem_* name may also be a metric of the queries file."""
    known = known | metric_names()
    # the relations of schema idempotency (tables, indexes, sequences), as installed
    tables = {r[0] for r in query(DB, "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                                      "WHERE n.nspname = 'idempotency'")}
    channels = {"idem_outbox"}  # the NOTIFY channel of idem_outbox_emit (idempotency.outbox_notify)
    files = {"control", "so", "cpp", "hpp", "sql"}
    for f in doc_files:
        fence = None
        for no, line in enumerate(open(f, encoding="utf-8"), 1):
            m = FENCE.match(line)
            if m and fence is None:
                lang, _, attrs = m.group(3).strip().partition(" ")
                fence = (m.group(2), lang.lower() in ("sql", "python", "output") and not attrs.strip().startswith("skip"),
                         lang.lower() in CLIENT_LANGS)
                continue
            if m and fence is not None and line.strip().strip(fence[0][0]) == "":
                fence = None
                continue
            if fence is not None and fence[1]:
                continue
            for m in re.finditer(r"\bidem_[a-z0-9_]+\b", line):
                if m.group(0) not in known and m.group(0) not in channels:
                    fail(f"{os.path.relpath(f, ROOT)}:{no}", f"{m.group(0)} is not installed")
            # in a client language's block, idempotency.express is the package, not a name of ours
            client_code = fence is not None and fence[2]
            for m in ([] if client_code else re.finditer(r"\bidempotency\.([a-z_]+)\b", line)):
                if m.group(1) not in tables and m.group(1) not in files and m.group(0) not in settings \
                        and m.group(1) not in known:
                    fail(f"{os.path.relpath(f, ROOT)}:{no}", f"{m.group(0)} is neither a setting, a table nor an object of the extension")


# ---------------------------------------------------------------------------------------------

def main(argv):
    show = "--show" in argv
    args = [a for a in argv if a != "--show"]
    docs = sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    files = [os.path.abspath(a) for a in args] or [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "DEVELOPERS.md")] + docs
    all_blocks = {f: blocks_of(f) for f in set(files) | set(docs)}
    fresh_database()
    routines = installed_routines()
    nobj, known = check_objects(docs, routines)
    nsig = check_signatures([b for f in docs for b in all_blocks[f]], routines)
    settings = check_settings(docs)
    codes = check_sqlstates()
    # the contributors' pages name test databases (idem_catalog, idem_metrics) and repository
    # files (debian/postgresql-idempotency.lintian-overrides), not objects of the extension
    contributors = {os.path.join(ROOT, "docs", p) for p in ("internals.md", "testing.md")}
    check_names([f for f in files if (f in docs and f not in contributors) or f.endswith("README.md")], known, settings)
    print(f"docs: {nobj} objects, {len(routines)} routines, {nsig} signatures, {len(settings)} settings, "
          f"{len(codes)} SQLSTATEs checked")
    total_run = total_skip = 0
    for f in files:
        ran, skipped = run_page(f, all_blocks[f], show)
        total_run += ran
        total_skip += skipped
        if ran or skipped:
            print(f"docs: {os.path.relpath(f, ROOT)}: {ran} snippets run, {skipped} skipped")
    print(f"docs: {total_run} snippets run, {total_skip} skipped, {len(failures)} failures")
    if OWNER:
        print(f"docs: the database owner's attack: {owner_attack['planted']} decoys planted in "
              f"{owner_attack['pages']} page databases, none ran" if not failures else
              "docs: the database owner's attack: see the failures above")
        if owner_attack["pages"] == 0:
            fail("docs", "the database owner's attack ran on no page")
        psql(ADMIN_DB, f'DROP ROLE IF EXISTS "{OWNER}";')
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
