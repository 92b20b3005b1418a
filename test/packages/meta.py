#!/usr/bin/env python3
"""META.json against the PGXN Meta Spec v1 (https://pgxn.org/spec/), Python standard library only.

  python3 test/packages/meta.py [META.json]   exit 0 when valid, else each violation and exit 1
  python3 test/packages/meta.py --self-test   plants one violation per rule into a copy of the
                                              repository's META.json; each must be reported

Checks: the required keys (name, abstract, version, maintainer, license, provides, meta-spec) and
the types of every key the spec defines; Terms (name, extension and prerequisite names: two or
more characters, no slash, backslash, space or control character); versions as SemVer; version
ranges of prereqs; the license strings the spec knows; URIs in resources; no unknown key but
x_ / X_ ones; and that every file and docfile named in provides exists in the distribution (the
directory of META.json)."""
import json
import os
import re
import sys

SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
                    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")
TERM = re.compile(r"^[^/\\\s\x00-\x1f\x7f]{2,}$")
TAG = re.compile(r"^[^/\\\x00-\x1f\x7f]{1,255}$")
URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:[^\s]+$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")
RANGE_PART = re.compile(r"^\s*(?:(==|!=|>=|<=|>|<)\s*)?(.+?)\s*$")
LICENSES = {
    "agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd", "freebsd", "gfdl_1_2",
    "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1", "lgpl_3_0", "mit", "mozilla_1_0",
    "mozilla_1_1", "openssl", "perl_5", "postgresql", "qpl_1_0", "ssleay", "sun", "zlib",
    "open_source", "restricted", "unrestricted", "unknown",
}
TOP = {"name", "abstract", "version", "maintainer", "license", "provides", "meta-spec",
       "description", "generated_by", "tags", "no_index", "prereqs", "release_status", "resources"}
REQUIRED = ["name", "abstract", "version", "maintainer", "license", "provides", "meta-spec"]
PHASES = {"configure", "build", "test", "runtime", "develop"}
RELATIONS = {"requires", "recommends", "suggests", "conflicts"}


def custom(key):
    return re.match(r"^[xX]_.", key) is not None


def check(meta, root):
    errors = []

    def err(path, msg):
        errors.append(f"{path}: {msg}")

    def string(path, v, nonempty=True):
        if not isinstance(v, str) or (nonempty and not v):
            err(path, f"must be a non-empty string, is {v!r}")
            return False
        return True

    def term(path, v):
        if string(path, v) and not TERM.match(v):
            err(path, f"{v!r} is not a Term (2+ characters, no slash, backslash, space, control character)")

    def semver(path, v):
        if string(path, v) and not SEMVER.match(v):
            err(path, f"{v!r} is not a SemVer version")

    def uri(path, v):
        if string(path, v) and not URI.match(v):
            err(path, f"{v!r} is not a URI")

    def keys(path, obj, allowed, required=()):
        if not isinstance(obj, dict):
            err(path, f"must be an object, is {type(obj).__name__}")
            return False
        for k in required:
            if k not in obj:
                err(path, f"the required key {k!r} is missing")
        for k in obj:
            if k not in allowed and not custom(k):
                err(path, f"unknown key {k!r} (custom keys start with x_)")
        return True

    def version_range(path, v):
        if v == 0:
            return
        if not isinstance(v, str) or not v.strip():
            err(path, f"must be 0 or a version range string, is {v!r}")
            return
        for part in v.split(","):
            m = RANGE_PART.match(part)
            if not m or not (m.group(2) == "0" or SEMVER.match(m.group(2))):
                err(path, f"{part.strip()!r} in {v!r} is not [op] SemVer")

    def path_in_dist(path, v):
        if not string(path, v):
            return
        if v.startswith("/") or "\\" in v or ".." in v.split("/"):
            err(path, f"{v!r} is not a relative unix path inside the distribution")
        elif not os.path.isfile(os.path.join(root, v)):
            err(path, f"{v!r} does not exist in the distribution ({root})")

    if not keys("META.json", meta, TOP, REQUIRED):
        return errors
    if "name" in meta:
        term("name", meta["name"])
    if "abstract" in meta:
        string("abstract", meta["abstract"])
    if "version" in meta:
        semver("version", meta["version"])
    if "description" in meta:
        string("description", meta["description"])
    if "generated_by" in meta:
        string("generated_by", meta["generated_by"])
    if "maintainer" in meta:
        m = meta["maintainer"]
        if isinstance(m, list):
            if not m:
                err("maintainer", "an empty list")
            for i, x in enumerate(m):
                string(f"maintainer[{i}]", x)
        else:
            string("maintainer", m)
    if "license" in meta:
        lic = meta["license"]
        if isinstance(lic, str):
            if lic not in LICENSES:
                err("license", f"{lic!r} is not a license the spec knows (or give {{name: URI}})")
        elif isinstance(lic, list):
            if not lic:
                err("license", "an empty list")
            for i, x in enumerate(lic):
                if x not in LICENSES:
                    err(f"license[{i}]", f"{x!r} is not a license the spec knows")
        elif isinstance(lic, dict):
            if not lic:
                err("license", "an empty object")
            for k, v in lic.items():
                uri(f"license.{k}", v)
        else:
            err("license", f"must be a string, a list or an object, is {type(lic).__name__}")
    if "provides" in meta:
        prov = meta["provides"]
        if not isinstance(prov, dict) or not prov:
            err("provides", "must be a non-empty object")
        else:
            for ext, spec in prov.items():
                p = f"provides.{ext}"
                term(p, ext)
                if keys(p, spec, {"file", "version", "abstract", "docfile"}, ("file", "version")):
                    if "file" in spec:
                        path_in_dist(f"{p}.file", spec["file"])
                    if "docfile" in spec:
                        path_in_dist(f"{p}.docfile", spec["docfile"])
                    if "version" in spec:
                        semver(f"{p}.version", spec["version"])
                    if "abstract" in spec:
                        string(f"{p}.abstract", spec["abstract"])
    if "meta-spec" in meta:
        ms = meta["meta-spec"]
        if keys("meta-spec", ms, {"version", "url"}, ("version",)):
            v = ms.get("version")
            if v is not None and (not isinstance(v, str) or not re.match(r"^1\.0\.\d+$", v)):
                err("meta-spec.version", f"{v!r} is not a 1.0.x version of the spec")
            if "url" in ms:
                uri("meta-spec.url", ms["url"])
    if "tags" in meta:
        tags = meta["tags"]
        if not isinstance(tags, list) or not tags:
            err("tags", "must be a non-empty list")
        else:
            for i, t in enumerate(tags):
                if not isinstance(t, str) or not TAG.match(t):
                    err(f"tags[{i}]", f"{t!r} is not a Tag")
    if "no_index" in meta:
        ni = meta["no_index"]
        if keys("no_index", ni, {"file", "directory"}):
            for k in ("file", "directory"):
                v = ni.get(k, [])
                if isinstance(v, str):
                    v = [v]
                if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
                    err(f"no_index.{k}", "must be a path or a list of paths")
    if "release_status" in meta and meta["release_status"] not in ("stable", "testing", "unstable"):
        err("release_status", f"{meta['release_status']!r} is not stable, testing or unstable")
    if "prereqs" in meta:
        pre = meta["prereqs"]
        if keys("prereqs", pre, PHASES):
            for phase, rels in pre.items():
                if custom(phase) or not keys(f"prereqs.{phase}", rels, RELATIONS):
                    continue
                for rel, deps in rels.items():
                    p = f"prereqs.{phase}.{rel}"
                    if custom(rel):
                        continue
                    if not isinstance(deps, dict) or not deps:
                        err(p, "must be a non-empty object of name: version range")
                        continue
                    for name, rng in deps.items():
                        term(f"{p}.{name}", name)
                        version_range(f"{p}.{name}", rng)
    if "resources" in meta:
        res = meta["resources"]
        if keys("resources", res, {"homepage", "bugtracker", "repository"}):
            if not res:
                err("resources", "an empty object")
            if "homepage" in res:
                uri("resources.homepage", res["homepage"])
            if "bugtracker" in res and keys("resources.bugtracker", res["bugtracker"], {"web", "mailto"}):
                if "web" in res["bugtracker"]:
                    uri("resources.bugtracker.web", res["bugtracker"]["web"])
                if "mailto" in res["bugtracker"] and not (
                        isinstance(res["bugtracker"]["mailto"], str) and EMAIL.match(res["bugtracker"]["mailto"])):
                    err("resources.bugtracker.mailto", "not an email address")
            if "repository" in res and keys("resources.repository", res["repository"], {"url", "web", "type"}):
                for k in ("url", "web"):
                    if k in res["repository"]:
                        uri(f"resources.repository.{k}", res["repository"][k])
                if "type" in res["repository"]:
                    t = res["repository"]["type"]
                    if not isinstance(t, str) or not re.match(r"^[a-z]+$", t):
                        err("resources.repository.type", f"{t!r} is not a lower-case word (git, svn)")
    return errors


def self_test(path):
    base = json.load(open(path, encoding="utf-8"))
    root = os.path.dirname(os.path.abspath(path))

    def without(k):
        return lambda m: m.pop(k)

    def setter(k, v):
        return lambda m: m.__setitem__(k, v)

    def ext(k, v):
        def f(m):
            e = next(iter(m["provides"].values()))
            if v is None:
                e.pop(k)
            else:
                e[k] = v
        return f

    plants = [("no name", without("name")), ("no abstract", without("abstract")),
              ("no version", without("version")), ("no maintainer", without("maintainer")),
              ("no license", without("license")), ("no provides", without("provides")),
              ("no meta-spec", without("meta-spec")), ("name with a space", setter("name", "idem potency")),
              ("version 0.8", setter("version", "0.8")), ("version v1.0.0", setter("version", "v1.0.0")),
              ("maintainer a number", setter("maintainer", 7)), ("license unknown", setter("license", "wtfpl")),
              ("provides empty", setter("provides", {})), ("provides without file", ext("file", None)),
              ("provides without version", ext("version", None)),
              ("provides file missing", ext("file", "sql/missing.sql")),
              ("provides docfile missing", ext("docfile", "doc/missing.md")),
              ("provides file outside", ext("file", "../Makefile")),
              ("provides version 1.0", ext("version", "1.0")),
              ("meta-spec 2.0.0", setter("meta-spec", {"version": "2.0.0"})),
              ("unknown key", setter("homepage", "https://example.org/")),
              ("prereqs phase", setter("prereqs", {"install": {"requires": {"PostgreSQL": "15.0.0"}}})),
              ("prereqs range", setter("prereqs", {"runtime": {"requires": {"PostgreSQL": ">= 15"}}})),
              ("resources homepage", setter("resources", {"homepage": "not a uri"})),
              ("release_status", setter("release_status", "final")), ("tags", setter("tags", "one"))]
    failed = 0
    known = set(check(json.loads(json.dumps(base)), root))  # reported whatever is planted
    for name, plant in plants:
        m = json.loads(json.dumps(base))
        plant(m)
        errs = [e for e in check(m, root) if e not in known]
        print(f"self-test: {name}: {'reported: ' + errs[0] if errs else 'NOT REPORTED'}")
        failed += 0 if errs else 1
    print(f"self-test: {len(plants) - failed} of {len(plants)} planted violations reported")
    return 1 if failed else 0


def main(argv):
    if argv[1:2] == ["--self-test"]:
        return self_test(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "META.json"))
    path = argv[1] if len(argv) > 1 else "META.json"
    try:
        meta = json.load(open(path, encoding="utf-8"))
    except (OSError, ValueError) as e:
        print(f"{path}: cannot be read as JSON: {e}")
        return 1
    # the distribution's root: where the repository's META.json is (a planted copy elsewhere is
    # checked against the repository's files)
    root = os.path.dirname(os.path.abspath(path))
    if not os.path.isfile(os.path.join(root, "Makefile")):
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    errors = check(meta, root)
    for e in errors:
        print(f"{path}: {e}")
    if not errors:
        print(f"{path}: valid against the PGXN Meta Spec v1 ({meta['name']} {meta['version']})")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
