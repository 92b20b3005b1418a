"""The request's flow (idempotency._core.flow), driven by a scripted fake driver: which SQL it
sends in which step, what it answers, what it stores, for every outcome and error. No database:
the examples stage (test/examples/http_test.py) runs the same flow against PostgreSQL.
Run: python3 -m unittest discover -s clients/python/tests (with clients/python/src importable)."""
import json
import os
import re
import sys
import unittest
from datetime import timedelta

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
from idempotency import Handle, Options  # noqa: E402
from idempotency import _core as core  # noqa: E402

BODY = b'{"amount": 1}'
CREATED = (201, [(b"content-type", b"application/json"), (b"location", b"/v1/payments/p7"),
                 (b"x-request-id", b"r1")], b'{"id":"p7"}')


def error(sqlstate):
    e = psycopg.Error(f"error {sqlstate}")
    e.sqlstate = sqlstate
    return e


class Driver:
    """Runs flow()'s steps as the real drivers do, answering from a script: for each step kind,
    a list of results (an exception is raised into the flow). Records the steps."""

    def __init__(self, **script):
        self.script = {k: list(v) for k, v in script.items()}
        self.steps = []

    def run(self, h, header="k-1", body=BODY):
        steps, value, err = core.flow(h, header, body), None, None
        while True:
            try:
                step = steps.throw(err) if err else steps.send(value)
            except StopIteration as stop:
                return stop.value
            value = err = None
            self.steps.append(step)
            kind, arg = step
            if kind == core.TX and h._conn is None:
                h._conn = "conn"
            if kind == core.BEAT:
                continue
            answer = self.script[kind].pop(0) if self.script.get(kind) else None
            if isinstance(answer, BaseException):
                err = answer
            else:
                value = answer

    def sql(self):
        """The steps as (kind, first words of each statement)."""
        out = []
        for kind, arg in self.steps:
            if kind in (core.TX, core.AUTO):
                out.append((kind, [label(s) for s, _ in arg]))
            else:
                out.append((kind, arg))
        return out


def label(sql):
    """claim, the idem_* function a statement calls, or the statement (BEGIN, COMMIT)."""
    if "idempotency.idem_claim(" in sql:
        return "claim"
    m = re.search(r"idem_\w+", sql)
    return m.group(0) if m else sql


CLAIMED = ("claimed", 1, "k-1", None, None, None)


class SingleMode(unittest.TestCase):
    def test_claimed_result_is_completed_with_the_commit(self):
        d = Driver(tx=[CLAIMED, None], app=[CREATED])
        h = Handle(Options("payments"), None)
        self.assertEqual(d.run(h), CREATED)
        self.assertEqual(d.sql(), [
            ("tx", ["BEGIN", "claim"]),
            ("app", None), ("tx", ["idem_complete", "COMMIT"])])
        args = d.steps[-1][1][0][1]
        self.assertEqual(args[:6], ("payments", "k-1", 1, "p7", 201, b'{"id":"p7"}'))
        self.assertEqual(args[6].obj, {"Content-Type": "application/json",
                                       "Location": "/v1/payments/p7"})  # not X-Request-Id

    def test_claim_gets_the_header_scope_and_raw_body(self):
        d = Driver(tx=[CLAIMED, None], app=[CREATED])
        d.run(Handle(Options("payments"), None), header='"k-1"')
        sql, params = d.steps[0][1][1]
        self.assertIn("idempotency.idem_fingerprint(%(body)s::bytea)", sql)
        self.assertNotIn("lease =>", sql)
        self.assertEqual((params["header"], params["scope"], params["body"]),
                         ('"k-1"', "payments", BODY))

    def test_replayed_answer_is_sent_as_stored_and_the_handler_not_run(self):
        stored = (200, {"Idempotent-Replayed": "true"}, b"abc")
        d = Driver(tx=[("replayed", 1, "k-1") + stored])
        self.assertEqual(d.run(Handle(Options("payments"), None)), stored)
        self.assertEqual([k for k, _ in d.steps], ["tx"])

    def test_missing_key_is_400_before_any_sql(self):
        d = Driver()
        status, headers, body = d.run(Handle(Options("payments"), None), header=None)
        self.assertEqual((status, headers["Content-Type"], d.steps), (400, "application/problem+json", []))
        self.assertEqual(json.loads(body)["status"], 400)

    def test_claim_refusals_are_400_and_others_propagate(self):
        for state in sorted(core.BAD_REQUEST):
            d = Driver(tx=[error(state)])
            self.assertEqual(d.run(Handle(Options("payments"), None))[0], 400, state)
        self.assertEqual(Driver(tx=[error("40001")]).run(Handle(Options("p"), None))[0], 503)
        d = Driver(tx=[error("42883")])  # no idem_http_answer: an old extension
        with self.assertRaises(psycopg.Error):
            d.run(Handle(Options("payments"), None))

    def test_handler_exception_rolls_back_and_propagates(self):
        d = Driver(tx=[CLAIMED, None], app=[RuntimeError("boom")])
        with self.assertRaisesRegex(RuntimeError, "boom"):
            d.run(Handle(Options("payments"), None))
        self.assertEqual(d.sql()[-1], ("tx", ["ROLLBACK"]))
        self.assertNotIn("idem_fail", str(d.sql()))

    def test_4xx_and_5xx_are_sent_not_stored(self):
        for status in (400, 404, 422, 500, 503):
            answer = (status, [], b"no")
            d = Driver(tx=[CLAIMED, None], app=[answer])
            self.assertEqual(d.run(Handle(Options("payments"), None)), answer)
            self.assertEqual(d.sql()[-1], ("tx", ["ROLLBACK"]), status)

    def test_ik003_answers_what_the_other_attempt_stored(self):
        stored = (201, {"Location": "/v1/payments/p1"}, b"first")
        d = Driver(tx=[CLAIMED, error("IK003"), None], app=[CREATED], auto=[stored])
        self.assertEqual(d.run(Handle(Options("payments"), None)), stored)
        self.assertEqual(d.sql()[-2:], [("tx", ["ROLLBACK"]), ("auto", ["idem_http_answer"])])

    def test_ik002_propagates_to_a_409(self):
        d = Driver(tx=[CLAIMED, error("IK002")], app=[CREATED])
        with self.assertRaises(psycopg.Error) as cm:
            d.run(Handle(Options("payments"), None))
        status, headers, _ = core.error_answer(cm.exception)
        self.assertEqual((status, headers["Retry-After"]), (409, "1"))

    def test_resource_id_set_by_the_handler_wins(self):
        h = Handle(Options("payments"), None)
        h.resource_id = "custom"
        d = Driver(tx=[CLAIMED, None], app=[CREATED])
        d.run(h)
        self.assertEqual(d.steps[-1][1][0][1][3], "custom")


class TwoPhaseMode(unittest.TestCase):
    def opts(self):
        return Options("payments-two-phase", mode="two-phase", lease=6)

    def test_claim_commits_alone_with_the_lease_and_a_heartbeat_runs(self):
        d = Driver(auto=[CLAIMED, None], app=[CREATED])
        h = Handle(self.opts(), None)
        self.assertEqual(d.run(h), CREATED)
        self.assertEqual(d.sql(), [
            ("auto", ["claim"]), ("beat", True),
            ("app", None), ("beat", False), ("auto", ["idem_complete"])])
        sql, params = d.steps[0][1][0]
        self.assertIn("lease => %(lease)s", sql)
        self.assertEqual((params["lease"], h.options.heartbeat), (timedelta(seconds=6), 2.0))

    def test_handler_transaction_commits_with_the_result(self):
        d = Driver(auto=[("reclaimed", 2, "k-1", None, None, None)], app=[CREATED], tx=[None])
        h = Handle(self.opts(), None)
        h._conn = "conn"  # the handler called connect()
        d.run(h)
        self.assertTrue(h.reclaimed)
        self.assertEqual(h.attempt, 2)
        self.assertEqual(d.sql()[-1], ("tx", ["idem_complete", "COMMIT"]))

    def test_handler_exception_fails_the_attempt_retryable(self):
        d = Driver(auto=[CLAIMED, None], app=[RuntimeError("boom")])
        h = Handle(self.opts(), None)
        with self.assertRaises(RuntimeError):
            d.run(h)
        self.assertEqual(d.sql()[-2:], [("beat", False), ("auto", ["idem_fail"])])
        self.assertIn("retryable => true", d.steps[-1][1][0][0])
        self.assertEqual(d.steps[-1][1][0][1], ("payments-two-phase", "k-1", 1))

    def test_5xx_rolls_back_the_handlers_writes_then_fails(self):
        d = Driver(auto=[CLAIMED, None], app=[(500, [], b"")], tx=[None])
        h = Handle(self.opts(), None)
        h._conn = "conn"
        d.run(h)
        self.assertEqual(d.sql()[-2:], [("tx", ["ROLLBACK"]), ("auto", ["idem_fail"])])


class OffMode(unittest.TestCase):
    def test_a_plain_transaction_without_key_or_records(self):
        d = Driver(app=[CREATED])
        self.assertEqual(d.run(Handle(Options("p", mode="off"), None), header=None), CREATED)
        self.assertEqual(d.sql(), [("tx", ["BEGIN"]), ("app", None), ("tx", ["COMMIT"])])


class Errors(unittest.TestCase):
    def test_map(self):
        cases = {"40001": 503, "40P01": 503, "25006": 503, "57P01": 503, "08006": 503,
                 None: 503, "IK002": 409, "23505": None, "22023": None}
        for state, want in cases.items():
            answer = core.error_answer(error(state))
            self.assertEqual(answer and answer[0], want, state)
            if answer:
                self.assertEqual(answer[1]["Retry-After"], "1")
        self.assertIsNone(core.error_answer(ValueError()))
        self.assertEqual(core.error_answer(error("22023"), claim=True)[0], 400)

    def test_options(self):
        with self.assertRaises(ValueError):
            Options("s", mode="twophase")
        o = Options("s", ttl=60, headers=["location"])
        self.assertEqual((o.ttl, o.lease), (timedelta(seconds=60), None))
        self.assertIn("ttl => %(ttl)s", o.claim_sql)
        self.assertEqual(o.stored_headers([("Location", "/a"), ("Content-Type", "x")]),
                         {"location": "/a"})



class FakeCursor:
    def __init__(self, row):
        self.description, self.row = (row and ["col"]), row

    def fetchone(self):
        return self.row

    def nextset(self):
        return None


class FakeConn:
    """A connection that records what is sent on it: (query, params) per execute."""
    def __init__(self, prepare_threshold):
        self.prepare_threshold, self.sent = prepare_threshold, []

    def execute(self, query, params=None):
        self.sent.append((query, params))
        return FakeCursor(("row", query) if params else None)


class ExecuteTest(unittest.TestCase):
    STATEMENTS = [core.BEGIN, ("SELECT claim(%s)", ("k",))]

    def test_a_preparing_connection_gets_each_statement_with_its_parameters(self):
        for threshold in (5, 0):
            conn = FakeConn(threshold)
            row = core.execute(conn, self.STATEMENTS)
            self.assertEqual(conn.sent, [("BEGIN", None), ("SELECT claim(%s)", ("k",))])
            self.assertEqual(row, ("row", "SELECT claim(%s)"))
            self.assertIsNone(core.execute(conn, [("SELECT c(%s)", ("k",)), core.COMMIT]))

    def test_an_unprepared_connection_gets_one_client_bound_query(self):
        conn, queries = FakeConn(None), []

        class ClientCursor(FakeCursor):
            def __init__(self, c):
                super().__init__(("one",))

            def execute(self, query, params):
                queries.append((query, params))

        real, core.psycopg.ClientCursor = core.psycopg.ClientCursor, ClientCursor
        try:
            self.assertEqual(core.execute(conn, self.STATEMENTS), ("one",))
        finally:
            core.psycopg.ClientCursor = real
        self.assertEqual((conn.sent, queries), ([], [("BEGIN; SELECT claim(%s)", ("k",))]))


if __name__ == "__main__":
    unittest.main()
