#!/usr/bin/env python3
"""Drives one example service (examples/README.md) over real HTTP, through the fault proxy
(build/fault_proxy), and checks what it wrote in the database.

  http_test.py --lang fastapi [--route direct] [--port 18410] [--db-port N] -- CMD ARGS...

CMD is the service (started with PORT, PGHOST/PGPORT/PGUSER/PGDATABASE and the contract's knobs in
its environment; IDEMPOTENCY is passed through). The test's own connection (schema, invariants)
uses the libpq environment; --db-port N points the service at 127.0.0.1:N instead (PgBouncer).
Ports: the service on --port, the fault proxy on --port + 1, the lost-response proxy on --port + 2.
Scenarios: the seed test (10 clients, one key, half quoted, 50% cuts) in both modes, a lost
response, a reused key with another body, a handler that throws (customer c_throw), the
two-phase worker killed in the provider window and after the provider charged, a webhook
delivered 3 times and a bad signature, the 400s. Prints one table per mode; exits 1 on any
failed check. --lang names the service (fastapi, flask, express, fastify, go): its database
examples_<lang> and its log."""
import argparse
import json
import os
import sys
import threading
import time
import uuid

import psycopg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Process, Table, Tries, request, sign_standard, until_answered  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODES = {"single": ("/v1/payments", "payments"),
         "two-phase": ("/v1/payments?mode=two-phase", "payments-two-phase")}
# Services on 2.0.0's HTTP contract (idem_http_begin): a record's scope is its principal, the
# payment's customer (the demo's stand-in for an authenticated user), and its operation, POST
# /v1/payments in both modes (idem_http_scope), instead of the MODES scopes above.
PRINCIPAL_SCOPED = {"go", "express", "fastify", "fastapi", "flask"}
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
CLIENTS = 10


class Db:
    """The test's own connection to the service's database (autocommit)."""

    def __init__(self, dbname, by_principal=False):
        self.c = psycopg.connect(dbname=dbname, autocommit=True)
        self.by_principal = by_principal

    def one(self, sql, *args):
        return self.c.execute(sql, args).fetchone()

    def lookup(self, scope, key, customer):
        """idem_lookup's row as a dict (response_body decoded to bytes), or None."""
        if self.by_principal:
            scope = self.one("SELECT idempotency.idem_http_scope(%s, 'POST /v1/payments')", customer)[0]
        r = self.one("SELECT to_jsonb(l) FROM idempotency.idem_lookup(%s, %s) l", scope, key)
        if r is None:
            return None
        d = r[0]
        if isinstance(d.get("response_body"), str):
            d["response_body"] = bytes.fromhex(d["response_body"][2:])
        return d

    def renew_lease(self, scope, key, customer, attempt, seconds):
        """idem_heartbeat of the key's attempt: its lease ends seconds from now."""
        if self.by_principal:
            scope = self.one("SELECT idempotency.idem_http_scope(%s, 'POST /v1/payments')", customer)[0]
        self.one("SELECT idempotency.idem_heartbeat(%s, %s, %s, make_interval(secs => %s))",
                 scope, key, attempt, seconds)

    def payments(self, customer):
        return self.c.execute("SELECT id::text, provider_ref FROM payments WHERE customer = %s",
                              (customer,)).fetchall()

    def charges(self, key):
        """The provider's charges made under key (whatever prefix the service gives it)."""
        return [r[0] for r in self.c.execute(
            "SELECT id::text FROM provider_charges WHERE strpos(idempotency_key, %s) > 0",
            (key,)).fetchall()]

    def count(self, table):
        return self.one(f"SELECT count(*) FROM {table}")[0]


def payment_body(customer, amount):
    return json.dumps({"customer": customer, "amount": amount, "currency": "eur"}).encode()


def new_key():
    k = str(uuid.uuid4())
    return k, "c_" + k[:8]


def seed_test(t, db, mode, port, rounds):
    """10 clients, one key (half of them send it quoted), retried through the fault proxy."""
    path, scope = MODES[mode]
    tries = Tries()
    per_key = []
    for r in range(rounds):
        key, customer = new_key()
        body = payment_body(customer, 1000 + r)
        answers, errors = [None] * CLIENTS, []

        def client(i):
            h = {"Idempotency-Key": f'"{key}"' if i % 2 == 0 else key}
            try:
                answers[i] = until_answered(port, path, body, h, tries)
            except Exception as e:  # noqa: BLE001 - a client that never got an answer
                errors.append(repr(e))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        got = [a for a in answers if a is not None]
        pays = db.payments(customer)
        rec = db.lookup(scope, key, customer) or {}
        pid = pays[0][0] if len(pays) == 1 else None
        per_key.append(dict(
            payments=len(pays), charges=len(db.charges(key)), answered=len(got),
            created=sum(a.status == 201 for a in got),
            bodies=len({a.body for a in got}),
            ids=sum(pid is not None and pid.encode() in a.body for a in got),
            locations=sum(pid is not None and a.header("Location") == f"/v1/payments/{pid}"
                          for a in got),
            fresh=sum(a.header("Idempotent-Replayed") != "true" for a in got),
            # resource_id is the payment's id (examples/README.md)
            record=rec.get("status") == "completed" and rec.get("response_status") == 201
            and pid is not None and rec.get("resource_id") == pid,
            errors=errors))
    n = len(per_key)
    col = lambda f: ",".join(str(k[f]) for k in per_key)  # noqa: E731
    t.check("seed: payments rows per key", ",".join(["1"] * n), col("payments"))
    if mode == "two-phase":
        t.check("seed: provider charges per key", ",".join(["1"] * n), col("charges"))
    t.check("seed: clients answered (no client gave up)", CLIENTS * n,
            sum(k["answered"] for k in per_key))
    t.check("seed: answers 201", CLIENTS * n, sum(k["created"] for k in per_key))
    t.check("seed: keys whose bodies are byte-identical", n, sum(k["bodies"] == 1 for k in per_key))
    t.check("seed: answers naming the key's payment id", CLIENTS * n, sum(k["ids"] for k in per_key))
    t.check("seed: answers with Location /v1/payments/<that id>", CLIENTS * n,
            sum(k["locations"] for k in per_key))
    t.check("seed: answers without Idempotent-Replayed, per key", "<= 1 each", col("fresh"),
            all(k["fresh"] <= 1 for k in per_key))
    t.check("seed: records completed, 201, resource_id = the payment", n,
            sum(k["record"] for k in per_key))
    t.check("seed: connections the proxy broke (>= 1)", ">= 1", tries.transport_errors,
            tries.transport_errors >= 1)
    t.check("seed: 409s without Retry-After >= 1", 0, tries.bad_retry_after)
    for k in per_key:
        for e in k["errors"][:1]:
            print(f"  [{t.title}] a client gave up: {e}")


def lost_response(t, db, mode, port, lost_port):
    """The answer is produced but cut before it is forwarded; the retry replays the same bytes."""
    path, scope = MODES[mode]
    key, customer = new_key()
    body = payment_body(customer, 2000)
    h = {"Idempotency-Key": f'"{key}"'}
    try:
        first = request(lost_port, "POST", path, body, h)
        lost = f"answered {first.status}"
    except Exception:  # noqa: BLE001 - the expected outcome: no answer
        lost = "lost"
    t.check("lost response: the first try got no answer", "lost", lost)
    rec = db.lookup(scope, key, customer) or {}
    t.check("lost response: record completed before the retry", "completed", rec.get("status"))
    retry1 = request(port, "POST", path, body, h)
    retry2 = request(port, "POST", path, body, h)
    t.check("lost response: retries answered 201, replayed", "201 true, 201 true",
            f"{retry1.status} {retry1.header('Idempotent-Replayed')}, "
            f"{retry2.status} {retry2.header('Idempotent-Replayed')}")
    stored = rec.get("response_body")
    t.check("lost response: retry bytes = idem_lookup's response_body", "equal",
            "equal" if stored is not None and retry1.body == stored == retry2.body else
            ("no record" if not rec else "no response_body (extension < 0.6)"
             if "response_body" not in rec else "differ"))
    t.check("lost response: payments rows", 1, len(db.payments(customer)))


def reused_key(t, db, mode, port):
    """The same key with another body: 422, nothing new written."""
    path, scope = MODES[mode]
    key, customer = new_key()
    h = {"Idempotency-Key": key}
    first = request(port, "POST", path, payment_body(customer, 3000), h)
    before = (db.count("payments"), db.count("provider_charges"))
    other = request(port, "POST", path, payment_body(customer, 3001), h)
    after = (db.count("payments"), db.count("provider_charges"))
    t.check("reused key: first 201, other body 422", "201, 422", f"{first.status}, {other.status}")
    t.check("reused key: rows written by the 422 (payments, charges)", "0, 0",
            f"{after[0] - before[0]}, {after[1] - before[1]}")


def handler_throws(t, db, mode, port):
    """Customer c_throw: the handler raises after its INSERT (single) / after the provider
    (two-phase). 500 and no payment; single: no record (the claim rolled back with the INSERT);
    two-phase: the attempt failed, retryable: the same key is claimed again (attempt 2) and
    fails again, the provider charged once."""
    path, scope = MODES[mode]
    key = str(uuid.uuid4())
    body = payment_body("c_throw", 6000)
    h = {"Idempotency-Key": key}
    answers, records = [], []
    for _ in range(2):
        answers.append(request(port, "POST", path, body, h).status)
        rec = db.lookup(scope, key, "c_throw")
        records.append("none" if rec is None else f"{rec.get('status')} {rec.get('attempt')}")
    t.check("handler throws: answers to the key sent twice", "500, 500",
            ", ".join(map(str, answers)))
    t.check("handler throws: payments rows of customer c_throw", 0, len(db.payments("c_throw")))
    want = "none, none" if mode == "single" else "failed 1, failed 2"
    t.check("handler throws: the key's record after each try", want, ", ".join(records))
    if mode == "two-phase":
        t.check("handler throws: provider charges", 1, len(db.charges(key)))


def killed_worker(t, db, start_service, port, window):
    """Two-phase: SIGKILL the service while a request is in the provider call (window=provider)
    or after the provider charged, before the result is stored (window=complete); restart it;
    retries get 409 until the lease ends, then exactly one reclaim, payment and charge."""
    path, scope = MODES["two-phase"]
    key, customer = new_key()
    body = payment_body(customer, 4000)
    h = {"Idempotency-Key": f'"{key}"'}
    knobs = {"PROVIDER_DELAY_MS": "3000"} if window == "provider" else {"COMPLETE_DELAY_MS": "3000"}
    svc = start_service(knobs)
    try:
        threading.Thread(target=lambda: _ignore(request, port, "POST", path, body, h),
                         daemon=True).start()
        reached = False
        for _ in range(100):  # until the request is in the window
            rec = db.lookup(scope, key, customer) or {}
            if rec.get("status") == "processing" and (window == "provider" or db.charges(key)):
                reached = True
                break
            time.sleep(0.05)
        time.sleep(0.3)
        at_kill = (len(db.charges(key)), len(db.payments(customer)))
        svc.kill()
        svc = start_service({})
        # The lease runs from the restart on, not from the kill: on a loaded machine the restart
        # can outlast the rest of the lease, and the first retry would already be the reclaim.
        db.renew_lease(scope, key, customer, 1, 6)
        tries = Tries()
        try:
            final = until_answered(port, path, body, h, tries, deadline=30).status
        except Exception as e:  # noqa: BLE001
            final = repr(e)
    finally:
        svc.kill()
    rec = db.lookup(scope, key, customer) or {}
    charges, pays = db.charges(key), db.payments(customer)
    w = f"killed ({window} window)"
    t.check(f"{w}: reached the window; charges, payments at the kill", "yes; "
            + ("0, 0" if window == "provider" else "1, 0"),
            f"{'yes' if reached else 'no'}; {at_kill[0]}, {at_kill[1]}")
    t.check(f"{w}: 409 with Retry-After while the lease ran", ">= 1, all with Retry-After",
            f"{tries.conflicts}, {tries.bad_retry_after} without",
            tries.conflicts >= 1 and tries.bad_retry_after == 0)
    t.check(f"{w}: final answer", 201, final)
    t.check(f"{w}: record attempt (one reclaim), status", "2, completed",
            f"{rec.get('attempt')}, {rec.get('status')}")
    t.check(f"{w}: payments rows, provider charges", "1, 1", f"{len(pays)}, {len(charges)}")
    t.check(f"{w}: the payment's provider_ref is the charge", "yes",
            "yes" if len(pays) == 1 and len(charges) == 1 and pays[0][1] == charges[0] else
            f"provider_ref {pays[0][1] if pays else None}, charges {charges}")


def _ignore(f, *args):
    try:
        f(*args)
    except Exception:  # noqa: BLE001 - the request whose service is killed
        pass


def webhooks(t, db, port):
    """One signed delivery sent 3 times: 1 effect, 200s; a bad signature: 400, nothing."""
    def deliver(payment_id, secret):
        msg_id, ts = "msg_" + uuid.uuid4().hex, str(int(time.time()))
        body = json.dumps({"type": "payment.settled", "data": {"payment_id": payment_id}}).encode()
        h = {"webhook-id": msg_id, "webhook-timestamp": ts,
             "webhook-signature": sign_standard(secret, msg_id, ts, body)}
        return lambda: request(port, "POST", "/v1/webhooks/provider", body, h).status

    rows = lambda pid: db.one("SELECT count(*) FROM webhook_events WHERE payment_id = %s", pid)[0]  # noqa: E731
    good, bad = str(uuid.uuid4()), str(uuid.uuid4())
    send = deliver(good, SECRET)
    t.check("webhook: 3 deliveries of one event answered", "200,200,200",
            ",".join(str(send()) for _ in range(3)))
    t.check("webhook: webhook_events rows", 1, rows(good))
    t.check("webhook: bad signature answered", 400, deliver(bad, "whsec_" + "QUJD" * 8)())
    t.check("webhook: bad signature rows", 0, rows(bad))


def bad_requests(t, db, port):
    """Missing / malformed / over-long keys and a body that is not JSON: 400, nothing stored."""
    path, scope = MODES["single"]
    key, customer = new_key()
    body = payment_body(customer, 5000)
    cases = [("no Idempotency-Key", {}, body),
             ("unterminated sf-string", {"Idempotency-Key": '"' + key}, body),
             ("key of 300 bytes", {"Idempotency-Key": "k" * 300}, body),
             ("body not JSON", {"Idempotency-Key": key}, b"{not json")]
    for name, h, b in cases:
        t.check(f"400: {name}", 400, request(port, "POST", path, b, h).status)
    t.check("400s: payments rows, record of the key", "0, none",
            f"{len(db.payments(customer))}, {(db.lookup(scope, key, customer) or {}).get('status', 'none')}")


def setup_database(name, by_principal):
    with psycopg.connect(autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{name}"')
    with psycopg.connect(dbname=name, autocommit=True) as c, \
            open(os.path.join(ROOT, "examples", "schema.sql")) as f:
        c.execute(f.read())
    return Db(name, by_principal)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lang", required=True)
    ap.add_argument("--route", default="direct")
    ap.add_argument("--port", type=int, default=18410)
    ap.add_argument("--db-port", type=int)
    ap.add_argument("--db", help="database (default examples_<lang>)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--proxy", default=os.path.join(ROOT, "build", "fault_proxy"))
    ap.add_argument("--log", help="the service's stderr (default /tmp/idem-examples-<lang>-<route>.log)")
    ap.add_argument("service", nargs="+")
    a = ap.parse_args()
    dbname = a.db or f"examples_{a.lang}"
    log = a.log or f"/tmp/idem-examples-{a.lang}-{a.route}.log"
    open(log, "wb").close()  # this run's services append to it; a failure prints its end
    db = setup_database(dbname, a.lang in PRINCIPAL_SCOPED)
    base_env = dict(os.environ, PORT=str(a.port), PGDATABASE=dbname, LEASE_SECONDS="2",
                    PROVIDER_DELAY_MS="50", COMPLETE_DELAY_MS="0")
    if a.db_port:
        base_env.update(PGHOST="127.0.0.1", PGPORT=str(a.db_port))

    def start_service(knobs):
        env = dict(base_env, **knobs)
        return Process(a.lang, a.service, env, log).start()

    title = f"{a.lang} {a.route}"
    tables = {m: Table(f"{title} {m}") for m in MODES}
    other = Table(f"{title} webhooks, 400s")
    procs = []
    try:
        svc = start_service({})
        procs.append(svc)
        proxy = Process("fault_proxy", [a.proxy, "--upstream", str(a.port), "--listen",
                                        str(a.port + 1), "--latency", "0-5", "--cut", "0.5"]).start()
        lost = Process("fault_proxy", [a.proxy, "--upstream", str(a.port), "--listen",
                                       str(a.port + 2), "--cut", "1", "--kinds",
                                       "lost_response"]).start()
        procs += [proxy, lost]
        for m, t in tables.items():
            run(t, "seed test", seed_test, t, db, m, proxy.port, a.rounds)
            run(t, "lost response", lost_response, t, db, m, a.port, lost.port)
            run(t, "reused key", reused_key, t, db, m, a.port)
            run(t, "handler throws", handler_throws, t, db, m, a.port)
        run(other, "webhooks", webhooks, other, db, a.port)
        run(other, "400s", bad_requests, other, db, a.port)
        print(f"[{title}] proxy: {proxy.stop()}; lost-response proxy: {lost.stop()}")
        svc.kill()
        # The kill scenarios start their own service processes (LEASE_SECONDS=6, 12 for Python).
        # A service that renews its lease every LEASE_SECONDS / 3 has 2/3 of it left at the kill,
        # at least: the time its successor has to start before the first retry, which must get a
        # 409. A Python service takes 3-6 s to import and open its pool on a loaded 2-core machine
        # (4 s were too few in 3 runs of 4 under a full test run).
        base_env["LEASE_SECONDS"] = "12" if a.lang in ("fastapi", "flask") else "6"
        for window in ("provider", "complete"):
            run(tables["two-phase"], f"killed worker ({window})", killed_worker,
                tables["two-phase"], db, start_service, a.port, window)
    except Exception as e:  # noqa: BLE001 - a service that does not start
        other.check("service and proxies started", "yes", repr(e), False)
    finally:
        for p in procs:
            p.kill()
    for t in list(tables.values()) + [other]:
        t.print()
    bad = sum(len(t.failed()) for t in list(tables.values()) + [other])
    if bad and os.path.exists(log):
        with open(log, "rb") as f:
            tail = f.read().decode(errors="replace").splitlines()[-12:]
        print(f"[{title}] the service's stderr ({log}), last lines:")
        print("\n".join("    " + line for line in tail))
    print(f"{title}: {'PASS' if bad == 0 else f'FAIL ({bad} failed checks)'}")
    return 1 if bad else 0


def run(t, name, f, *args):
    """Runs one scenario; an exception is a failed check of its own."""
    try:
        f(*args)
    except Exception as e:  # noqa: BLE001
        t.check(f"{name}: ran to the end", "yes", f"raised {e!r}"[:120], False)


if __name__ == "__main__":
    sys.exit(main())
