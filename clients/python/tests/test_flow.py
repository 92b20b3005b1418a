"""Without a database: the options' checks, and the request's flow (idempotency._core.flow)
driven by a scripted fake driver: which statements it sends in which step and what it answers,
in each mode and on each error path. The contract itself (what is stored, the error map) is the
database's: the conformance tests run it."""
from datetime import timedelta

import psycopg
import pytest

from idempotency import ConfigurationError, Options
from idempotency import _core as core

BODY = b'{"amount": 1}'
CREATED = (201, [(b"content-type", b"application/json"), (b"location", b"/v1/payments/p7"),
                 (b"set-cookie", b"a=1"), (b"Set-Cookie", b"b=2")], b'{"id":"p7"}')
ERRORS = core.ErrorMap([
    ("IK002", 409, {"Retry-After": "1"}, b"ik002", True),
    ("IK003", None, None, None, False),
    ("40001", 503, {"Retry-After": "1"}, b"retry", True),
    ("08", 503, {"Retry-After": "1"}, b"class 08", True),
    (None, 500, {"Content-Type": "application/problem+json"}, b"failed", False),
])
RUN = ("u/POST /p", "k-1", 1, True, False, None, None, None)


def error(sqlstate, cls=psycopg.Error):
    e = cls(f"error {sqlstate}")
    e.sqlstate = sqlstate
    return e


class Driver:
    """Runs flow()'s steps as the real drivers do, answering from a script: per step kind a
    list of results (an exception is raised into the flow). Records the steps."""

    def __init__(self, **script):
        self.script = {k: list(v) for k, v in script.items()}
        self.steps = []

    def run(self, h, header="k-1", body=BODY):
        def do(step):
            self.steps.append(step)
            kind, _ = step
            if kind == core.TX and h._conn is None:
                h._conn = "conn"
            if kind == core.PUT:
                h._conn = None
            if kind in (core.BEAT, core.PUT):
                return None
            answer = self.script[kind].pop(0) if self.script.get(kind) else None
            if isinstance(answer, BaseException):
                raise answer
            return answer() if callable(answer) else answer
        return core.run(core.flow(h, header, body), do)

    def sql(self):
        """The steps as (kind, what each statement calls)."""
        return [(kind, [label(s) for s, _ in arg]) if kind in (core.TX, core.AUTO) else (kind, arg)
                for kind, arg in self.steps]


def label(statement):
    if "1 / idempotency.idem_http_end" in statement:
        return "1 / idem_http_end"
    for name in ("idem_http_begin", "idem_http_end", "idem_http_release", "idem_http_answer"):
        if name in statement:
            return name
    return statement


def handle(mode="single", **kw):
    return core.Handle(Options(mode=mode, **kw), None, "POST /p", ERRORS)


def test_single_stored_commits_in_the_requests_transaction():
    d = Driver(principal=["u"], tx=[RUN, None], app=[CREATED])
    h = handle()
    assert d.run(h) == CREATED
    assert d.sql() == [("principal", None), ("tx", ["BEGIN", "idem_http_begin"]), ("app", None),
                       ("tx", ["1 / idem_http_end", "COMMIT"])]
    params = d.steps[1][1][1][1]
    assert (params["principal"], params["operation"], params["header"], params["body"],
            params["shared"]) == ("u", "POST /p", "k-1", BODY, False)
    scope, key, attempt, status, headers, body, rid, stored = d.steps[3][1][0][1]
    assert (scope, key, attempt, status, body, rid, stored) == (
        "u/POST /p", "k-1", 1, 201, b'{"id":"p7"}', None, '{"Content-Type","Location"}')
    # every header as the framework names it, a repeated one's values joined
    assert headers.obj == {"content-type": "application/json", "location": "/v1/payments/p7",
                           "set-cookie": "a=1, b=2"}


def test_not_stored_rolls_back_then_releases():
    """idem_http_end false: its 1 / 0 aborts the transaction before the COMMIT sent with it."""
    d = Driver(principal=["u"], tx=[RUN, error("22012"), None, None], app=[(503, [], b"down")])
    assert d.run(handle()) == (503, [], b"down")
    assert d.sql()[-3:] == [("tx", ["1 / idem_http_end", "COMMIT"]), ("tx", ["ROLLBACK"]),
                            ("auto", ["idem_http_release"])]


def test_the_databases_answer_is_sent_and_the_handler_not_run():
    answer = (200, {"Idempotent-Replayed": "true"}, b"abc")
    d = Driver(principal=["u"], tx=[("u/POST /p", "k-1", None, False, None) + answer, None])
    assert d.run(handle()) == answer
    assert d.sql() == [("principal", None), ("tx", ["BEGIN", "idem_http_begin"]), ("tx", ["ROLLBACK"])]


def test_two_phase_claims_alone_beats_and_stores_without_a_transaction():
    d = Driver(principal=["u"], auto=[RUN, (True,)], app=[CREATED])
    h = handle("two-phase", lease=timedelta(seconds=6))
    assert d.run(h) == CREATED
    assert d.steps[1][1][0][1]["lease"] == timedelta(seconds=6)
    assert h.options.heartbeat == timedelta(seconds=2)
    assert d.sql() == [("principal", None), ("auto", ["idem_http_begin"]), ("beat", True), ("app", None),
                       ("beat", False), ("auto", ["idem_http_end"])]


def test_two_phase_stores_in_the_transaction_the_handler_opened():
    h = handle("two-phase")

    def handler_connects():
        h._conn = "conn"  # the handler called connect()
        return CREATED
    d = Driver(principal=["u"], auto=[RUN], app=[handler_connects], tx=[None])
    assert d.run(h) == CREATED
    assert d.sql()[-2:] == [("beat", False), ("tx", ["1 / idem_http_end", "COMMIT"])]


def test_shared_key_space_asks_no_principal():
    h = core.Handle(Options(), None, "POST /p", ERRORS, shared_key_space=True)
    d = Driver(tx=[RUN, None], app=[CREATED])
    d.run(h)
    assert d.steps[0][0] == "tx" and d.steps[0][1][1][1]["shared"] is True


def test_off_is_a_plain_transaction():
    d = Driver(app=[CREATED])
    assert d.run(handle("off"), header=None) == CREATED
    assert d.sql() == [("tx", ["BEGIN"]), ("app", None), ("tx", ["COMMIT"])]


@pytest.mark.parametrize("raised,status,body", [
    (RuntimeError("boom"), 500, b"failed"),
    (error("40001"), 503, b"retry"),
    (error("23505"), 500, b"failed"),
    (error("08006"), 503, b"class 08"),
    (error(None, psycopg.OperationalError), 503, b"class 08"),  # connection lost, no code
    (error(None, psycopg.InterfaceError), 500, b"failed"),
])
def test_an_error_in_the_handler_rolls_back_releases_and_answers_by_the_map(raised, status, body):
    d = Driver(principal=["u"], tx=[RUN, None], app=[raised], auto=[None])
    got = d.run(handle())
    assert (got[0], got[2]) == (status, body)
    assert d.sql()[-2:] == [("tx", ["ROLLBACK"]), ("auto", ["idem_http_release"])]


def test_a_broken_connection_is_given_back_before_the_release():
    d = Driver(principal=["u"], tx=[RUN, error("08006"), error("08006")], app=[CREATED], auto=[None])
    assert d.run(handle())[0] == 503
    assert d.sql()[-4:] == [("tx", ["1 / idem_http_end", "COMMIT"]), ("tx", ["ROLLBACK"]), ("put", None),
                            ("auto", ["idem_http_release"])]


def test_a_failed_release_is_not_the_answer():
    d = Driver(principal=["u"], tx=[RUN, None], app=[RuntimeError("x")], auto=[error("57P01")])
    assert d.run(handle())[0] == 500


def test_ik003_answers_what_the_other_attempt_stored():
    stored = (201, {"Location": "/v1/payments/p1"}, b"first")
    d = Driver(principal=["u"], tx=[RUN, error("IK003"), None], app=[CREATED], auto=[None, stored])
    assert d.run(handle()) == stored
    assert d.sql()[-3:] == [("tx", ["ROLLBACK"]), ("auto", ["idem_http_release"]), ("auto", ["idem_http_answer"])]
    d = Driver(principal=["u"], tx=[RUN, error("IK003"), None], app=[CREATED], auto=[None, (None, None, None)])
    assert d.run(handle())[:2] == (409, {"Retry-After": "1"})  # nothing to answer: IK002's


def test_a_principal_function_that_raises_is_a_500_and_claims_nothing():
    d = Driver(principal=[RuntimeError("auth down")])
    assert d.run(handle())[0] == 500
    assert d.sql() == [("principal", None)]


def test_the_error_map_lookup():
    assert ERRORS.row(error("40001")).status == 503
    assert ERRORS.row(error("08P01")).body == b"class 08"
    assert ERRORS.row(error("IK003")).status is None
    assert ERRORS.row(ValueError()).status == 500
    with pytest.raises(ConfigurationError):
        core.ErrorMap([("40001", 503, {}, b"", True)])


@pytest.mark.parametrize("kw,error_type,match", [
    ({"lease": 30}, TypeError, "lease must be a datetime.timedelta"),
    ({"ttl": 86400}, TypeError, "ttl must be a datetime.timedelta"),
    ({"mode": "two-phase", "heartbeat": 5.0}, TypeError, "heartbeat must be"),
    ({"mode": "twophase"}, ConfigurationError, "mode 'twophase'"),
    ({"mode": "two-phase", "ttl": timedelta(seconds=10)}, ConfigurationError, "shorter than the lease"),
    ({"lease": timedelta(minutes=2), "ttl": timedelta(minutes=1)}, ConfigurationError, "shorter than the lease"),
    ({"lease": timedelta(0)}, ConfigurationError, "positive"),
    ({"heartbeat": timedelta(seconds=1)}, ConfigurationError, "two-phase. only"),
    ({"mode": "two-phase", "lease": timedelta(seconds=3), "heartbeat": timedelta(seconds=3)},
     ConfigurationError, "shorter than the lease"),
    ({"headers": "Location"}, TypeError, "sequence of header names"),
    ({"operation": ""}, ConfigurationError, "non-empty"),
])
def test_options_refuse_what_cannot_work(kw, error_type, match):
    with pytest.raises(error_type, match=match):
        Options(**kw)


def test_options_defaults():
    o = Options(mode="two-phase")
    assert (o.lease, o.heartbeat, o.ttl, o.headers) == (timedelta(seconds=30), timedelta(seconds=10),
                                                        None, ("Content-Type", "Location"))
    assert Options().lease is None


def test_principal_configuration():
    with pytest.raises(ConfigurationError, match="principal is required"):
        core.check_principal(None, False)
    with pytest.raises(ConfigurationError, match="not both"):
        core.check_principal(lambda r: "u", True)
    with pytest.raises(TypeError):
        core.check_principal(None, "yes")
    core.check_principal(None, True)
    core.check_principal(lambda r: "u", False)


class FakeCursor:
    def __init__(self, row):
        self.description, self.row = (row and ["col"]), row

    def fetchone(self):
        return self.row

    def nextset(self):
        return None


class FakeConn:
    """Records what is sent on it: (query, params) per execute."""

    def __init__(self, prepare_threshold):
        self.prepare_threshold, self.sent = prepare_threshold, []

    def execute(self, query, params=None):
        self.sent.append((query, params))
        return FakeCursor(("row", query) if params else None)


def test_a_preparing_connection_gets_each_statement_with_its_parameters():
    for threshold in (5, 0):
        conn = FakeConn(threshold)
        assert core.execute(conn, [core.BEGIN, ("SELECT b(%s)", ("k",))]) == ("row", "SELECT b(%s)")
        assert conn.sent == [("BEGIN", None), ("SELECT b(%s)", ("k",))]


def test_an_unprepared_connection_gets_one_client_bound_query(monkeypatch):
    conn, queries = FakeConn(None), []

    class ClientCursor(FakeCursor):
        def __init__(self, c):
            super().__init__(("one",))

        def execute(self, query, params):
            queries.append((query, params))
    monkeypatch.setattr(core.psycopg, "ClientCursor", ClientCursor)
    assert core.execute(conn, [core.BEGIN, ("SELECT b(%s)", ("k",))]) == ("one",)
    assert (conn.sent, queries) == ([], [("BEGIN; SELECT b(%s)", ("k",))])
