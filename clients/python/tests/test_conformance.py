"""test/conformance/http.json through the real frameworks: every case in both modes, through
FastAPI (the ASGI middleware, Starlette's TestClient) and Flask (the decorator, Flask's test
client), with a handler that answers as the case says. The checks are http_runner.sql's
(test/conformance/): the answer (status, headers without regard to case, absent headers, body
or problem document), whether the handler ran and was reclaimed, and what idem_lookup stored."""
import json
import os
import uuid

import flask
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.testclient import TestClient
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from conftest import CONNECT, ROOT
from idempotency import Options
from idempotency.asgi import IdempotencyMiddleware
from idempotency.flask import Idempotency

with open(os.path.join(ROOT, "test", "conformance", "http.json")) as f:
    DOC = json.load(f)
FRAMEWORKS, MODES = ("fastapi", "flask"), ("single", "two-phase")
RUNS = [(fw, mode, case) for fw in FRAMEWORKS for mode in MODES for case in DOC["cases"]
        if mode in case.get("modes", MODES)]


def raw_body(req):
    return bytes.fromhex(req["body_hex"]) if "body_hex" in req else req["body"].encode()


class Service:
    """One framework's app in one mode, with a principal (X-Principal) or a shared key space;
    the operation of each request is the case's (X-Operation), tagged for this run."""

    def __init__(self, framework, mode, shared):
        self.framework, self.mode, self.shared = framework, mode, shared
        self.handler, self.ran, self.reclaimed = None, False, None
        kw = {"shared_key_space": True} if shared else {"principal": lambda r: r.headers.get("X-Principal")}
        options = lambda request: Options(mode=mode, operation=request.headers["X-Operation"])  # noqa: E731
        if framework == "fastapi":
            pool = AsyncConnectionPool(min_size=1, max_size=4, open=False, kwargs=CONNECT)
            app = FastAPI()
            app.add_event_handler("startup", opener(pool))
            app.add_event_handler("shutdown", pool.close)

            @app.post("/case")
            async def case(request: Request):
                return await self.answer_async(request.state.idem)
            app.add_middleware(IdempotencyMiddleware, pool=pool, routes={"POST /case": options}, **kw)
            self.client = TestClient(app, raise_server_exceptions=True).__enter__()
            self.close = lambda: self.client.__exit__(None, None, None)
        else:
            pool = ConnectionPool(min_size=1, max_size=4, kwargs=CONNECT)
            pool.wait()
            app = flask.Flask(__name__)
            idempotent = Idempotency(pool, **kw)

            @app.post("/case")
            @idempotent(options)
            def case():
                return self.answer_sync(flask.g.idem)
            self.client = app.test_client()
            self.close = pool.close

    def start(self, h):
        self.ran, self.reclaimed = True, h.reclaimed
        return self.handler

    def respond(self, spec):
        if self.framework == "fastapi":
            return Response(spec["body"].encode(), spec["status"], spec["headers"])
        r = flask.Response(spec["body"].encode(), spec["status"], list(spec["headers"].items()))
        if not any(k.lower() == "content-type" for k in spec["headers"]):
            del r.headers["Content-Type"]  # exactly the case's headers
        return r

    async def answer_async(self, h):
        spec = self.start(h)
        if spec.get("raise") == "exception":
            raise RuntimeError("the handler failed")
        if "raise" in spec:
            await (await h.connect()).execute(raise_sql(spec["raise"]))
        return self.respond(spec)

    def answer_sync(self, h):
        spec = self.start(h)
        if spec.get("raise") == "exception":
            raise RuntimeError("the handler failed")
        if "raise" in spec:
            h.connect().execute(raise_sql(spec["raise"]))
        return self.respond(spec)

    def request(self, req, handler, tag):
        """Sends the request; (ran, reclaimed, status, headers, body)."""
        self.handler, self.ran, self.reclaimed = handler, False, False
        headers = {"X-Operation": f"{req['operation']} #{tag}", "Content-Type": "application/json"}
        if req.get("principal") is not None:
            headers["X-Principal"] = req["principal"]
        if req.get("key") is not None:
            headers["Idempotency-Key"] = req["key"]
        if self.framework == "fastapi":
            r = self.client.post("/case", content=raw_body(req), headers=headers, follow_redirects=False)
            return self.ran, self.reclaimed, r.status_code, dict(r.headers.items()), r.content
        r = self.client.post("/case", data=raw_body(req), headers=headers)
        return self.ran, self.reclaimed, r.status_code, dict(r.headers.items()), r.get_data()


def opener(pool):
    async def open_pool():
        await pool.open(wait=True)
    return open_pool


def raise_sql(sqlstate):
    assert len(sqlstate) == 5 and sqlstate.isalnum()
    return f"DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '{sqlstate}'; END $$"


@pytest.fixture(scope="module")
def services():
    made, tags = {}, {}

    def service(framework, mode, shared):
        key = (framework, mode, shared)
        if key not in made:
            made[key] = Service(framework, mode, shared)
        run = (framework, mode)
        tags.setdefault(run, f"py-{framework}-{mode}-{uuid.uuid4().hex[:8]}")
        return made[key], tags[run]
    yield service
    for s in made.values():
        s.close()


def hold(db, req, tag, lease):
    """A request in flight: claimed two-phase with this lease, never finished."""
    db.execute("SELECT FROM idempotency.idem_http_begin(%s, %s, %s, %s, lease => %s::interval,"
               " shared_key_space => %s)",
               (req.get("principal"), f"{req['operation']} #{tag}", req.get("key"), raw_body(req),
                lease, bool(req.get("shared_key_space"))))


def differences(db, case, got, tag):
    """What differs between the case's expectation and what happened (http_check)."""
    ran, reclaimed, status, headers, body = got
    x, req, stored = case["expect"], case["request"], case.get("stored")
    lower = {k.lower(): v for k, v in headers.items()}
    problems = []
    if x["ran"] != ran:
        problems.append(f"ran {ran}")
    if "reclaimed" in x and x["reclaimed"] != reclaimed:
        problems.append(f"reclaimed {reclaimed}")
    if x["status"] != status:
        problems.append(f"status {status}")
    for name, value in x.get("headers", {}).items():
        have = lower.get(name.lower())
        if have is None or (value != "*" and have != value):
            problems.append(f"header {name}: {have or 'absent'}")
    for name in x.get("absent", []):
        if name.lower() in lower:
            problems.append(f"header {name} present")
    if "body" in x and body.decode("utf-8", "replace") != x["body"]:
        problems.append(f"body {body!r}")
    if "problem" in x:
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or doc.get("type") != "about:blank" or doc.get("status") != x["problem"]:
            problems.append(f"problem {body!r}")
    if stored is not None:
        row = db.execute(
            "SELECT status, response_status, resource_id, attempt, response_headers, response_body"
            " FROM idempotency.idem_lookup(idempotency.idem_http_scope(%s, %s, %s),"
            " idempotency.idem_key_from_header(%s))",
            (req.get("principal"), f"{req['operation']} #{tag}", bool(req.get("shared_key_space")),
             req.get("key"))).fetchone()
        l_status, l_rstatus, l_rid, l_attempt, l_headers, l_body = row or (None,) * 6
        if stored == "released":
            if l_status is not None and l_status != "failed":
                problems.append(f"stored {l_status}")
        else:
            if l_status != stored["status"]:
                problems.append(f"stored status {l_status}")
            for name, have in (("response_status", l_rstatus), ("resource_id", l_rid),
                               ("attempt", l_attempt), ("response_headers", l_headers)):
                if name in stored and have != stored[name]:
                    problems.append(f"stored {name} {have}")
            if "response_body" in stored and (l_body is None or bytes(l_body).decode() != stored["response_body"]):
                problems.append(f"stored response_body {l_body and bytes(l_body)!r}")
    return problems


@pytest.mark.parametrize("framework,mode,case", RUNS,
                         ids=[f"{fw}-{mode}-{case['name']}" for fw, mode, case in RUNS])
def test_case(db, services, framework, mode, case):
    import time
    for prior in case.get("prior", []):
        s, tag = services(framework, mode, bool(prior["request"].get("shared_key_space")))
        if "hold" in prior:
            hold(db, prior["request"], tag, prior["hold"])
        else:
            s.request(prior["request"], prior["handler"], tag)
        time.sleep(prior.get("sleep_ms", 0) / 1000)
    s, tag = services(framework, mode, bool(case["request"].get("shared_key_space")))
    got = s.request(case["request"], case["handler"], tag)
    problems = differences(db, case, got, tag)
    assert not problems, (f"{framework} {mode} {case['name']!r}: " + "; ".join(problems)
                          + f"\n  answer: {got[2]} {got[3]} {got[4][:200]!r}")
