#!/usr/bin/env python3
"""A payment service that charges once per Idempotency-Key: FastAPI, uvicorn, psycopg 3 and the
idempotency package's ASGI middleware (clients/python). The HTTP contract: examples/README.md;
how to run it: examples/python/README.md."""
import asyncio
import json
from typing import Literal

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, StrictStr, conint

import common as c
from idempotency.asgi import IdempotencyMiddleware

pool = AsyncConnectionPool(min_size=c.POOL_SIZE, open=False, kwargs=c.CONNECT)
app = FastAPI()


async def principal(request: Request):
    return c.principal(await request.body())


async def payment_options(request: Request):  # single or two-phase by ?mode=, or None
    return c.options(request.query_params.get("mode", ""), await request.body())

# The middleware checks the database (the extension, the grants) when the app starts, after
# open_pool: uvicorn exits with the reason if it fails. IDEMPOTENCY=manual: none (pay_by_hand).
if not c.MANUAL:
    app.add_middleware(IdempotencyMiddleware, pool=pool, principal=principal,
                       routes={"POST /v1/payments": payment_options})


@app.on_event("startup")
async def open_pool():
    await pool.open(wait=True)


@app.on_event("shutdown")
async def close_pool():
    await pool.close()


class Payment(BaseModel):
    customer: StrictStr
    amount: conint(strict=True, gt=0, lt=2**63)
    currency: StrictStr


@app.post("/v1/payments")
async def create_payment(p: Payment, request: Request, mode: Literal["", "two-phase"] = ""):
    if c.MANUAL:  # bench/http.sh's yardstick, single-transaction mode only
        if mode == "":
            return await pay_by_hand(p, request)
        return JSONResponse({"error": "IDEMPOTENCY=manual: single mode only"}, 400)
    idem = request.state.idem
    ref = await charge(idem, p) if mode == "two-phase" and c.IDEMPOTENCY else None
    db = await idem.connect()  # single: the claim's transaction; two-phase: the final one
    cur = await db.execute(c.INSERT, (p.customer, p.amount, p.currency, ref))
    pid, payment = await cur.fetchone()
    if p.customer == "c_throw":  # the contract's handler that throws (examples/README.md)
        raise RuntimeError("c_throw: the handler failed after its INSERT")
    return JSONResponse(payment, 201, {"Location": f"/v1/payments/{pid}"})


async def pay_by_hand(p, request):
    """IDEMPOTENCY=manual: the same route with the exactly-once record written by hand (common.py)."""
    key, scope, fingerprint = c.manual_record(request.headers.get("idempotency-key"), await request.body(),
                                              p.customer)
    if key is None:
        return JSONResponse(c.NO_KEY, 400)
    async with pool.connection() as db, db.transaction():
        if await (await db.execute(c.CLAIM, (scope, key, fingerprint))).fetchone() is None:  # a retry
            stored, status, headers, body = await (await db.execute(c.STORED, (scope, key))).fetchone()
            if stored != fingerprint:
                return JSONResponse(c.OTHER_BODY, 422)
            return Response(body, status, {**headers, "Idempotent-Replayed": "true"})
        cur = await db.execute(c.INSERT, (p.customer, p.amount, p.currency, None))
        pid, payment = await cur.fetchone()
        if p.customer == "c_throw":
            raise RuntimeError("c_throw: the handler failed after its INSERT")
        answer = JSONResponse(payment, 201, {"Location": f"/v1/payments/{pid}"})
        headers = {"Content-Type": answer.headers["content-type"], "Location": answer.headers["location"]}
        await db.execute(c.STORE, (answer.status_code, Jsonb(headers), answer.body, scope, key))
    return answer


async def charge(idem, p):
    """Two-phase: the slow fake provider, called outside any transaction. reclaimed: an earlier
    attempt may have charged under this key: ask the provider first."""
    async with pool.connection() as db:
        find = lambda: db.execute(c.FIND_CHARGE, (idem.key,))  # noqa: E731
        row = await (await find()).fetchone() if idem.reclaimed else None
        if row is None:
            await asyncio.sleep(c.PROVIDER_DELAY)
            cur = await db.execute(c.CHARGE, (idem.key, p.amount, p.currency))
            row = await cur.fetchone() or await (await find()).fetchone()
    await asyncio.sleep(c.COMPLETE_DELAY)
    return row[0]


@app.exception_handler(RequestValidationError)
async def not_a_payment(request, e):
    return JSONResponse({"error": "the body must be a payment: customer, amount, currency"}, 400)


@app.post("/v1/webhooks/provider")
async def webhook(request: Request):
    """idem_webhook_receive and the event's effect in one transaction."""
    body, h = await request.body(), request.headers
    try:
        event = json.loads(body)
    except ValueError:
        return JSONResponse({"error": "body is not JSON"}, 400)
    async with pool.connection() as db, db.transaction():
        outcome = (await (await db.execute(c.RECEIVE, c.receive_args(h, body))).fetchone())[0]
        if outcome == "new":
            await db.execute(c.EFFECT, c.effect_args(h, event))
    return JSONResponse({"outcome": outcome}, c.WEBHOOK_STATUS.get(outcome, 400))


@app.get("/healthz")
async def healthz():
    return PlainTextResponse("ok")


class Server(uvicorn.Server):
    async def startup(self, sockets=None):
        await super().startup(sockets)  # the pool is open (on_startup), the port bound
        print(f"listening on 127.0.0.1:{c.PORT}", flush=True)


if __name__ == "__main__":
    Server(uvicorn.Config(app, host="127.0.0.1", port=c.PORT, log_level="warning",
                          access_log=False)).run()
