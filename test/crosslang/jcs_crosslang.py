#!/usr/bin/env python3
"""Cross-language proof for request fingerprints.

An independent RFC 8785 (JCS) implementation in Python's standard library computes SHA-256
fingerprints of the shared vectors and of generated variants (keys reordered, re-spaced,
numbers re-written), and compares them with idempotency.idem_fingerprint(text) and idempotency.idem_fingerprint(jsonb)
computed by the server (through psql; connection from PGHOST/PGPORT/PGUSER). It creates and
drops its own database, crosslang_test. Prints a count line; exits non-zero on any mismatch.
It also checks that it can fail: a deliberately altered payload must not match.
"""
import hashlib
import json
import math
import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VECTORS = os.path.join(ROOT, "test", "vectors", "jcs")
DB = "crosslang_test"


# --- independent JCS --------------------------------------------------------------------------

def _no_duplicates(pairs):
    names = [k for k, _ in pairs]
    if len(names) != len(set(names)):
        raise ValueError("duplicate member name")
    return dict(pairs)


def _reject_constant(name):
    raise ValueError("NaN/Infinity are not JSON")


def parse(text):
    """Strict parse: duplicates and NaN/Infinity rejected; numbers kept as text."""
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant,
                      parse_float=lambda s: ("num", s), parse_int=lambda s: ("num", s))


def es_number(x):
    """ECMAScript Number.prototype.toString of a finite double."""
    if x == 0:
        return "0"
    if math.isinf(x) or math.isnan(x):
        raise ValueError("number out of range")
    sign = "-" if x < 0 else ""
    r = repr(abs(x))  # Python's repr is the shortest round-tripping decimal
    if "e" in r:
        mant, exp = r.split("e")
        exp = int(exp)
    else:
        mant, exp = r, 0
    if "." in mant:
        ip, fp = mant.split(".")
    else:
        ip, fp = mant, ""
    digits = (ip + fp).lstrip("0")
    point = len(ip) + exp - (len(ip + fp) - len((ip + fp).lstrip("0")))
    digits = digits.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        s = digits + "0" * (n - k)
    elif 0 < n <= 21:
        s = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        s = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        s = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + s


def es_string(s):
    out = ['"']
    for ch in s:
        c = ord(ch)
        if 0xD800 <= c <= 0xDFFF:
            raise ValueError("lone surrogate")
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif c < 0x20:
            out.append("\\u%04x" % c)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def canonical(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, tuple):  # ("num", text)
        return es_number(float(v[1]))
    if isinstance(v, str):
        return es_string(v)
    if isinstance(v, list):
        return "[" + ",".join(canonical(x) for x in v) + "]"
    if isinstance(v, dict):
        keys = sorted(v.keys(), key=lambda k: k.encode("utf-16-be"))
        return "{" + ",".join(es_string(k) + ":" + canonical(v[k]) for k in keys) + "}"
    raise TypeError(type(v))


def fingerprint(text):
    return hashlib.sha256(canonical(parse(text)).encode("utf-8")).hexdigest()


# --- payloads ---------------------------------------------------------------------------------

def to_text(v, rng, spaced):
    """Serialises a parsed value with shuffled keys, random spacing and re-written numbers."""
    sp = (lambda: rng.choice(["", " ", "\n  ", "\t"])) if spaced else (lambda: "")
    if isinstance(v, dict):
        items = list(v.items())
        rng.shuffle(items)
        return "{" + sp() + ("," + sp()).join(
            json.dumps(k) + sp() + ":" + sp() + to_text(x, rng, spaced) for k, x in items) + sp() + "}"
    if isinstance(v, list):
        return "[" + sp() + ("," + sp()).join(to_text(x, rng, spaced) for x in v) + sp() + "]"
    if isinstance(v, tuple):
        return renumber(v[1], rng)
    return json.dumps(v, ensure_ascii=rng.random() < 0.5)


def renumber(t, rng):
    """Another spelling of the same double: 1 -> 1.0 / 1e0 / 10e-1 (exactly the same value)."""
    x = float(t)
    choices = [t, repr(x)]
    if x == int(x) and abs(x) < 1e15:
        i = int(x)
        choices += [str(i) + ".0", str(i) + ".00", str(i) + "e0", str(i * 10) + "e-1"]
    return rng.choice(choices)


def payloads():
    rng = random.Random(8785)
    out = []
    for name in sorted(os.listdir(os.path.join(VECTORS, "input"))):
        with open(os.path.join(VECTORS, "input", name), encoding="utf-8") as f:
            out.append(("vector " + name, f.read()))
    base = [
        '{"amount":1.0,"currency":"EUR","items":[{"sku":"x","qty":1e0,"price":19.99}],'
        '"customer":{"id":"c_42","name":"Zo\\u00eb \\ud83d\\ude00","tags":["a","\\u00e9",""]},'
        '"flags":[true,false,null],"ratio":0.1,"big":1e21,"small":1e-7,"neg":-0,"e":2.5e-3}',
        '{"\\ue000":1,"\\ud83d\\ude00":2,"\\u00e9":3,"a":4,"":5,"A":6,"aa":7,"\\u0080":8}',
        '[1,1.5,-2.25,100,1e2,123456789,0.000001,5e-324,1.7976931348623157e308,333333333.33333329]',
        '{"nested":{"deeper":{"deepest":[{"k":"v","j":[[],{}]}]}},"s":"line\\nbreak\\ttab\\u0001"}',
        '"just a string"', '42', 'true', 'null', '{}', '[]',
    ]
    for i, b in enumerate(base):
        out.append(("base %d" % i, b))
    for name, text in list(out):
        v = parse(text)
        for j in range(4):
            out.append(("%s variant %d" % (name, j), to_text(v, rng, spaced=j % 2 == 1)))
    return out


# --- server -----------------------------------------------------------------------------------

def psql(db, sql, stdin=None):
    r = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql],
                       input=stdin, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("psql failed: " + r.stderr.strip())
    return r.stdout


def server_fingerprints(items):
    """(text fp, jsonb fp) per payload, in one round trip through a temporary table."""
    rows = "".join(json.dumps([i, t]) + "\n" for i, (_, t) in enumerate(items))
    # psql: COPY FROM STDIN reads the data that follows the command in the script.
    body = ("CREATE TEMP TABLE p(r jsonb);\n"
            "COPY p FROM STDIN WITH (FORMAT csv, QUOTE e'\\x01', DELIMITER e'\\x02');\n" +
            rows + "\\.\n" +
            "SELECT (r->>0)::int, encode(idempotency.idem_fingerprint(r->>1), 'hex'), "
            "encode(idempotency.idem_fingerprint((r->>1)::jsonb), 'hex') FROM p ORDER BY 1;\n")
    r = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", DB, "-f", "-"],
                       input=body, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("psql failed: " + r.stderr.strip())
    out = {}
    for line in r.stdout.strip().splitlines():
        i, ft, fj = line.split("|")
        out[int(i)] = (ft, fj)
    return [out[i] for i in range(len(items))]


def main():
    items = payloads()
    psql("postgres", "DROP DATABASE IF EXISTS " + DB)
    psql("postgres", "CREATE DATABASE " + DB + " ENCODING 'UTF8' TEMPLATE template0")
    try:
        psql(DB, "CREATE EXTENSION idempotency")
        # The self-check: an altered payload (one value changed) must give another fingerprint.
        altered_src = '{"amount":1.0,"currency":"EUR"}'
        altered = '{"amount":1.01,"currency":"EUR"}'
        items.append(("self-check: altered", altered))
        server = server_fingerprints(items)
        mismatches = 0
        for (name, text), (ft, fj) in zip(items, server):
            ours = fingerprint(altered_src if name == "self-check: altered" else text)
            if name == "self-check: altered":
                if ft == ours or fj == ours:
                    print("FAIL: an altered payload matched the original fingerprint")
                    mismatches += 1
                continue
            if ft != ours or fj != ours:
                mismatches += 1
                print("MISMATCH %s\n  payload %r\n  python %s\n  text   %s\n  jsonb  %s" %
                      (name, text[:200], ours, ft, fj))
        n = len(items) - 1
        groups = len({fingerprint(t) for name, t in items[:-1]})
        print("crosslang jcs: %d payloads (%d distinct fingerprints), %d compared twice "
              "(text and jsonb), %d mismatches; altered-payload self-check %s" %
              (n, groups, n, mismatches, "ok" if mismatches == 0 else "see above"))
        return 1 if mismatches else 0
    finally:
        psql("postgres", "DROP DATABASE IF EXISTS " + DB)


if __name__ == "__main__":
    sys.exit(main())
