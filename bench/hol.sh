#!/usr/bin/env bash
# Head-of-line blocking: an unrelated request's latency while twelve duplicates of a 5 s request
# are in flight, against its latency alone (medians of N >= 20 requests each); prints the ratio
# per service (goal: <= 1.2). Before 2.0.0 a duplicate waited in idem_claim holding a pooled
# connection, and an unrelated request queued behind the duplicates; idem_http_begin never waits.
#   bench/hol.sh [LANG...]     LANG: node, go, python (default: every language with a function below)
#   env: N=30 (requests per series) ROUNDS=3 POOL=8 (the service's pool) HOL_DB=bench_hol
# Runs against the database of the libpq environment's server (PGHOST, PGPORT, PGUSER): it
# creates HOL_DB there with the extension if missing. One function per client package.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-30}
POOL=${POOL:-8}
HOL_DB=${HOL_DB:-bench_hol}
[ "$N" -ge 20 ] || { echo "bench/hol.sh: N must be >= 20" >&2; exit 2; }
if [ "$(psql -XAtq -d postgres -c "SELECT count(*) FROM pg_database WHERE datname = '$HOL_DB'")" = 0 ]; then
    createdb "$HOL_DB"
fi
psql -XAtq -d "$HOL_DB" -v ON_ERROR_STOP=1 -c 'CREATE EXTENSION IF NOT EXISTS idempotency'

# node: clients/node on Express and on Fastify, single-transaction mode, a pool of POOL. The
# slow request's handler holds its transaction 5 s (pg_sleep in it); twelve duplicates are sent
# at once, each again after the Retry-After of its 409 while the slow request runs; meanwhile N
# unrelated requests, one after the other over 4 s, each a new key whose handler runs one
# statement. The same series without the slow request and its duplicates is the baseline;
# ROUNDS (3) of the two, alternating, and the medians of all their requests.
node_hol() {
    local node_path script
    node_path=$(clients/node/setup)
    script=$(mktemp /tmp/idem-hol-XXXXXX.js)
    cat >"$script" <<'EOF'
'use strict';
const { spawn } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const [framework, role] = process.argv.slice(2);
const N = Number(process.env.N);

if (role === 'server') {
  const pg = require('pg');
  const { idempotency } = require(`${process.cwd()}/clients/node`);
  const pool = new pg.Pool({ max: Number(process.env.POOL) });
  const idem = idempotency({ pool, principal: (req) => req.headers['x-user'] });
  const work = async (q, slow) => { await q(slow ? 'SELECT pg_sleep(5)' : 'SELECT 1'); };
  idem.ready().then(async () => {
    let server;
    if (framework === 'express') {
      const app = require('express')();
      app.post('/hol', require('express').raw({ type: () => true }), idem.express(async (req, res) => {
        await work((...a) => req.idem.query(...a), req.headers['x-slow']);
        res.status(201).json({ ok: true });
      }));
      server = await new Promise((ok) => { const s = app.listen(0, '127.0.0.1', () => ok(s)); });
    } else {
      const app = require('fastify')();
      app.register(idem.fastifyPlugin);
      app.post('/hol', idem.fastify(), async (request, reply) => {
        await work((...a) => request.idem.query(...a), request.headers['x-slow']);
        return reply.code(201).send({ ok: true });
      });
      await app.listen({ port: 0, host: '127.0.0.1' });
      server = app.server;
    }
    console.log(server.address().port);
  });
} else {
  const child = spawn(process.execPath, [__filename, framework, 'server'], { stdio: ['ignore', 'pipe', 'inherit'] });
  child.stdout.once('data', async (d) => {
    const url = `http://127.0.0.1:${String(d).trim()}/hol`;
    const run = Math.random().toString(36).slice(2);
    let seq = 0;
    const post = (key, headers = {}, retryAfter = false) => fetch(url, { method: 'POST', body: '{"amount":1}',
      headers: { 'Content-Type': 'application/json', 'X-User': 'bench', 'Idempotency-Key': key, ...headers } })
      .then(async (r) => { await r.arrayBuffer(); return retryAfter ? [r.status, r.headers.get('retry-after')] : r.status; });
    const timed = async () => {
      const t = process.hrtime.bigint();
      const status = await post(`u-${run}-${seq += 1}`);
      if (status !== 201) throw new Error(`an unrelated request answered ${status}`);
      return Number(process.hrtime.bigint() - t) / 1e6;
    };
    const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return (s[(s.length - 1) >> 1] + s[s.length >> 1]) / 2; };
    // N requests one after the other, one every 4 s / N (the slow request's window), so that
    // the series spans the window rather than the moment the duplicates arrive.
    const series = async () => {
      const xs = [];
      for (let i = 0; i < N; i += 1) {
        const t0 = Date.now();
        xs.push(await timed());
        await sleep(Math.max(0, 4000 / N - (Date.now() - t0)));
      }
      return xs;
    };
    await series(); // warm-up: connections, JIT
    // ROUNDS rounds of a series alone, then a series while a slow request and its twelve
    // duplicates are in flight: a loaded machine's drift weighs alike on both medians.
    const rounds = Number(process.env.ROUNDS || 3);
    const aloneAll = [];
    const loadedAll = [];
    const statuses = [];
    const retryAfters = new Set();
    let ended = 0;
    for (let round = 0; round < rounds; round += 1) {
      aloneAll.push(...await series());
      let done = false;
      const slowKey = `s-${run}-${round}`;
      const slow = post(slowKey, { 'X-Slow': '1' }).then((s) => { done = true; return s; });
      await sleep(300); // the slow request holds its transaction
      const duplicates = Array.from({ length: 12 }, async () => {
        while (!done) { // as a client does: again after Retry-After
          const [status, retryAfter] = await post(slowKey, { 'X-Slow': '1' }, true);
          statuses.push(status);
          retryAfters.add(retryAfter);
          await sleep(1000 * Number(retryAfter ?? 1));
        }
      });
      await sleep(50);
      loadedAll.push(...await series());
      if (done) ended += 1;
      await slow;
      await Promise.all(duplicates);
    }
    const alone = median(aloneAll);
    const loaded = median(loadedAll);
    const n409 = statuses.filter((s) => s === 409).length;
    console.log(`node ${framework}: unrelated request alone ${alone.toFixed(2)} ms, with 12 duplicates of a 5 s request in flight ${loaded.toFixed(2)} ms (medians of ${aloneAll.length} and ${loadedAll.length}, ${rounds} rounds); ratio ${(loaded / alone).toFixed(2)} (goal <= 1.2); duplicates answered 409: ${n409} of ${statuses.length} (Retry-After ${[...retryAfters].join(', ')}, honoured)${ended ? `; WARNING: in ${ended} round(s) the slow request ended before the series did` : ''}`);
    child.kill();
  });
}
EOF
    for framework in express fastify; do
        PGDATABASE=$HOL_DB NODE_PATH=$node_path N=$N POOL=$POOL ROUNDS=${ROUNDS:-3} node "$script" "$framework" client
    done
    rm -f "$script"
}

# go: clients/go on net/http, single-transaction mode, a pgxpool of POOL, every connection
# opened first; the same load as node's (the slow handler's pg_sleep(5) in its transaction,
# twelve duplicates re-sent every 250 ms), but the unrelated requests, one after the other, fill
# time windows (at least N each): ROUNDS (3) of 2.5 s alone, then the whole time a slow request
# is in flight, so that a loaded machine's drift weighs alike on both medians. Built offline
# (clients/go/offline); the server and its clients in one process.
go_hol() {
    local dir
    dir=$(mktemp -d /tmp/idem-hol-go-XXXXXX)
    cat >"$dir/main.go" <<'EOF'
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/jackc/pgx/v4/pgxpool"
)

func main() {
	ctx := context.Background()
	n, _ := strconv.Atoi(os.Getenv("N"))
	size, _ := strconv.Atoi(os.Getenv("POOL"))
	rounds, _ := strconv.Atoi(os.Getenv("ROUNDS"))
	cfg, err := pgxpool.ParseConfig("")
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = int32(size)
	pool, err := pgxpool.ConnectConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	idem, err := idempotency.New(ctx, pool, idempotency.Options{
		Principal: func(r *http.Request) string { return r.Header.Get("X-User") }})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(idem.HandleFunc("POST /hol", func(w http.ResponseWriter, r *http.Request) {
		sql := "SELECT 1"
		if r.Header.Get("X-Slow") != "" {
			sql = "SELECT pg_sleep(5)"
		}
		if _, err := idempotency.Tx(r.Context()).Exec(r.Context(), sql); err != nil {
			idempotency.Fail(r.Context(), err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	post := func(key string, slow bool) int {
		r, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"amount":1}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-User", "bench")
		r.Header.Set("Idempotency-Key", key)
		if slow {
			r.Header.Set("X-Slow", "1")
		}
		resp, err := client.Do(r)
		if err != nil {
			log.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	seq := 0
	// series: unrelated requests one after the other, at least n, until more returns false.
	series := func(more func() bool) []float64 {
		xs := make([]float64, 0, n)
		for i := 0; i < n || more(); i++ {
			seq++
			t := time.Now()
			if s := post(fmt.Sprintf("u-%s-%d", run, seq), false); s != 201 {
				log.Fatalf("an unrelated request answered %d", s)
			}
			xs = append(xs, float64(time.Since(t).Microseconds())/1000)
		}
		return xs
	}
	median := func(xs []float64) float64 {
		sort.Float64s(xs)
		return (xs[(len(xs)-1)/2] + xs[len(xs)/2]) / 2
	}
	var warm sync.WaitGroup // warm-up: every connection of the pool opened, the statements planned
	for i := 0; i < 2*size; i++ {
		warm.Add(1)
		go func(i int) {
			defer warm.Done()
			for j := 0; j < 20; j++ {
				post(fmt.Sprintf("w-%s-%d-%d", run, i, j), false)
			}
		}(i)
	}
	warm.Wait()
	// Rounds, each 2.5 s alone then a slow request in flight: the machine's drift weighs alike on
	// both medians, which pool the rounds' samples.
	var aloneSeries, loadedSeries []float64
	var statuses, slowStatuses []int
	warnings := 0
	for round := 0; round < rounds; round++ {
		end := time.Now().Add(2500 * time.Millisecond)
		aloneSeries = append(aloneSeries, series(func() bool { return time.Now().Before(end) })...)
		var done int32
		slowKey := fmt.Sprint("s-", run, "-", round)
		slowDone := make(chan int)
		go func() { s := post(slowKey, true); atomic.StoreInt32(&done, 1); slowDone <- s }()
		time.Sleep(300 * time.Millisecond) // the slow request holds its transaction
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := 0; i < 12; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for atomic.LoadInt32(&done) == 0 {
					s := post(slowKey, true)
					mu.Lock()
					statuses = append(statuses, s)
					mu.Unlock()
					time.Sleep(250 * time.Millisecond)
				}
			}()
		}
		time.Sleep(50 * time.Millisecond)
		loaded := series(func() bool { return atomic.LoadInt32(&done) == 0 })
		if len(loaded) == n && atomic.LoadInt32(&done) != 0 {
			warnings++
		}
		loadedSeries = append(loadedSeries, loaded...)
		slowStatuses = append(slowStatuses, <-slowDone)
		wg.Wait()
	}
	longest := 0.0
	for _, x := range loadedSeries {
		if x > longest {
			longest = x
		}
	}
	alone, loaded := median(aloneSeries), median(loadedSeries)
	n409, replayed := 0, 0 // a duplicate sent as the slow request ended: its replay
	for _, s := range statuses {
		if s == 409 {
			n409++
		} else if s == 201 {
			replayed++
		}
	}
	warning := ""
	if warnings > 0 {
		warning = "; WARNING: a slow request ended before the measurement did"
	}
	fmt.Printf("go net/http: unrelated request alone %.2f ms (median of %d), with 12 duplicates of a 5 s request "+
		"in flight %.2f ms (median of %d; the longest %.0f ms); ratio %.2f (goal <= 1.2); %d rounds; duplicates answered 409: %d of %d "+
		"(%d replays as it ended); the slow requests: %v%s\n", alone, len(aloneSeries), loaded, len(loadedSeries),
		longest, loaded/alone, rounds, n409, len(statuses), replayed, slowStatuses, warning)
}
EOF
    clients/go/offline build -o "$dir/hol" "$dir/main.go"
    PGDATABASE=$HOL_DB N=$N POOL=$POOL ROUNDS=${ROUNDS:-3} "$dir/hol"
    rm -rf "$dir"
}

# python: clients/python on FastAPI (uvicorn) and on Flask (waitress), single-transaction mode, a
# pool of POOL, each service in a process of its own; the load and the rounds of go's: the slow
# handler's pg_sleep(5) in its transaction, twelve duplicates re-sent every 250 ms, the
# unrelated requests one after the other (a kept-alive connection) filling ROUNDS (3) windows of
# 2.5 s alone, then the whole time a slow request is in flight (at least N each).
python_hol() {
    local script
    script=$(mktemp /tmp/idem-hol-XXXXXX.py)
    cat >"$script" <<'EOF'
import http.client
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid

N, POOL, ROUNDS = int(os.environ["N"]), int(os.environ["POOL"]), int(os.environ.get("ROUNDS", "3"))
CONNECT = {"autocommit": True, "prepare_threshold": None}


def server(framework):
    sys.path.insert(0, "clients/python/src")
    from idempotency import Options
    # IPPROTO_TCP: asyncio sets TCP_NODELAY on the connections of such a socket only (else
    # Nagle's algorithm holds the answer's body for the client's delayed ACK, 40 ms)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    if framework == "fastapi":
        import uvicorn
        from fastapi import FastAPI, Request
        from fastapi.responses import JSONResponse
        from psycopg_pool import AsyncConnectionPool
        from idempotency.asgi import IdempotencyMiddleware
        pool = AsyncConnectionPool(min_size=POOL, max_size=POOL, open=False, kwargs=CONNECT)
        app = FastAPI()

        async def open_pool():
            await pool.open(wait=True)
            print(sock.getsockname()[1], flush=True)
        app.add_event_handler("startup", open_pool)

        @app.post("/hol")
        async def hol(request: Request):
            db = await request.state.idem.connect()
            await db.execute("SELECT pg_sleep(5)" if request.headers.get("x-slow") else "SELECT 1")
            return JSONResponse({"ok": True}, 201)
        app.add_middleware(IdempotencyMiddleware, pool=pool, routes={"POST /hol": Options()},
                           principal=lambda r: r.headers.get("x-user"))
        uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False)).run(sockets=[sock])
    else:
        import flask
        import waitress
        from psycopg_pool import ConnectionPool
        from idempotency.flask import Idempotency
        pool = ConnectionPool(min_size=POOL, max_size=POOL, open=True, kwargs=CONNECT)
        pool.wait()
        app = flask.Flask(__name__)
        idempotent = Idempotency(pool, principal=lambda r: r.headers.get("X-User"))

        @app.post("/hol")
        @idempotent()
        def hol():
            flask.g.idem.connect().execute("SELECT pg_sleep(5)" if flask.request.headers.get("X-Slow") else "SELECT 1")
            return {"ok": True}, 201
        srv = waitress.create_server(app, sockets=[sock], threads=32)
        print(sock.getsockname()[1], flush=True)
        srv.run()


def client(framework):
    proc = subprocess.Popen([sys.executable, __file__, framework, "server"], stdout=subprocess.PIPE)
    port = int(proc.stdout.readline())
    run = uuid.uuid4().hex[:8]
    local = threading.local()

    def post(key, slow=False):
        if getattr(local, "c", None) is None:
            local.c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        h = {"Content-Type": "application/json", "X-User": "bench", "Idempotency-Key": key}
        if slow:
            h["X-Slow"] = "1"
        try:
            local.c.request("POST", "/hol", body=b'{"amount":1}', headers=h)
            r = local.c.getresponse()
            r.read()
            return r.status
        except (OSError, http.client.HTTPException):
            local.c = None
            raise
    seq = [0]

    def series(more):
        xs = []
        while len(xs) < N or more():
            seq[0] += 1
            t = time.perf_counter()
            s = post(f"u-{run}-{seq[0]}")
            if s != 201:
                sys.exit(f"an unrelated request answered {s}")
            xs.append((time.perf_counter() - t) * 1000)
        return xs

    def warm(i):
        for j in range(20):
            post(f"w-{run}-{i}-{j}")
    threads = [threading.Thread(target=warm, args=(i,)) for i in range(2 * POOL)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    alone, loaded, statuses, slow_statuses, warnings = [], [], [], [], 0
    for r in range(ROUNDS):
        end = time.monotonic() + 2.5
        alone += series(lambda: time.monotonic() < end)
        done = threading.Event()
        slow_key = f"s-{run}-{r}"

        def slow():
            slow_statuses.append(post(slow_key, True))
            done.set()

        def duplicate():
            while not done.is_set():
                statuses.append(post(slow_key, True))
                time.sleep(0.25)
        first = threading.Thread(target=slow)
        first.start()
        time.sleep(0.3)  # the slow request holds its transaction
        dups = [threading.Thread(target=duplicate) for _ in range(12)]
        for t in dups:
            t.start()
        time.sleep(0.05)
        xs = series(lambda: not done.is_set())
        if len(xs) == N and done.is_set():
            warnings += 1
        loaded += xs
        first.join()
        for t in dups:
            t.join()
    proc.kill()
    a, b = statistics.median(alone), statistics.median(loaded)
    n409, replays = statuses.count(409), statuses.count(201)
    print(f"python {framework}: unrelated request alone {a:.2f} ms (median of {len(alone)}), with 12 duplicates"
          f" of a 5 s request in flight {b:.2f} ms (median of {len(loaded)}; the longest {max(loaded):.0f} ms);"
          f" ratio {b / a:.2f} (goal <= 1.2); {ROUNDS} rounds; duplicates answered 409: {n409} of {len(statuses)}"
          f" ({replays} replays as it ended); the slow requests: {slow_statuses}"
          + ("; WARNING: a slow request ended before the measurement did" if warnings else ""), flush=True)


if __name__ == "__main__":
    (server if sys.argv[2] == "server" else client)(sys.argv[1])
EOF
    for framework in fastapi flask; do
        PGDATABASE=$HOL_DB N=$N POOL=$POOL ROUNDS=${ROUNDS:-3} /usr/bin/python3 "$script" "$framework" client
    done
    rm -f "$script"
}

langs=("$@")
[ ${#langs[@]} -gt 0 ] || langs=(node go python)
for l in "${langs[@]}"; do
    case "$l" in
    node) node_hol ;;
    go) go_hol ;;
    python) python_hol ;;
    *) echo "bench/hol.sh: no function for $l" >&2; exit 2 ;;
    esac
done
