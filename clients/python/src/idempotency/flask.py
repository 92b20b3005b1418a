"""A Flask (WSGI) view decorator on psycopg 3's ConnectionPool."""
import contextlib
import functools
import threading
from typing import Callable, Union

import flask
import psycopg
from psycopg.pq import TransactionStatus

from ._core import APP, BEAT, HEARTBEAT_SQL, TX, Handle, Options, error_answer, execute, flow


@contextlib.contextmanager
def borrowed(pool):
    """A pooled connection in autocommit (BEGIN and COMMIT are ours), given back as it was."""
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
    def connect(self) -> psycopg.Connection:
        """The request's transaction: single mode's (the claim's), else one begun now; it
        commits with the result (two-phase: with idem_complete) or rolls back."""
        if self._conn is None:
            self._conn = self._stack.enter_context(borrowed(self._pool))
            self._conn.execute("BEGIN")
        return self._conn


def idempotent(pool, options: Union[Options, Callable[[], Options]]):
    """@idempotent(pool, Options("payments")) under @app.post(...); the view finds its
    SyncHandle in flask.g.idem. options may be a function (of flask.request) returning one."""
    def decorate(view):
        @functools.wraps(view)
        def wrapper(*args, **kwargs):
            o = options() if callable(options) else options
            if o is None:
                return view(*args, **kwargs)
            h = flask.g.idem = SyncHandle(o, pool)
            answer = {}

            def app():  # the view's answer as the framework makes it
                r = answer["r"] = flask.current_app.make_response(view(*args, **kwargs))
                answer["t"] = (r.status_code, list(r.headers.items()), r.get_data())
                return answer["t"]

            key = flask.request.headers.get("Idempotency-Key")
            result = drive(h, flow(h, key, flask.request.get_data()), app)
            if result is answer.get("t"):
                return answer["r"]
            status, headers, body = result
            return flask.Response(body, status, list(headers.items()))
        return wrapper
    return decorate


def drive(h, steps, app):
    """Runs flow()'s steps; the answer, or error_answer's, or the exception (a 500)."""
    value = error = None
    with contextlib.ExitStack() as h._stack:
        while True:
            try:
                step = steps.throw(error) if error else steps.send(value)
            except StopIteration as stop:
                return stop.value
            except Exception as e:
                if error_answer(e) is None:
                    raise
                return error_answer(e)
            value = error = None
            try:
                value = _step(h, step, app)
            except Exception as e:
                error = e


def _step(h, step, app):
    kind, arg = step
    if kind == APP:
        return app()
    if kind == BEAT:
        if arg:
            h._beat = threading.Event()
            threading.Thread(target=_heartbeat, args=(h, h._beat), daemon=True).start()
        elif getattr(h, "_beat", None):
            h._beat.set()
        return None
    if kind == TX:
        h._conn = h._conn or h._stack.enter_context(borrowed(h._pool))
        return execute(h._conn, arg)
    with borrowed(h._pool) as conn:
        return execute(conn, arg)


def _heartbeat(h, stop: threading.Event):
    """Two-phase: renews the lease every heartbeat seconds while the view runs."""
    o = h.options
    with contextlib.suppress(psycopg.Error):  # a lost lease shows as IK002 at the end
        while not stop.wait(o.heartbeat):
            with borrowed(h._pool) as conn:
                conn.execute(HEARTBEAT_SQL, (o.scope, h.key, h.attempt, o.lease))
