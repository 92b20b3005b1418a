"""What the ASGI middleware and the Flask decorator share: the options, the SQL of the HTTP
contract and the request's flow, written once as steps that a sync or an async driver runs.
The package decides nothing of the contract: idem_http_begin answers or lets the handler run,
idem_http_end says whether the answer is stored, idem_http_errors maps an error to its answer
(docs/records.md, "The HTTP contract"; clients/python/README.md)."""
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Dict, Generator, Iterable, List, Optional, Sequence, Tuple, Union

import psycopg
from psycopg.types.json import Jsonb

log = logging.getLogger("idempotency")

SINGLE, TWO_PHASE, OFF = "single", "two-phase", "off"
MODES = (SINGLE, TWO_PHASE, OFF)
TWO_PHASE_LEASE = timedelta(seconds=30)

BEGIN_SQL = ("SELECT scope, key, attempt, run, reclaimed, status, headers, body"
             " FROM idempotency.idem_http_begin(%(principal)s, %(operation)s, %(header)s,"
             " %(body)s::bytea, lease => %(lease)s, ttl => %(ttl)s, shared_key_space => %(shared)s)")
END_SQL = "SELECT idempotency.idem_http_end(%s, %s, %s, %s, %s, %s, %s, %s::text[])"
# idem_http_end in the request's transaction with its COMMIT in the same round trip. When it
# says false (the answer is not stored), the transaction must not commit: 1 / 0 then aborts it
# with 22012 (division_by_zero, which no function of the contract raises), the server skips the
# COMMIT sent with it, and the flow rolls back and releases. The Go package does the same.
END_COMMIT_SQL = "SELECT 1 / idempotency.idem_http_end(%s, %s, %s, %s, %s, %s, %s, %s::text[])::integer"
NOT_STORED = "22012"
RELEASE_SQL = "SELECT idempotency.idem_http_release(%s, %s, %s)"
ANSWER_SQL = "SELECT status, headers, body FROM idempotency.idem_http_answer(%s::text, %s::text)"
HEARTBEAT_SQL = "SELECT idempotency.idem_heartbeat(%s, %s, %s, %s)"
ERRORS_SQL = "SELECT sqlstate, status, headers, body, retryable FROM idempotency.idem_http_errors()"
# The functions the pool's role calls (idem_http_begin, _end and _release claim, complete and
# release themselves: no grant on idem_claim, idem_complete or idem_fail is needed).
FUNCTIONS = (
    "idempotency.idem_http_begin(text,text,text,bytea,interval,interval,boolean)",
    "idempotency.idem_http_end(text,text,integer,integer,jsonb,bytea,text,text[])",
    "idempotency.idem_http_release(text,text,integer)",
    "idempotency.idem_http_answer(text,text)",
)
HEARTBEAT_FUNCTION = "idempotency.idem_heartbeat(text,text,integer,interval)"
DEFAULTS_SQL = ("SELECT pg_catalog.current_setting('idempotency.default_lease', true)::interval,"
                " pg_catalog.current_setting('idempotency.default_ttl', true)::interval")
GRANTS_SQL = ("SELECT current_user::text, ARRAY(SELECT f FROM pg_catalog.unnest(%s::text[]) f"
              " WHERE NOT pg_catalog.has_function_privilege(f, 'EXECUTE'))")

# The steps of flow() and check(), which a driver runs:
#   TX, statements    on the request's connection, borrowed at its first use (in autocommit:
#                     BEGIN, COMMIT and ROLLBACK are statements of the flow); the last one's row
#   AUTO, statements  on the request's connection if it has one and is out of its transaction,
#                     else on a connection borrowed for this step alone
#   PUT, None         gives the request's connection back (it failed: maybe broken)
#   APP, None         runs the handler: its answer (status, header pairs, body bytes)
#   BEAT, on          two-phase: starts (True) or stops (False) renewing the lease
#   PRINCIPAL, None   calls the principal function
#   ROWS, statement   check(): all rows of one statement, on a connection borrowed for it
TX, AUTO, PUT, APP, BEAT, PRINCIPAL, ROWS = "tx", "auto", "put", "app", "beat", "principal", "rows"
BEGIN, COMMIT, ROLLBACK = ("BEGIN", None), ("COMMIT", None), ("ROLLBACK", None)

Answer = Tuple[int, Any, bytes]  # status, headers (a dict, or the handler's pairs), body
Step = Tuple[str, Any]


class ConfigurationError(ValueError):
    """The middleware cannot work as configured: raised when it is built or when the service
    starts (its start check), never per request."""


def _duration(name: str, value: Any) -> Optional[timedelta]:
    if value is None:
        return None
    if not isinstance(value, timedelta):
        raise TypeError(f"{name} must be a datetime.timedelta, not {type(value).__name__} {value!r}"
                        f" (e.g. timedelta(seconds=30))")
    if value <= timedelta(0):
        raise ConfigurationError(f"{name} must be positive, not {value}")
    return value


@dataclass(frozen=True)
class Options:
    """How one route is made idempotent.

    mode: "single" (the claim, the handler's writes and the stored answer commit in one
    transaction), "two-phase" (the claim commits alone with a lease; the handler runs outside
    any transaction) or "off" (the handler in a plain transaction, nothing claimed or stored).
    lease, ttl, heartbeat: datetime.timedelta (two-phase: lease 30 s and heartbeat lease / 3 by
    default). headers: the response headers stored and replayed. operation: the name the key is
    kept under, with the principal; default "METHOD route-template"."""
    mode: str = SINGLE
    lease: Optional[timedelta] = None
    ttl: Optional[timedelta] = None
    headers: Sequence[str] = ("Content-Type", "Location")
    heartbeat: Optional[timedelta] = None
    operation: Optional[str] = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigurationError(f"mode {self.mode!r}: one of {', '.join(map(repr, MODES))}")
        lease, ttl = _duration("lease", self.lease), _duration("ttl", self.ttl)
        heartbeat = _duration("heartbeat", self.heartbeat)
        if self.mode == TWO_PHASE:
            lease = lease or TWO_PHASE_LEASE
            heartbeat = heartbeat or lease / 3
            if heartbeat >= lease:
                raise ConfigurationError(f"heartbeat {heartbeat} must be shorter than the lease {lease}")
        elif heartbeat is not None:
            raise ConfigurationError("heartbeat is for mode='two-phase' only")
        if ttl is not None and lease is not None and ttl < lease:
            raise ConfigurationError(f"ttl {ttl} is shorter than the lease {lease}: the record"
                                     " would expire while its request runs")
        if isinstance(self.headers, (str, bytes)) or not all(isinstance(h, str) for h in self.headers):
            raise TypeError(f"headers must be a sequence of header names, not {self.headers!r}")
        if self.operation is not None and (not isinstance(self.operation, str) or not self.operation):
            raise ConfigurationError(f"operation must be a non-empty string, not {self.operation!r}")
        for name, value in (("lease", lease), ("ttl", ttl), ("heartbeat", heartbeat),
                            ("headers", tuple(self.headers))):
            object.__setattr__(self, name, value)
        # the headers as a text[] literal, made once: binding the list anew on every request
        # (psycopg's array dumper, a quote per element) cost more than the rest of end_args
        object.__setattr__(self, "_headers_array", "{%s}" % ",".join(
            '"%s"' % h.replace("\\", "\\\\").replace('"', '\\"') for h in self.headers))


@dataclass(frozen=True)
class ErrorRow:
    """One row of idem_http_errors(): the answer to an error (status None: IK003)."""
    sqlstate: Optional[str]
    status: Optional[int]
    headers: Dict[str, str]
    body: bytes
    retryable: bool

    def answer(self) -> Answer:
        return self.status, dict(self.headers), self.body


class ErrorMap:
    """idem_http_errors(), read once at the start: an error's answer by its SQLSTATE, its class,
    or the row without one."""

    def __init__(self, rows: Iterable[Tuple[Any, ...]]):
        self.rows = {r[0]: ErrorRow(r[0], r[1], r[2] or {}, bytes(r[3] or b""), bool(r[4])) for r in rows}
        if None not in self.rows:
            raise ConfigurationError("idem_http_errors() has no row for other errors (sqlstate NULL)")

    def row(self, error: BaseException) -> ErrorRow:
        state = sqlstate(error)
        return (self.rows.get(state) or (state and self.rows.get(state[:2]))
                or self.rows[None])


def sqlstate(error: BaseException) -> Optional[str]:
    """The SQLSTATE of a database error; '08' (connection exception) for a connection lost or
    never had (psycopg's OperationalError without a code: a pool timeout too); None else."""
    if isinstance(error, psycopg.Error):
        if error.sqlstate:
            return error.sqlstate
        if isinstance(error, psycopg.OperationalError):
            return "08"
    return None


class Handle:
    """What a handler sees of its request: scope and key (the record's), attempt (the fencing
    token), reclaimed (an earlier attempt's lease ran out: its effect is unknown, reconcile
    before acting again), resource_id (stored with the answer; default: the last path segment
    of the answer's Location). The drivers add connect(): the request's transaction."""

    def __init__(self, options: Options, pool: Any, operation: str, errors: ErrorMap,
                 shared_key_space: bool = False):
        self.options, self.operation, self._pool = options, operation, pool
        self._errors, self._shared = errors, shared_key_space
        self.scope: Optional[str] = None
        self.key: Optional[str] = None
        self.attempt: Optional[int] = None
        self.reclaimed = False
        self.resource_id: Optional[str] = None
        self._conn: Any = None  # the request's connection, once it has one
        self._begun = False  # a claim of this request exists: release it unless stored


def flow(h: Handle, header: Optional[str], body: bytes) -> Generator[Step, Any, Answer]:
    """One request, as steps (above); returns the answer to send. Every exception, the
    handler's or the database's, ends in failed(): its answer comes from idem_http_errors."""
    o = h.options
    try:
        if o.mode == OFF:
            yield TX, [BEGIN]
            result = yield APP, None
            yield TX, [COMMIT]
            return result
        principal = None if h._shared else (yield PRINCIPAL, None)
        principal = None if principal is None else str(principal)
        begin = (BEGIN_SQL, {"principal": principal, "operation": h.operation, "header": header,
                             "body": body, "lease": o.lease, "ttl": o.ttl, "shared": h._shared})
        # single: BEGIN and idem_http_begin in one round trip; two-phase: the claim commits alone
        row = yield (TX, [BEGIN, begin]) if o.mode == SINGLE else (AUTO, [begin])
        h.scope, h.key, h.attempt, run, reclaimed, status, headers, answer = row
        if not run:  # the database's answer: 400, 403, a replay, 409, 422
            if o.mode == SINGLE:
                yield TX, [ROLLBACK]
            return status, headers or {}, bytes(answer or b"")
        h._begun, h.reclaimed = True, bool(reclaimed)
        beat = o.mode == TWO_PHASE
        if beat:
            yield BEAT, True
        try:
            result = yield APP, None
        except Exception:
            if beat:
                yield BEAT, False
            raise
        if beat:
            yield BEAT, False
        args = end_args(h, result)
        if h._conn is not None:  # the answer is stored in the handler's transaction, or not
            try:
                yield TX, [(END_COMMIT_SQL, args), COMMIT]
                stored = True
            except psycopg.Error as e:
                if e.sqlstate != NOT_STORED:
                    raise
                yield TX, [ROLLBACK]
                stored = False
        else:  # two-phase, a handler that wrote nothing here
            stored = (yield AUTO, [(END_SQL, args)])[0]
        if not stored:
            yield from release(h)
        return result
    except Exception as e:  # noqa: BLE001 - every error has its answer
        return (yield from failed(h, e))


def release(h: Handle) -> Generator[Step, Any, None]:
    """idem_http_release after the rollback; its failure is logged, not answered."""
    try:
        yield AUTO, [(RELEASE_SQL, (h.scope, h.key, h.attempt))]
    except Exception as e:  # noqa: BLE001
        log.warning("idempotency: idem_http_release(%r, %r, %s) failed: %s", h.scope, h.key, h.attempt, e)


def failed(h: Handle, error: BaseException) -> Generator[Step, Any, Answer]:
    """The error path: ROLLBACK, release the claim, answer as idem_http_errors maps the error
    (IK003: the answer another attempt stored)."""
    row = h._errors.row(error)
    unexpected = row.sqlstate is None  # the handler's exception, an unknown database error
    log.log(logging.ERROR if unexpected else logging.WARNING, "idempotency: %s %s failed (%s: %s), answering %s",
            h.operation, h.key or "", sqlstate(error) or type(error).__name__, str(error).strip(),
            row.status or "the stored answer", exc_info=error if unexpected else None)
    if h._conn is not None:
        try:
            yield TX, [ROLLBACK]
        except Exception:  # noqa: BLE001 - a broken connection: the pool discards it
            yield PUT, None
    if h._begun:
        yield from release(h)
    if row.status is not None:
        return row.answer()
    try:  # IK003: another attempt finished this key
        status, headers, body = yield AUTO, [(ANSWER_SQL, (h.scope, h.key))]
    except Exception as e:  # noqa: BLE001
        row = h._errors.row(e)
        return row.answer() if row.status is not None else h._errors.rows[None].answer()
    if status is None:
        return h._errors.rows["IK002"].answer()
    return status, headers or {}, bytes(body or b"")


def header_object(pairs: Iterable[Tuple[Any, Any]]) -> Dict[str, str]:
    """The handler's headers as one JSON object for idem_http_end, which keeps the allow-listed
    ones: names as the framework gives them, values of a repeated name joined with ", "."""
    out: Dict[str, str] = {}
    names: Dict[str, str] = {}
    for k, v in pairs:
        k = k.decode("latin-1") if isinstance(k, bytes) else str(k)
        v = v.decode("latin-1") if isinstance(v, bytes) else str(v)
        name = names.setdefault(k.lower(), k)
        out[name] = f"{out[name]}, {v}" if name in out else v
    return out


def end_args(h: Handle, result: Answer) -> tuple:
    status, headers, body = result
    pairs = headers.items() if isinstance(headers, dict) else headers
    o = h.options
    return (h.scope, h.key, h.attempt, status, Jsonb(header_object(pairs)), body, h.resource_id,
            o._headers_array)


class Checked:
    """What the start check found: the error map and the server's default lease and TTL (what a
    NULL lease or ttl is), against which check_durations() checks each route's Options."""

    def __init__(self, errors: ErrorMap, lease: Optional[timedelta], ttl: Optional[timedelta]):
        self.errors, self.lease, self.ttl = errors, lease, ttl

    def check_durations(self, route: str, o: Options) -> None:
        lease, ttl = o.lease or self.lease, o.ttl or self.ttl
        if o.mode != OFF and lease is not None and ttl is not None and ttl < lease:
            raise ConfigurationError(
                f"{route}: the ttl {ttl} is shorter than the lease {lease} (a lease or ttl not given"
                " is the server's idempotency.default_lease or default_ttl): the record would expire"
                " while its request runs")


def check(two_phase: bool) -> Generator[Step, Any, Checked]:
    """The start check: reads idem_http_errors(), whether the pool's role may execute every
    function the contract calls, and the server's default lease and TTL; ConfigurationError
    when something is missing."""
    try:
        errors = ErrorMap((yield ROWS, (ERRORS_SQL, None)))
        functions = list(FUNCTIONS) + ([HEARTBEAT_FUNCTION] if two_phase else [])
        [(role, missing)] = yield ROWS, (GRANTS_SQL, (functions,))
        [(lease, ttl)] = yield ROWS, (DEFAULTS_SQL, None)
    except psycopg.Error as e:
        raise ConfigurationError(f"the start check failed ({explain(e)}): the pool must be open and"
                                 " its database have the extension idempotency 2.0"
                                 " (CREATE EXTENSION idempotency) and grant its role the EXECUTE"
                                 " privileges of clients/python/README.md") from e
    if missing:
        raise ConfigurationError(f"the role {role} may not execute {', '.join(missing)}: GRANT EXECUTE"
                                 f" ON FUNCTION {', '.join(missing)} TO {role}")
    return Checked(errors, lease, ttl)


def explain(e: psycopg.Error) -> str:
    return f"{type(e).__name__}{' ' + e.sqlstate if e.sqlstate else ''}: {str(e).strip()}"


def check_principal(principal: Optional[Callable], shared_key_space: bool) -> None:
    if not isinstance(shared_key_space, bool):
        raise TypeError(f"shared_key_space must be True or False, not {shared_key_space!r}")
    if shared_key_space and principal is not None:
        raise ConfigurationError("give a principal function or shared_key_space=True, not both")
    if not shared_key_space and principal is None:
        raise ConfigurationError(
            "principal is required: a function of the request returning who sent it (e.g. the"
            " authenticated user's id), so that each principal has keys of its own; to let every"
            " principal share one key space, pass shared_key_space=True instead")
    if principal is not None and not callable(principal):
        raise TypeError(f"principal must be a function of the request, not {principal!r}")


def one_query(statements: List[Tuple[str, Any]]) -> Tuple[str, Any]:
    """Statements as one query and its parameters (only one of them has any)."""
    return "; ".join(s for s, _ in statements), next((p for _, p in statements if p), None)


def execute(conn: psycopg.Connection, statements: List[Tuple[str, Any]]) -> Any:
    """Sends statements in one round trip; the last one's row, if it has one. Several are one
    simple query, bound by psycopg on the client (ClientCursor): in psycopg's pure Python
    implementation, 1,712 Python calls per request where pipelines took 3,967. On a connection
    that prepares (prepare_threshold not None), one round trip each, so that psycopg can."""
    if len(statements) == 1 or conn.prepare_threshold is not None:
        for statement in statements:
            cur = conn.execute(*statement)
    else:
        cur = psycopg.ClientCursor(conn)
        cur.execute(*one_query(statements))
        while cur.nextset():
            pass
    return cur.fetchone() if cur.description else None


async def execute_async(conn: psycopg.AsyncConnection, statements: List[Tuple[str, Any]]) -> Any:
    if len(statements) == 1 or conn.prepare_threshold is not None:
        for statement in statements:
            cur = await conn.execute(*statement)
    else:
        cur = psycopg.AsyncClientCursor(conn)
        await cur.execute(*one_query(statements))
        while cur.nextset():
            pass
    return await cur.fetchone() if cur.description else None


def run(steps: Generator[Step, Any, Any], do: Callable[[Step], Any]) -> Any:
    """Drives steps (flow() or check()) with a sync driver's do(step): its result is sent back
    into the generator, its exception thrown into it; the generator's return value."""
    value: Any = None
    error: Optional[BaseException] = None
    while True:
        try:
            step = steps.send(value) if error is None else steps.throw(error)
        except StopIteration as stop:
            return stop.value
        value = error = None
        try:
            value = do(step)
        except Exception as e:  # noqa: BLE001 - the flow decides
            error = e


async def run_async(steps: Generator[Step, Any, Any], do: Callable[[Step], Any]) -> Any:
    """run() with an async driver's do(step)."""
    value: Any = None
    error: Optional[BaseException] = None
    while True:
        try:
            step = steps.send(value) if error is None else steps.throw(error)
        except StopIteration as stop:
            return stop.value
        value = error = None
        try:
            value = await do(step)
        except Exception as e:  # noqa: BLE001 - the flow decides
            error = e


OptionsOf = Union[Options, Callable[[Any], Optional[Options]]]
