#!/usr/bin/env python3
"""A payment service that charges once per Idempotency-Key: Flask (served by waitress), psycopg 3
and the idempotency package's view decorator (clients/python). The HTTP contract:
examples/README.md; how to run it: examples/python/README.md."""
import json
import time

import flask
import waitress
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

import common as c
from idempotency.flask import Idempotency

pool = ConnectionPool(min_size=c.POOL_SIZE, kwargs=c.CONNECT, open=True)  # Idempotency checks it now
app = flask.Flask(__name__)
idempotent = Idempotency(pool, principal=lambda request: c.principal(request.get_data()))


@app.post("/v1/payments")
@idempotent(lambda request: c.options(request.args.get("mode", ""), request.get_data()))
def create_payment():
    p, mode = c.payment(flask.request.get_data()), flask.request.args.get("mode", "")
    if p is None or mode not in ("", "two-phase"):  # not claimed (c.options): nothing stored
        return {"error": "the body must be a payment: customer, amount, currency"}, 400
    if c.MANUAL:  # bench/http.sh's yardstick, single-transaction mode only
        return pay_by_hand(p) if mode == "" else ({"error": "IDEMPOTENCY=manual: single mode only"}, 400)
    idem = flask.g.idem
    ref = charge(idem, p) if mode == "two-phase" and c.IDEMPOTENCY else None
    db = idem.connect()  # single: the claim's transaction; two-phase: the final one
    pid, row = db.execute(c.INSERT, (p["customer"], p["amount"], p["currency"], ref)).fetchone()
    if p["customer"] == "c_throw":  # the contract's handler that throws (examples/README.md)
        raise RuntimeError("c_throw: the handler failed after its INSERT")
    return row, 201, {"Location": f"/v1/payments/{pid}"}


def pay_by_hand(p):
    """IDEMPOTENCY=manual: the same route with the exactly-once record written by hand (common.py)."""
    request = flask.request
    key, scope, fingerprint = c.manual_record(request.headers.get("Idempotency-Key"), request.get_data(),
                                              p["customer"])
    if key is None:
        return c.NO_KEY, 400
    with pool.connection() as db, db.transaction():
        if db.execute(c.CLAIM, (scope, key, fingerprint)).fetchone() is None:  # a retry
            stored, status, headers, body = db.execute(c.STORED, (scope, key)).fetchone()
            if stored != fingerprint:
                return c.OTHER_BODY, 422
            return body, status, {**headers, "Idempotent-Replayed": "true"}
        pid, row = db.execute(c.INSERT, (p["customer"], p["amount"], p["currency"], None)).fetchone()
        if p["customer"] == "c_throw":
            raise RuntimeError("c_throw: the handler failed after its INSERT")
        answer = flask.current_app.make_response((row, 201, {"Location": f"/v1/payments/{pid}"}))
        headers = {"Content-Type": answer.headers["Content-Type"], "Location": answer.headers["Location"]}
        db.execute(c.STORE, (answer.status_code, Jsonb(headers), answer.get_data(), scope, key))
    return answer


def charge(idem, p):
    """Two-phase: the slow fake provider, called outside any transaction. reclaimed: an earlier
    attempt may have charged under this key: ask the provider first."""
    with pool.connection() as db:
        find = lambda: db.execute(c.FIND_CHARGE, (idem.key,)).fetchone()  # noqa: E731
        row = find() if idem.reclaimed else None
        if row is None:
            time.sleep(c.PROVIDER_DELAY)
            row = db.execute(c.CHARGE, (idem.key, p["amount"], p["currency"])).fetchone() or find()
    time.sleep(c.COMPLETE_DELAY)
    return row[0]


@app.post("/v1/webhooks/provider")
def webhook():
    """idem_webhook_receive and the event's effect in one transaction."""
    body, h = flask.request.get_data(), flask.request.headers
    try:
        event = json.loads(body)
    except ValueError:
        return {"error": "body is not JSON"}, 400
    with pool.connection() as db, db.transaction():
        outcome = db.execute(c.RECEIVE, c.receive_args(h, body)).fetchone()[0]
        if outcome == "new":
            db.execute(c.EFFECT, c.effect_args(h, event))
    return {"outcome": outcome}, c.WEBHOOK_STATUS.get(outcome, 400)


@app.get("/healthz")
def healthz():
    return "ok", 200, {"Content-Type": "text/plain"}


if __name__ == "__main__":  # waitress: a production WSGI server (threads, keep-alive)
    server = waitress.create_server(app, host="127.0.0.1", port=c.PORT, threads=c.POOL_SIZE)
    print(f"listening on 127.0.0.1:{c.PORT}", flush=True)
    server.run()
