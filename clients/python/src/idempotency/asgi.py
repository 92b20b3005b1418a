"""ASGI middleware (FastAPI, Starlette) on psycopg 3's AsyncConnectionPool."""
import asyncio
import contextlib
import inspect
import logging
import re
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

import psycopg
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool
from starlette.requests import Request
from starlette.routing import Host, Match, Mount

from ._core import (APP, AUTO, BEAT, HEARTBEAT_SQL, PRINCIPAL, PUT, TWO_PHASE, Answer,
                    ConfigurationError, ErrorMap, Handle, Options, OptionsOf, Step, check,
                    check_principal, execute_async, flow, run_async)

log = logging.getLogger("idempotency")
ROUTE_KEY = re.compile(r"[A-Z]+ /\S*")
Principal = Callable[[Request], Union[Optional[str], Awaitable[Optional[str]]]]


@contextlib.asynccontextmanager
async def borrowed(pool: AsyncConnectionPool) -> AsyncIterator[psycopg.AsyncConnection]:
    """A pooled connection in autocommit (BEGIN and COMMIT are the flow's), given back as it was."""
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
    """request.state.idem: the Handle (scope, key, attempt, reclaimed, resource_id) and the
    request's transaction."""

    async def connect(self) -> psycopg.AsyncConnection:
        """The request's transaction: single mode's (the claim's); two-phase: one begun now, in
        which the answer is stored at the end. The package commits or rolls it back: never
        commit() on it."""
        if self._conn is None:
            await self._borrow()
        if self._conn.info.transaction_status == TransactionStatus.IDLE:
            await self._conn.execute("BEGIN")
        return self._conn

    async def _borrow(self) -> None:
        self._lent = borrowed(self._pool)
        self._conn = await self._lent.__aenter__()

    async def _put(self) -> None:
        if self._conn is not None:
            self._conn = None
            await self._lent.__aexit__(None, None, None)


class IdempotencyMiddleware:
    """Makes the routes named in `routes` idempotent: {"POST /v1/payments/{id}": Options(), ...},
    each key a method and a route template of the app (as declared: Starlette's router picks the
    route), each value an Options or a function of the Request returning one (None: not this
    request). principal: a function of the Request (may be async) returning who sent it, e.g.
    the authenticated user's id; or shared_key_space=True: every principal shares one key space.
    A configuration error fails the app's start (the lifespan's startup), or check() for an app
    served without lifespan. The handler finds its AsyncHandle in request.state.idem."""

    def __init__(self, app: Any, pool: AsyncConnectionPool, routes: Mapping[str, OptionsOf],
                 principal: Optional[Principal] = None, *, shared_key_space: bool = False):
        self.app, self.pool, self.routes = app, pool, dict(routes)
        self.principal, self.shared_key_space = principal, shared_key_space
        self._errors: Optional[ErrorMap] = None
        self._problem: Optional[Exception] = None
        self._lock: Optional[asyncio.Lock] = None
        try:  # Starlette builds its middleware at the first event: the error waits for check()
            check_principal(principal, shared_key_space)
            if not isinstance(pool, AsyncConnectionPool):
                raise TypeError(f"pool must be a psycopg_pool.AsyncConnectionPool, not {pool!r}")
            for key, value in self.routes.items():
                if not isinstance(key, str) or not ROUTE_KEY.fullmatch(key):
                    raise ConfigurationError(f"routes: {key!r} is not 'METHOD /route/{{template}}'")
                if not isinstance(value, Options) and not callable(value):
                    raise TypeError(f"routes[{key!r}] must be an Options or a function of the"
                                    f" Request returning one, not {value!r}")
        except (TypeError, ValueError) as e:
            self._problem = e
            log.error("idempotency: IdempotencyMiddleware: %s", e)

    async def check(self, app: Any = None) -> None:
        """The start check, run by the lifespan's startup after the app's own (open the pool
        there): the configuration, the route templates against the app's routes, the pool,
        the extension and the role's privileges; ConfigurationError (or TypeError) when not.
        Call it once yourself (awaited, after opening the pool) for an app without lifespan."""
        if self._problem is not None:
            raise self._problem
        routes = routes_of(app) or routes_of(self.app)
        if routes is None:
            raise ConfigurationError("cannot find the app's routes (Starlette or FastAPI)")
        known = set(templates(routes))
        unknown = sorted(set(self.routes) - known)
        if unknown:
            raise ConfigurationError(f"routes: {', '.join(map(repr, unknown))} match no route of the"
                                     f" app; its routes: {', '.join(sorted(known))}")
        two_phase = any(not isinstance(o, Options) or o.mode == TWO_PHASE for o in self.routes.values())

        async def rows(step: Step) -> List[tuple]:
            sql, params = step[1]
            async with borrowed(self.pool) as conn:
                return await (await conn.execute(sql, params)).fetchall()

        checked = await run_async(check(two_phase), rows)
        for route, options in self.routes.items():
            if isinstance(options, Options):
                checked.check_durations(route, options)
        self._errors = checked.errors

    async def __call__(self, scope: Dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            return await self.app(scope, receive, self._checked_start(scope, send))
        route = self._route(scope) if scope["type"] == "http" else None
        if route is None:
            return await self.app(scope, receive, send)
        template, options = route
        body, more = b"", True
        while more:
            m = await receive()
            if m["type"] == "http.disconnect":
                return
            body, more = body + m.get("body", b""), m.get("more_body", False)
        if not isinstance(options, Options):  # a function of the request (its body readable)
            options = options(Request(scope, replay(body, receive)))
            options = await options if inspect.isawaitable(options) else options
            if options is not None and not isinstance(options, Options):
                raise TypeError(f"the routes function of {template} returned {options!r}, not Options or None")
        if options is None:
            return await self.app(scope, replay(body, receive), send)
        if self._errors is None:  # no lifespan and no check() yet
            self._lock = self._lock or asyncio.Lock()
            async with self._lock:
                if self._errors is None:
                    await self.check(scope.get("app"))
        operation = options.operation or f"{scope['method']} {template}"
        h = AsyncHandle(options, self.pool, operation, self._errors, self.shared_key_space)
        scope.setdefault("state", {})["idem"] = h
        key = [v.decode("latin-1") for k, v in scope["headers"] if k == b"idempotency-key"]
        try:
            answer = await run_async(flow(h, ", ".join(key) if key else None, body),
                                     lambda step: self._step(h, step, scope, body, receive))
        finally:
            await stop_beat(h)
            await h._put()
        await respond(send, answer)

    def _checked_start(self, scope: Dict[str, Any], send: Callable) -> Callable:
        async def checked(message: Dict[str, Any]) -> None:
            if message["type"] == "lifespan.startup.complete":
                try:  # after the app's own startup (which opens the pool)
                    await self.check(scope.get("app"))
                except Exception as e:
                    # raised in the app's lifespan: Starlette answers lifespan.startup.failed
                    # with it and the server exits
                    log.error("idempotency: the start check failed: %s", e)
                    raise
            await send(message)
        return checked

    def _route(self, scope: Dict[str, Any]) -> Optional[Tuple[str, OptionsOf]]:
        """The template of the request's route and its entry in routes, or None."""
        routes = routes_of(scope.get("app")) or routes_of(self.app)
        template = route_template(routes, scope) if routes and self.routes else None
        options = self.routes.get(f"{scope['method']} {template}") if template else None
        return None if options is None else (template, options)

    async def _step(self, h: AsyncHandle, step: Step, scope: Dict[str, Any], body: bytes,
                    receive: Callable) -> Any:
        kind, arg = step
        if kind == APP:
            return await run_app(self.app, scope, replay(body, receive))
        if kind == PRINCIPAL:  # a Request whose body can be read
            p = self.principal(Request(scope, replay(body, receive)))
            return await p if inspect.isawaitable(p) else p
        if kind == BEAT:
            if arg:
                h._beat = asyncio.ensure_future(self._heartbeat(h))
            else:
                await stop_beat(h)
            return None
        if kind == PUT:
            return await h._put()
        if kind == AUTO and h._conn is None:
            async with borrowed(self.pool) as conn:
                return await execute_async(conn, arg)
        if h._conn is None:
            await h._borrow()
        return await execute_async(h._conn, arg)

    async def _heartbeat(self, h: AsyncHandle) -> None:
        """Two-phase: renews the lease every heartbeat while the handler runs."""
        o = h.options
        while True:
            await asyncio.sleep(o.heartbeat.total_seconds())
            try:
                async with borrowed(self.pool) as conn:
                    await conn.execute(HEARTBEAT_SQL, (h.scope, h.key, h.attempt, o.lease))
            except psycopg.Error as e:  # a lease lost shows as IK002 at the end
                log.warning("idempotency: idem_heartbeat(%r, %r, %s): %s", h.scope, h.key, h.attempt, e)


async def stop_beat(h: AsyncHandle) -> None:
    beat = getattr(h, "_beat", None)
    if beat is not None:
        h._beat = None
        beat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beat


def replay(body: bytes, receive: Callable) -> Callable:
    """The body read already, then the client's own events."""
    first = True

    async def receive_again() -> Dict[str, Any]:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return receive_again


async def run_app(app: Any, scope: Dict[str, Any], receive: Callable) -> Answer:
    """Runs the app; its answer, captured whole: (status, header pairs, body bytes)."""
    res: Dict[str, Any] = {"status": 500, "headers": [], "body": []}

    async def capture(m: Dict[str, Any]) -> None:
        if m["type"] == "http.response.start":
            res["status"], res["headers"] = m["status"], list(m.get("headers", []))
        elif m["type"] == "http.response.body":
            res["body"].append(m.get("body", b""))

    await app(scope, receive, capture)
    return res["status"], res["headers"], b"".join(res["body"])


async def respond(send: Callable, answer: Answer) -> None:
    status, headers, body = answer
    if isinstance(headers, dict):  # the database's answer: a JSON object of name to value
        headers = [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in headers.items()]
        headers.append((b"content-length", b"%d" % len(body)))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def routes_of(app: Any) -> Optional[list]:
    """The routes of a Starlette or FastAPI app, or of the router inside middleware."""
    for _ in range(64):
        if app is None:
            return None
        routes = getattr(app, "routes", None)
        if isinstance(routes, list):
            return routes
        app = getattr(app, "app", None)
    return None


def route_template(routes: list, scope: Dict[str, Any], prefix: str = "") -> Optional[str]:
    """The template of the route Starlette's router gives the request (the first that matches
    fully: path and method), through Mount and Host; None when none does."""
    for route in routes:
        match, child = route.matches(scope)
        if match != Match.FULL:
            continue
        if isinstance(route, (Mount, Host)):
            inner = route.routes or []
            return route_template(inner, {**scope, **child},
                                  prefix + route.path if isinstance(route, Mount) else prefix)
        return prefix + route.path
    return None


def templates(routes: list, prefix: str = "") -> Iterator[str]:
    """Every "METHOD template" of the app's routes."""
    for route in routes:
        if isinstance(route, (Mount, Host)):
            yield from templates(route.routes or [],
                                 prefix + route.path if isinstance(route, Mount) else prefix)
        else:
            for method in getattr(route, "methods", None) or ():
                yield f"{method} {prefix}{route.path}"
