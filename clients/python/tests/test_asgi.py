"""The ASGI middleware against the database: route templates (Starlette's router), the start
check (lifespan and check()), the fail-fast configuration errors, no head-of-line blocking."""
import asyncio
import uuid

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from psycopg_pool import AsyncConnectionPool
from starlette.routing import Mount

from conftest import CONNECT
from idempotency import ConfigurationError, Options
from idempotency.asgi import IdempotencyMiddleware


def opener(pool):
    async def open_pool():
        await pool.open(wait=True)
    return open_pool


def payments_app(pool, **middleware):
    """A FastAPI app with a templated route and a mounted sub-app; the middleware added."""
    app = FastAPI()
    app.add_event_handler("startup", opener(pool))
    app.add_event_handler("shutdown", pool.close)

    @app.post("/v1/payments/{pid}/refunds")
    async def refund(pid: str, request: Request):
        idem = request.state.idem
        db = await idem.connect()
        await db.execute("SELECT 1")
        return JSONResponse({"refund_of": pid, "scope": idem.scope, "attempt": idem.attempt}, 201,
                            {"Location": f"/v1/refunds/r_{pid}"})

    @app.get("/healthz")
    async def healthz():
        return {"ok": True}

    sub = FastAPI()

    @sub.put("/flags/{name}")
    async def flag(name: str, request: Request):
        return {"flag": name, "scope": request.state.idem.scope}
    app.router.routes.append(Mount("/admin", app=sub))
    app.add_middleware(IdempotencyMiddleware, pool=pool, **middleware)
    return app


def pool_of(**kw):
    return AsyncConnectionPool(kwargs=CONNECT, open=False, **kw)


def test_operation_is_the_route_template_and_the_principal_scopes_keys(db):
    routes = {"POST /v1/payments/{pid}/refunds": Options(), "PUT /admin/flags/{name}": Options()}
    app = payments_app(pool_of(min_size=1), routes=routes,
                       principal=lambda request: request.headers.get("x-user"))
    key = f"k-{uuid.uuid4()}"
    with TestClient(app) as client:
        a = client.post("/v1/payments/p_1/refunds", headers={"Idempotency-Key": key, "X-User": "u:A"}, content=b"{}")
        again = client.post("/v1/payments/p_1/refunds", headers={"Idempotency-Key": key, "X-User": "u:A"},
                            content=b"{}")
        b = client.post("/v1/payments/p_1/refunds", headers={"Idempotency-Key": key, "X-User": "u:B"}, content=b"{}")
        other = client.post("/v1/payments/p_2/refunds", headers={"Idempotency-Key": key, "X-User": "u:A"},
                            content=b"{}")
        flag = client.put("/admin/flags/x", headers={"Idempotency-Key": key, "X-User": "u:A"}, content=b"{}")
        nobody = client.post("/v1/payments/p_1/refunds", headers={"Idempotency-Key": key}, content=b"{}")
        health = client.get("/healthz")
    assert (a.status_code, a.json()["scope"]) == (201, "u:A/POST /v1/payments/{pid}/refunds")
    assert (again.status_code, again.headers["idempotent-replayed"], again.content) == (201, "true", a.content)
    assert (b.status_code, b.json()["scope"]) == (201, "u:B/POST /v1/payments/{pid}/refunds")
    assert "idempotent-replayed" not in b.headers
    # the same operation (template) with another body: the key's body differs? no: same body,
    # another path: the same operation, so a replay of p_1's answer
    assert (other.status_code, other.headers.get("idempotent-replayed")) == (201, "true")
    assert (flag.status_code, flag.json()["scope"]) == (200, "u:A/PUT /admin/flags/{name}")
    assert nobody.status_code == 403 and nobody.headers["content-type"] == "application/problem+json"
    assert health.status_code == 200
    stored = db.execute("SELECT status, resource_id FROM idempotency.idem_lookup(%s, %s)",
                        ("u:A/POST /v1/payments/{pid}/refunds", key)).fetchone()
    assert stored == ("completed", "r_p_1")


def test_a_route_key_that_matches_no_route_fails_the_start():
    app = payments_app(pool_of(min_size=1), routes={"POST /v1/payments/{id}/refunds": Options()},
                       principal=lambda request: "u")
    with pytest.raises(ConfigurationError, match=r"'POST /v1/payments/\{id\}/refunds' match no route"):
        with TestClient(app):
            pass


def test_a_pool_never_opened_fails_the_start():
    pool = pool_of(min_size=1)
    app = FastAPI()  # no startup opening the pool
    app.add_middleware(IdempotencyMiddleware, pool=pool, routes={}, principal=lambda r: "u")
    with pytest.raises(ConfigurationError, match="not open"):
        with TestClient(app):
            pass


@pytest.mark.parametrize("kw,error,match", [
    ({}, ConfigurationError, "principal is required"),
    ({"principal": lambda r: "u", "shared_key_space": True}, ConfigurationError, "not both"),
    ({"principal": "user"}, TypeError, "principal must be a function"),
    ({"principal": lambda r: "u", "routes": {"/v1/payments": Options()}}, ConfigurationError, "METHOD"),
    ({"principal": lambda r: "u", "pool": object()}, TypeError, "AsyncConnectionPool"),
])
def test_configuration_errors_fail_the_start(kw, error, match):
    """Starlette builds the middleware at the first event (the lifespan's): the error fails the
    start, as it fails check() for an app without lifespan."""
    args = {"pool": pool_of(min_size=1), "routes": {}, **kw}
    app = FastAPI()
    app.add_middleware(IdempotencyMiddleware, **args)
    with pytest.raises(error, match=match):
        with TestClient(app):
            pass
    with pytest.raises(error, match=match):
        asyncio.run(IdempotencyMiddleware(FastAPI(), **args).check())


def test_an_app_without_lifespan_calls_check():
    async def scenario():
        pool = pool_of(min_size=1)
        await pool.open(wait=True)
        app = FastAPI()

        @app.post("/orders")
        async def order(request: Request):
            return JSONResponse({"scope": request.state.idem.scope}, 201)
        wrapped = IdempotencyMiddleware(app, pool, {"POST /orders": Options()}, shared_key_space=True)
        await wrapped.check()
        async with httpx.AsyncClient(app=wrapped, base_url="http://test") as c:
            r = await c.post("/orders", headers={"Idempotency-Key": str(uuid.uuid4())}, content=b"{}")
        await pool.close()
        return r
    r = asyncio.run(scenario())
    assert (r.status_code, r.json()) == (201, {"scope": "*/POST /orders"})


@pytest.mark.parametrize("mode", ["single", "two-phase"])
def test_no_head_of_line_blocking(mode):
    """A pool of 2; a request whose handler waits on a latch holds one connection (single mode:
    its transaction); twelve duplicates are answered 409 with Retry-After at once, and an
    unrelated request completes while the first is still held. Were a duplicate to wait for
    the first, it would hold the other connection, and the unrelated request would hang (the
    wait_for is the guard that turns such a hang into a failure, not a timing assertion)."""
    async def scenario():
        pool = pool_of(min_size=2, max_size=2, timeout=60)
        await pool.open(wait=True)
        entered, latch = asyncio.Event(), asyncio.Event()
        app = FastAPI()

        @app.post("/slow")
        async def slow(request: Request):
            db = await request.state.idem.connect()
            await db.execute("SELECT 1")
            entered.set()
            await latch.wait()
            return JSONResponse({"slow": True}, 201)

        @app.post("/fast")
        async def fast(request: Request):
            await (await request.state.idem.connect()).execute("SELECT 1")
            return JSONResponse({"fast": True}, 201)
        options = Options(mode=mode)
        wrapped = IdempotencyMiddleware(app, pool, {"POST /slow": options, "POST /fast": options},
                                        principal=lambda r: "hol")
        await wrapped.check()
        key = str(uuid.uuid4())
        async with httpx.AsyncClient(app=wrapped, base_url="http://test", timeout=120) as c:
            first = asyncio.ensure_future(c.post("/slow", headers={"Idempotency-Key": key}, content=b"{}"))
            await asyncio.wait_for(entered.wait(), 60)
            dups = await asyncio.wait_for(asyncio.gather(*[
                c.post("/slow", headers={"Idempotency-Key": key}, content=b"{}") for _ in range(12)]), 60)
            other = await asyncio.wait_for(
                c.post("/fast", headers={"Idempotency-Key": str(uuid.uuid4())}, content=b"{}"), 60)
            held = not first.done()
            latch.set()
            done = await first
        await pool.close()
        return dups, other, held, done
    dups, other, held, done = asyncio.run(scenario())
    assert [d.status_code for d in dups] == [409] * 12
    assert all(d.headers["retry-after"].isdigit() for d in dups)
    assert other.status_code == 201 and held
    assert done.status_code == 201


def test_a_ttl_shorter_than_the_servers_default_lease_fails_the_start(db):
    lease = db.execute("SELECT current_setting('idempotency.default_lease')::interval").fetchone()[0]
    routes = {"POST /v1/payments/{pid}/refunds": Options(ttl=lease / 2)}
    app = payments_app(pool_of(min_size=1), routes=routes, principal=lambda r: "u")
    with pytest.raises(ConfigurationError, match="shorter than the lease"):
        with TestClient(app):
            pass
