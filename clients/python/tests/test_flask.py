"""The Flask decorator against the database: the check when it is made, the rule as the
operation, Flask's own error handling inside the view, the role's privileges, no head-of-line
blocking."""
import threading
import time
import uuid
from datetime import timedelta

import flask
import pytest
from psycopg import sql
from psycopg_pool import ConnectionPool

from conftest import CONNECT
from idempotency import ConfigurationError, Options
from idempotency.flask import Idempotency


@pytest.fixture
def pool():
    p = ConnectionPool(kwargs=CONNECT, min_size=1, max_size=4)
    p.wait()
    yield p
    p.close()


def test_a_pool_not_open_is_refused_when_made():
    closed = ConnectionPool(kwargs=CONNECT, open=False)
    with pytest.raises(ConfigurationError, match=r"is not open: open it \(pool.open\(wait=True\)"):
        Idempotency(closed, principal=lambda r: "u")


def test_principal_or_shared_key_space_is_required(pool):
    with pytest.raises(ConfigurationError, match="principal is required"):
        Idempotency(pool)
    with pytest.raises(TypeError, match="ConnectionPool"):
        Idempotency(object(), principal=lambda r: "u")


def test_the_operation_is_the_rule_and_flask_handles_its_own_errors(pool, db):
    app = flask.Flask(__name__)
    idempotent = Idempotency(pool, principal=lambda request: request.headers.get("X-User"))

    @app.post("/v1/items/<int:item_id>")
    @idempotent()
    def item(item_id):
        if item_id == 404:
            flask.abort(404)
        db_ = flask.g.idem.connect()
        db_.execute("SELECT 1")
        return {"item": item_id, "scope": flask.g.idem.scope}, 201, {"Location": f"/v1/items/{item_id}"}
    c = app.test_client()
    key = str(uuid.uuid4())
    first = c.post("/v1/items/7", data=b"{}", headers={"Idempotency-Key": key, "X-User": "u:F"})
    again = c.post("/v1/items/8", data=b"{}", headers={"Idempotency-Key": key, "X-User": "u:F"})
    missing = c.post("/v1/items/404", data=b"{}", headers={"Idempotency-Key": str(uuid.uuid4()), "X-User": "u:F"})
    assert (first.status_code, first.get_json()["scope"]) == (201, "u:F/POST /v1/items/<int:item_id>")
    assert (again.status_code, again.headers["Idempotent-Replayed"], again.data) == (201, "true", first.data)
    assert missing.status_code == 404  # abort() is the view's answer, a 404 (stored)
    row = db.execute("SELECT status, resource_id FROM idempotency.idem_lookup(%s, %s)",
                     ("u:F/POST /v1/items/<int:item_id>", key)).fetchone()
    assert row == ("completed", "7")


def test_the_check_names_the_privileges_the_role_lacks(db):
    """A role with no EXECUTE on the contract's functions: the check names them all and the
    GRANT to run."""
    can = db.execute("SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user").fetchone()[0]
    if not can:
        pytest.skip("creating a role without privileges needs CREATEROLE, which this role has not")
    role = f"idem_py_{uuid.uuid4().hex[:8]}"
    db.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        p = ConnectionPool(kwargs=dict(CONNECT, user=role), min_size=1)
        p.wait()
        try:
            with pytest.raises(ConfigurationError) as e:
                Idempotency(p, principal=lambda r: "u")
            for f in ("idem_http_begin", "idem_http_end", "idem_http_release", "idem_http_answer(text,text)"):
                assert f in str(e.value)
            assert f"TO {role}" in str(e.value)
            for f in ("idem_heartbeat", "idem_claim", "idem_complete", "idem_fail", "idem_lookup"):
                assert f not in str(e.value)
        finally:
            p.close()
    finally:
        db.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.mark.parametrize("mode", ["single", "two-phase"])
def test_no_head_of_line_blocking(mode, db):
    """As the ASGI test: a pool of 2, the first request held on a latch, twelve duplicates
    answered 409 at once, an unrelated request completing while the first is held (join's
    timeout only turns a hang into a failure)."""
    p = ConnectionPool(kwargs=CONNECT, min_size=2, max_size=2, timeout=60)
    p.wait()
    entered, latch = threading.Event(), threading.Event()
    app = flask.Flask(__name__)
    idempotent = Idempotency(p, principal=lambda r: "hol")

    @app.post("/slow")
    @idempotent(Options(mode=mode))
    def slow():
        flask.g.idem.connect().execute("SELECT 1")
        entered.set()
        latch.wait(120)
        return {"slow": True}, 201

    @app.post("/fast")
    @idempotent(Options(mode=mode))
    def fast():
        flask.g.idem.connect().execute("SELECT 1")
        return {"fast": True}, 201
    key, answers = str(uuid.uuid4()), {}

    def post(name, path, k):
        answers[name] = app.test_client().post(path, data=b"{}", headers={"Idempotency-Key": k})
    try:
        first = threading.Thread(target=post, args=("first", "/slow", key))
        first.start()
        assert entered.wait(60)
        dups = [threading.Thread(target=post, args=(i, "/slow", key)) for i in range(12)]
        for t in dups:
            t.start()
        for t in dups:
            t.join(60)
        other = threading.Thread(target=post, args=("other", "/fast", str(uuid.uuid4())))
        other.start()
        other.join(60)
        held = first.is_alive()
    finally:
        latch.set()
        first.join(60)
        p.close()
    assert [answers[i].status_code if i in answers else None for i in range(12)] == [409] * 12
    assert all(answers[i].headers["Retry-After"].isdigit() for i in range(12))
    assert answers["other"].status_code == 201 and held
    assert answers["first"].status_code == 201


def test_a_closed_connection_mid_request_is_503_and_releases(pool, db):
    """The handler's connection is killed (class 08, no SQLSTATE from the driver): 503 with
    Retry-After, and the two-phase claim released for the retry."""
    app = flask.Flask(__name__)
    idempotent = Idempotency(pool, principal=lambda r: "u:kill")

    @app.post("/die")
    @idempotent(Options(mode="two-phase"))
    def die():
        conn = flask.g.idem.connect()
        conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return {}, 201
    key = str(uuid.uuid4())
    r = app.test_client().post("/die", data=b"{}", headers={"Idempotency-Key": key})
    assert (r.status_code, r.headers["Retry-After"]) == (503, "1")
    row = db.execute("SELECT status FROM idempotency.idem_lookup('u:kill/POST /die', %s)", (key,)).fetchone()
    assert row == ("failed",)


def test_an_attempt_that_lost_its_lease_answers_what_the_other_stored(db):
    """IK003: the only connection of the pool is the handler's, so its heartbeat cannot renew
    the 1 s lease; another attempt takes the key over and stores its answer meanwhile. The
    first attempt's end is refused: it answers the other's stored answer, and nothing of its
    own stays."""
    p = ConnectionPool(kwargs=CONNECT, min_size=1, max_size=1, timeout=60)
    p.wait()
    entered, latch = threading.Event(), threading.Event()
    app = flask.Flask(__name__)
    idempotent = Idempotency(p, principal=lambda r: "u:ik003")

    @app.post("/slow")
    @idempotent(Options(mode="two-phase", lease=timedelta(seconds=1)))
    def slow():
        flask.g.idem.connect().execute("SELECT 1")
        entered.set()
        latch.wait(60)
        return {"attempt": flask.g.idem.attempt}, 201
    key, answers = str(uuid.uuid4()), {}
    t = threading.Thread(target=lambda: answers.update(
        first=app.test_client().post("/slow", data=b"{}", headers={"Idempotency-Key": key})))
    t.start()
    try:
        assert entered.wait(60)
        time.sleep(1.5)  # the lease runs out
        scope, attempt, run = db.execute(
            "SELECT scope, attempt, run FROM idempotency.idem_http_begin('u:ik003', 'POST /slow', %s, '{}',"
            " lease => '30 s')", (key,)).fetchone()
        assert (attempt, run) == (2, True)
        db.execute("SELECT idempotency.idem_http_end(%s, %s, 2, 201, '{\"Content-Type\": \"text/plain\"}',"
                   " 'the second')", (scope, key))
    finally:
        latch.set()
        t.join(60)
        p.close()
    first = answers["first"]
    assert (first.status_code, first.data, first.headers.get("Idempotent-Replayed")) == (201, b"the second", "true")


def test_the_heartbeat_keeps_a_long_handlers_lease(pool):
    """Two-phase, a 1 s lease renewed every 1/3 s: a duplicate sent after 1.5 s is still a 409,
    not a takeover."""
    entered, latch = threading.Event(), threading.Event()
    app = flask.Flask(__name__)
    idempotent = Idempotency(pool, principal=lambda r: "u:beat")

    @app.post("/long")
    @idempotent(Options(mode="two-phase", lease=timedelta(seconds=1)))
    def long():
        entered.set()
        latch.wait(60)
        return {"attempt": flask.g.idem.attempt}, 201
    key, answers = str(uuid.uuid4()), {}
    t = threading.Thread(target=lambda: answers.update(
        first=app.test_client().post("/long", data=b"{}", headers={"Idempotency-Key": key})))
    t.start()
    try:
        assert entered.wait(60)
        time.sleep(1.5)
        dup = app.test_client().post("/long", data=b"{}", headers={"Idempotency-Key": key})
    finally:
        latch.set()
        t.join(60)
    assert dup.status_code == 409
    assert (answers["first"].status_code, answers["first"].get_json()) == (201, {"attempt": 1})


@pytest.mark.parametrize("mode", ["single", "two-phase", "off"])
def test_the_handlers_writes_commit_only_with_a_stored_answer(pool, db, mode):
    """The handler's write (a claim in a scope of the test's own) stays when its answer is the
    request's result (201), and is rolled back with a 500 or an exception; off mode keeps it
    unless the handler raises."""
    app = flask.Flask(__name__)
    idempotent = Idempotency(pool, principal=lambda r: "u:writes")
    side = f"py-writes-{uuid.uuid4().hex[:8]}"

    @app.post("/write/<outcome>")
    @idempotent(Options(mode=mode))
    def write(outcome):
        flask.g.idem.connect().execute("SELECT idempotency.idem_claim(%s, %s)", (side, outcome))
        if outcome == "raise":
            raise RuntimeError("after the write")
        return {}, int(outcome)
    c = app.test_client()
    for outcome in ("201", "500", "raise"):
        c.post(f"/write/{outcome}", data=b"{}", headers={"Idempotency-Key": str(uuid.uuid4())})
    kept = {o for o in ("201", "500", "raise")
            if db.execute("SELECT 1 FROM idempotency.idem_lookup(%s, %s)", (side, o)).fetchone()}
    assert kept == ({"201", "500"} if mode == "off" else {"201"})


def test_a_ttl_shorter_than_the_lease_is_refused_when_the_decorator_is_made(pool, db):
    lease = db.execute("SELECT current_setting('idempotency.default_lease')::interval").fetchone()[0]
    idempotent = Idempotency(pool, principal=lambda r: "u")
    with pytest.raises(ConfigurationError, match="the view .*view: the ttl .* is shorter than the lease"):
        idempotent(Options(ttl=lease / 2))(view)
    idempotent(Options(ttl=lease / 2, lease=lease / 4))(view)  # its own lease: fine


def view():
    return {}
