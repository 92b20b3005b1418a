"""Flask (WSGI) view decorators on psycopg 3's ConnectionPool."""
import contextlib
import functools
import logging
import threading
from typing import Any, Callable, Iterator, List, Optional, TypeVar

import flask
import psycopg
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool

from ._core import (APP, AUTO, BEAT, HEARTBEAT_SQL, PRINCIPAL, PUT, TWO_PHASE, Answer,
                    ConfigurationError, Handle, Options, OptionsOf, Step, check, check_principal,
                    execute, flow, run)

log = logging.getLogger("idempotency")
View = TypeVar("View", bound=Callable[..., Any])


@contextlib.contextmanager
def borrowed(pool: ConnectionPool) -> Iterator[psycopg.Connection]:
    """A pooled connection in autocommit (BEGIN and COMMIT are the flow's), given back as it was."""
    with pool.connection() as conn:
        was = conn.autocommit
        conn.autocommit = True
        try:
            yield conn
        finally:
            with contextlib.suppress(psycopg.Error):
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.execute("ROLLBACK")
                conn.autocommit = was


class SyncHandle(Handle):
    """flask.g.idem: the Handle (scope, key, attempt, reclaimed, resource_id) and the
    request's transaction."""

    def connect(self) -> psycopg.Connection:
        """The request's transaction: single mode's (the claim's); two-phase: one begun now, in
        which the answer is stored at the end. The package commits or rolls it back: never
        commit() on it."""
        if self._conn is None:
            self._borrow()
        if self._conn.info.transaction_status == TransactionStatus.IDLE:
            self._conn.execute("BEGIN")
        return self._conn

    def _borrow(self) -> None:
        self._lent = borrowed(self._pool)
        self._conn = self._lent.__enter__()

    def _put(self) -> None:
        if self._conn is not None:
            self._conn = None
            self._lent.__exit__(None, None, None)


class Idempotency:
    """The views' decorator factory: idempotent = Idempotency(pool, principal=...), then
    @idempotent() (or @idempotent(Options(...))) under @app.post(...). principal: a function of
    flask.request returning who sent it, e.g. the authenticated user's id; or
    shared_key_space=True: every principal shares one key space. It checks the pool, the
    extension and the role's privileges now: open the pool first. The view finds its
    SyncHandle in flask.g.idem; its operation is "METHOD rule" (Flask's url_rule.rule)."""

    def __init__(self, pool: ConnectionPool, principal: Optional[Callable[[flask.Request], Optional[str]]] = None,
                 *, shared_key_space: bool = False):
        check_principal(principal, shared_key_space)
        if not isinstance(pool, ConnectionPool):
            raise TypeError(f"pool must be a psycopg_pool.ConnectionPool, not {pool!r}")
        self.pool, self.principal, self.shared_key_space = pool, principal, shared_key_space
        self._checked = self._check(two_phase=False)
        self._two_phase_checked = False

    def _check(self, two_phase: bool) -> Any:
        if self.pool.closed:
            raise ConfigurationError(f"the pool {self.pool.name} is not open: open it"
                                     " (pool.open(wait=True), or ConnectionPool(open=True)) before"
                                     " Idempotency(pool, ...) and its decorators")

        def rows(step: Step) -> List[tuple]:
            sql, params = step[1]
            with borrowed(self.pool) as conn:
                return conn.execute(sql, params).fetchall()
        return run(check(two_phase), rows)

    def __call__(self, options: Optional[OptionsOf] = None) -> Callable[[View], View]:
        """A decorator making the view idempotent with options: an Options (default Options()),
        or a function of flask.request returning one (None: not this request)."""
        options = Options() if options is None else options
        if not isinstance(options, Options) and not callable(options):
            raise TypeError(f"options must be an Options or a function of the request, not {options!r}")
        if (not isinstance(options, Options) or options.mode == TWO_PHASE) and not self._two_phase_checked:
            self._check(two_phase=True)  # idem_heartbeat too
            self._two_phase_checked = True

        def decorate(view: View) -> View:
            if isinstance(options, Options):
                self._checked.check_durations(f"the view {view.__qualname__}", options)

            @functools.wraps(view)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                request = flask.request
                o = options if isinstance(options, Options) else options(request)
                if o is None:
                    return view(*args, **kwargs)
                if not isinstance(o, Options):
                    raise TypeError(f"the options function returned {o!r}, not Options or None")
                operation = o.operation or f"{request.method} {request.url_rule.rule}"
                h = flask.g.idem = SyncHandle(o, self.pool, operation, self._checked.errors, self.shared_key_space)
                made = {}

                def app() -> Answer:  # the view's answer as Flask makes it, its error handlers too
                    try:
                        r = flask.current_app.make_response(view(*args, **kwargs))
                    except Exception as e:  # noqa: BLE001 - no handler of Flask's: the flow's
                        r = flask.current_app.make_response(flask.current_app.handle_user_exception(e))
                    made["answer"], made["response"] = (r.status_code, list(r.headers.items()), r.get_data()), r
                    return made["answer"]

                key = request.headers.getlist("Idempotency-Key")
                try:
                    answer = run(flow(h, ", ".join(key) if key else None, request.get_data()),
                                 lambda step: self._step(h, step, app))
                finally:
                    stop_beat(h)
                    h._put()
                if answer is made.get("answer"):
                    return made["response"]
                status, headers, body = answer
                response = flask.Response(body, status, list(headers.items()))
                if not any(k.lower() == "content-type" for k in headers):
                    del response.headers["Content-Type"]  # Flask's default: not in this answer
                return response
            return wrapper  # type: ignore[return-value]
        return decorate

    def _step(self, h: SyncHandle, step: Step, app: Callable[[], Answer]) -> Any:
        kind, arg = step
        if kind == APP:
            return app()
        if kind == PRINCIPAL:
            return self.principal(flask.request)
        if kind == BEAT:
            if arg:
                h._beat = threading.Event()
                threading.Thread(target=self._heartbeat, args=(h, h._beat), daemon=True).start()
            else:
                stop_beat(h)
            return None
        if kind == PUT:
            return h._put()
        if kind == AUTO and h._conn is None:
            with borrowed(self.pool) as conn:
                return execute(conn, arg)
        if h._conn is None:
            h._borrow()
        return execute(h._conn, arg)

    def _heartbeat(self, h: SyncHandle, stop: threading.Event) -> None:
        """Two-phase: renews the lease every heartbeat while the view runs."""
        o = h.options
        while not stop.wait(o.heartbeat.total_seconds()):
            try:
                with borrowed(self.pool) as conn:
                    conn.execute(HEARTBEAT_SQL, (h.scope, h.key, h.attempt, o.lease))
            except psycopg.Error as e:  # a lease lost shows as IK002 at the end
                log.warning("idempotency: idem_heartbeat(%r, %r, %s): %s", h.scope, h.key, h.attempt, e)


def stop_beat(h: SyncHandle) -> None:
    beat = getattr(h, "_beat", None)
    if beat is not None:
        h._beat = None
        beat.set()
