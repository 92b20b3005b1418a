#!/usr/bin/env python3
"""A payment service that charges once per Idempotency-Key: Flask (served by waitress), psycopg 3
and the idempotency package's view decorator (clients/python). The HTTP contract:
examples/README.md; how to run it: examples/python/README.md."""
import json
import time

import flask
import waitress
from psycopg_pool import ConnectionPool

import common as c
from idempotency.flask import idempotent

pool = ConnectionPool(min_size=c.POOL_SIZE, open=False, kwargs=c.CONNECT)
app = flask.Flask(__name__)


@app.post("/v1/payments")
@idempotent(pool, lambda: c.options(flask.request.args.get("mode")))
def create_payment():
    p, mode = payment(flask.request.get_data()), flask.request.args.get("mode", "")
    if p is None or mode not in ("", "two-phase"):
        return {"error": "the body must be a payment: customer, amount, currency"}, 400
    idem = flask.g.idem
    ref = charge(idem, p) if mode == "two-phase" and c.IDEMPOTENCY else None
    db = idem.connect()  # single: the claim's transaction; two-phase: the final one
    pid, row = db.execute(c.INSERT, (p["customer"], p["amount"], p["currency"], ref)).fetchone()
    if p["customer"] == "c_throw":  # the contract's handler that throws (examples/README.md)
        raise RuntimeError("c_throw: the handler failed after its INSERT")
    return row, 201, {"Location": f"/v1/payments/{pid}"}


def payment(body):
    """The body as a payment, or None."""
    try:
        p = json.loads(body)
    except ValueError:
        return None
    ok = (isinstance(p, dict) and isinstance(p.get("customer"), str)
          and isinstance(p.get("currency"), str) and type(p.get("amount")) is int
          and 0 < p["amount"] < 2**63)
    return p if ok else None


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
    pool.open(wait=True)
    server = waitress.create_server(app, host="127.0.0.1", port=c.PORT, threads=c.POOL_SIZE)
    print(f"listening on 127.0.0.1:{c.PORT}", flush=True)
    server.run()
