"""ASGI middleware (FastAPI, Starlette) on psycopg 3's AsyncConnectionPool."""
import asyncio
import contextlib
from typing import Callable, Dict, Union

import psycopg
from psycopg.pq import TransactionStatus
from starlette.requests import Request

from ._core import (APP, BEAT, HEARTBEAT_SQL, TX, Handle, Options, error_answer, execute_async,
                    flow)


@contextlib.asynccontextmanager
async def borrowed(pool):
    """A pooled connection in autocommit (BEGIN and COMMIT are ours), given back as it was."""
    async with pool.connection() as conn:
        was = conn.autocommit
        try:
            if not was:
                await conn.set_autocommit(True)
            yield conn
        finally:
            with contextlib.suppress(psycopg.Error):
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    await conn.execute("ROLLBACK")
                if not was:
                    await conn.set_autocommit(False)


class AsyncHandle(Handle):
    async def connect(self) -> psycopg.AsyncConnection:
        """The request's transaction: single mode's (the claim's), else one begun now; it
        commits with the result (two-phase: with idem_complete) or rolls back."""
        if self._conn is None:
            self._conn = await self._stack.enter_async_context(borrowed(self._pool))
            await self._conn.execute("BEGIN")
        return self._conn


class IdempotencyMiddleware:
    """routes: {"POST /v1/payments": Options, or a function of the Request returning Options
    or None}. The handler finds its AsyncHandle in request.state.idem."""

    def __init__(self, app, pool, routes: Dict[str, Union[Options, Callable]]):
        self.app, self.pool, self.routes = app, pool, routes

    async def __call__(self, scope, receive, send):
        o = self.routes.get(f"{scope.get('method')} {scope.get('path')}")
        if callable(o) and scope["type"] == "http":
            o = o(Request(scope))
        if not isinstance(o, Options):
            return await self.app(scope, receive, send)
        body, more = b"", True
        while more:
            m = await receive()
            body, more = body + m.get("body", b""), m.get("more_body", False)
        h = scope.setdefault("state", {})["idem"] = AsyncHandle(o, self.pool)
        key = [v.decode("latin-1") for k, v in scope["headers"] if k == b"idempotency-key"]
        steps, value, error = flow(h, ", ".join(key) if key else None, body), None, None
        async with contextlib.AsyncExitStack() as h._stack:
            while True:
                try:
                    step = steps.throw(error) if error else steps.send(value)
                except StopIteration as stop:
                    status, headers, out = stop.value
                    break
                except Exception as e:
                    if error_answer(e) is None:
                        raise
                    status, headers, out = error_answer(e)
                    break
                value = error = None
                try:
                    value = await self._step(h, step, scope, receive, body)
                except Exception as e:
                    error = e
        if isinstance(headers, dict):  # ours or the stored answer's
            headers = [(k.lower().encode("latin-1"), str(v).encode("latin-1"))
                       for k, v in headers.items()] + [(b"content-length", b"%d" % len(out))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": out})

    async def _step(self, h, step, scope, receive, body):
        kind, arg = step
        if kind == APP:
            return await self._app(scope, receive, body)
        if kind == BEAT:
            if arg:
                h._beat = asyncio.ensure_future(self._heartbeat(h))
            elif getattr(h, "_beat", None):
                h._beat.cancel()
            return None
        if kind == TX:
            h._conn = h._conn or await h._stack.enter_async_context(borrowed(self.pool))
            return await execute_async(h._conn, arg)
        async with borrowed(self.pool) as conn:
            return await execute_async(conn, arg)

    async def _app(self, scope, receive, body):
        """Runs the app; its answer, captured whole: (status, header pairs, body bytes)."""
        res = {"status": 500, "headers": [], "body": []}
        first = True

        async def replay():  # the body read above, then the client's own events
            nonlocal first
            if first:
                first = False
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async def capture(m):
            if m["type"] == "http.response.start":
                res["status"], res["headers"] = m["status"], m.get("headers", [])
            elif m["type"] == "http.response.body":
                res["body"].append(m.get("body", b""))

        await self.app(scope, replay, capture)
        return res["status"], res["headers"], b"".join(res["body"])

    async def _heartbeat(self, h):
        """Two-phase: renews the lease every heartbeat seconds while the handler runs."""
        o = h.options
        with contextlib.suppress(psycopg.Error):  # a lost lease shows as IK002 at the end
            while True:
                await asyncio.sleep(o.heartbeat)
                async with borrowed(self.pool) as conn:
                    await conn.execute(HEARTBEAT_SQL, (o.scope, h.key, h.attempt, o.lease))
