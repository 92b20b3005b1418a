"""What the ASGI middleware and the Flask decorator share: the options, the SQL, the request's
flow (written once, as steps a sync or an async driver runs), the rule of what is stored and
the map from errors to HTTP answers. The rules are in clients/python/README.md."""
import json
from dataclasses import dataclass
from datetime import timedelta
from http import HTTPStatus
from typing import Optional, Sequence, Union

import psycopg
from psycopg.types.json import Jsonb

# Request data the claim refuses: the key (NULL, malformed, too long), the body (not I-JSON).
BAD_REQUEST = {"22004", "22023", "22001", "22P02", "22021", "22003", "54001"}
# Worth the client's retry: serialization failure, deadlock, read-only server, shutdown.
RETRYABLE = {"40001", "40P01", "25006", "57P01", "57P02", "57P03"}

ANSWER_SQL = "SELECT status, headers, body FROM idempotency.idem_http_answer(%s, %s)"
COMPLETE_SQL = ("SELECT idempotency.idem_complete(%s, %s, %s, resource_id => %s, response_status => %s,"
                " response_body => %s, response_headers => %s)")
FAIL_SQL = "SELECT idempotency.idem_fail(%s, %s, %s, retryable => true)"
HEARTBEAT_SQL = "SELECT idempotency.idem_heartbeat(%s, %s, %s, %s)"
# The steps of flow(), which a driver runs: SQL on the request's transaction (TX: borrowing its
# connection first if there is none) or on a connection borrowed for it alone (AUTO, in
# autocommit); APP: the handler, whose answer is (status, header pairs, body bytes); BEAT: the
# two-phase lease's heartbeat on (True) or off.
TX, AUTO, APP, BEAT = "tx", "auto", "app", "beat"
BEGIN, COMMIT, ROLLBACK = ("BEGIN", None), ("COMMIT", None), ("ROLLBACK", None)


def seconds(v):
    return v if v is None or isinstance(v, timedelta) else timedelta(seconds=v)


@dataclass
class Options:
    """scope: the records' scope; mode: "single" (claim, handler and result in one
    transaction), "two-phase" (claim with a lease, handler outside a transaction) or "off" (a
    plain transaction around the handler: no key, nothing stored); lease, ttl: timedelta or
    seconds (two-phase: lease 30 s by default); headers: the response headers stored and
    replayed; heartbeat: seconds between lease renewals (two-phase; default lease / 3);
    fingerprint: SQL of the request's fingerprint over %(body)s, the raw body as bytea."""
    scope: str
    mode: str = "single"
    lease: Union[timedelta, float, None] = None
    ttl: Union[timedelta, float, None] = None
    headers: Sequence[str] = ("Content-Type", "Location")
    heartbeat: Optional[float] = None
    fingerprint: str = "idempotency.idem_fingerprint(%(body)s::bytea)"

    def __post_init__(self):
        if self.mode not in ("single", "two-phase", "off"):
            raise ValueError(f"mode {self.mode!r}: single, two-phase or off")
        self.ttl, self.lease = seconds(self.ttl), seconds(self.lease)
        if self.mode == "two-phase":
            self.lease = self.lease or timedelta(seconds=30)
            self.heartbeat = self.heartbeat or self.lease.total_seconds() / 3
        self.allowed = {h.lower(): h for h in self.headers}
        args = "".join(f", {n} => %({n})s" for n in ("lease", "ttl") if getattr(self, n))
        self.claim_sql = (
            "SELECT c.outcome, c.attempt, k.key, a.status, a.headers, a.body"
            " FROM idempotency.idem_key_from_header(%(header)s) k(key),"
            f" idempotency.idem_claim(%(scope)s, k.key, {self.fingerprint}{args}) c, idempotency.idem_http_answer(c) a")

    def stored_headers(self, headers) -> dict:
        """The allow-listed headers of an answer (str or bytes pairs), as a JSON object."""
        text = lambda s: s.decode("latin-1") if isinstance(s, bytes) else s  # noqa: E731
        pairs = ((text(k).lower(), text(v)) for k, v in headers)
        return {self.allowed[k]: v for k, v in pairs if k in self.allowed}


class Handle:
    """What a handler sees of its request's claim: key (as parsed), attempt (the fencing token),
    outcome ("claimed", or "reclaimed": an earlier attempt may have had effects: reconcile),
    resource_id (stored with the result; default: the last segment of the Location header)."""

    def __init__(self, options: Options, pool):
        self.options, self._pool = options, pool
        self.key = self.attempt = self.outcome = self.resource_id = None
        self._conn = None  # the request's transaction, once there is one

    @property
    def reclaimed(self) -> bool:
        return self.outcome == "reclaimed"


def is_result(status: int) -> bool:
    """The rule: a 1xx-3xx answer is the request's result (stored, replayed); a 4xx is an
    answer without effect (rolled back; sent, not stored: a retry runs again); 5xx and
    exceptions roll back too, and two-phase marks the attempt failed, retryable."""
    return status < 400


def problem(status: int, detail: str, retry_after: Optional[int] = None, **extra):
    """An RFC 9457 problem answer: (status, headers, body), as idem_http_answer words them."""
    headers = {"Content-Type": "application/problem+json"}
    if retry_after:
        headers["Retry-After"] = str(retry_after)
    doc = {"type": "about:blank", "title": HTTPStatus(status).phrase, "status": status,
           "detail": detail, **extra}
    return status, headers, json.dumps(doc, separators=(",", ":")).encode()


def error_answer(e: BaseException, claim: bool = False):
    """The answer for a database error, or None (not ours: the framework's 500)."""
    if not isinstance(e, psycopg.Error):
        return None
    state = e.sqlstate
    if claim and state in BAD_REQUEST:
        return problem(400, "the Idempotency-Key header or the body is not valid", sqlstate=state)
    if state == "IK002":  # fenced: another attempt owns the key now; nothing of ours is sent
        return problem(409, "another attempt took this key over", 1)
    if state is None or state in RETRYABLE or state.startswith("08"):
        return problem(503, "the database is unavailable, retry", 1)
    return None


def flow(h: Handle, header: Optional[str], body: bytes):
    """One request, as steps (above); returns its answer. An exception it raises is the
    handler's or the database's: the driver rolls back, error_answer maps it or it is a 500."""
    o = h.options
    if o.mode == "off":
        yield TX, [BEGIN]
        result = yield APP, None
        yield TX, [COMMIT if is_result(result[0]) else ROLLBACK]
        return result
    if header is None:
        return problem(400, "an Idempotency-Key header is required")
    params = {"header": header, "scope": o.scope, "body": body, "lease": o.lease, "ttl": o.ttl}
    try:  # single: BEGIN and the claim in one round trip; two-phase: the claim commits alone
        row = yield (TX, [BEGIN, (o.claim_sql, params)]) if o.mode == "single" else \
            (AUTO, [(o.claim_sql, params)])
    except psycopg.Error as e:
        if error_answer(e, claim=True) is None:
            raise
        return error_answer(e, claim=True)
    h.outcome, h.attempt, h.key, status, headers, answer = row
    if status is not None:  # replayed, in progress, mismatch: what the database answers
        return status, headers, answer or b""
    beat = [(BEAT, False)] if o.mode == "two-phase" else []
    for step in beat:
        yield BEAT, True
    try:
        result = yield APP, None
    except Exception:
        yield from beat
        yield from fail(h)
        raise
    yield from beat
    if not is_result(result[0]):
        yield from fail(h)
        return result
    done = [(COMPLETE_SQL, complete_args(h, *result))]
    try:  # the result and the handler's writes commit together, one round trip
        yield (TX, done + [COMMIT]) if h._conn else (AUTO, done)
    except psycopg.Error as e:
        if e.sqlstate != "IK003":
            raise
        if h._conn:
            yield TX, [ROLLBACK]
        s, hs, b = yield AUTO, [(ANSWER_SQL, (o.scope, h.key))]  # another attempt's result
        return (s, hs, b or b"") if s else problem(409, "this key is being finished", 1)
    return result


def fail(h: Handle):
    """Rolls the handler's transaction back; two-phase: the attempt failed, retryable."""
    if h._conn:
        yield TX, [ROLLBACK]
    if h.options.mode == "two-phase":
        yield AUTO, [(FAIL_SQL, (h.options.scope, h.key, h.attempt))]


def complete_args(h: Handle, status: int, headers, body: bytes) -> tuple:
    o = h.options
    stored = o.stored_headers(headers)
    rid = h.resource_id
    if rid is None and o.allowed.get("location") in stored:
        rid = stored[o.allowed["location"]].rsplit("/", 1)[-1] or None
    return o.scope, h.key, h.attempt, rid, status, body, Jsonb(stored)


def one_query(statements):
    """Statements as one query and its parameters (only one of them has any)."""
    return "; ".join(s for s, _ in statements), next((p for _, p in statements if p), None)


def execute(conn, statements):
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


async def execute_async(conn, statements):
    if len(statements) == 1 or conn.prepare_threshold is not None:
        for statement in statements:
            cur = await conn.execute(*statement)
    else:
        cur = psycopg.AsyncClientCursor(conn)
        await cur.execute(*one_query(statements))
        while cur.nextset():
            pass
    return await cur.fetchone() if cur.description else None
