package idempotency

// Unit tests (go test -short: no database) and tests against PostgreSQL with the extension
// (the libpq environment: PGHOST, PGPORT, PGUSER, PGDATABASE; clients/run-tests).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

var user = func(r *http.Request) string { return r.Header.Get("X-User") }

func TestNewRefusesMisconfiguration(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{}, "Options.Principal is required"},
		{Options{Principal: user, SharedKeySpace: true}, "exclude each other"},
		{Options{Principal: user, Mode: "two_phase"}, `unknown Mode "two_phase"`},
		{Options{Principal: user, TTL: 86400}, "Options.TTL is 86.4µs: a time.Duration of at least one second"},
		{Options{Principal: user, Mode: TwoPhase, Lease: 30}, "Options.Lease is 30ns"},
		{Options{Principal: user, Lease: -time.Second}, "Options.Lease is -1s"},
		{Options{Principal: user, Mode: TwoPhase, TTL: 10 * time.Second}, "TTL 10s is shorter than the lease 30s"},
		{Options{Principal: user, Heartbeat: time.Second}, "Heartbeat is for Mode TwoPhase"},
		{Options{Principal: user, Mode: TwoPhase, Lease: 3 * time.Second, Heartbeat: 3 * time.Second}, "must be shorter"},
		{Options{Principal: user}, "New needs a pgxpool.Pool"},
	} {
		m, err := New(ctx, nil, c.o)
		if m != nil || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error with %q", c.o, err, c.want)
		}
	}
}

func TestHandleNeedsATemplate(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Handle accepted an empty route")
		}
	}()
	(&Middleware{}).Handle(" ", http.NotFoundHandler())
}

func TestRecorderAndHeaders(t *testing.T) {
	rec := &recorder{header: http.Header{}}
	rec.Header().Set("location", "/v1/things/1")
	rec.Header().Add("Link", "<a>")
	rec.Header().Add("Link", "<b>")
	rec.WriteHeader(201)
	rec.WriteHeader(500) // a second WriteHeader changes nothing, as in net/http
	rec.Write([]byte("<html>x"))
	a := rec.answer()
	got := fmt.Sprint(*a.status, " ", string(a.body), " ", string(rec.headersJSON()))
	want := `201 <html>x {"Content-Type":"text/html; charset=utf-8","Link":"\u003ca\u003e, \u003cb\u003e","Location":"/v1/things/1"}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestMapLookup(t *testing.T) {
	st := func(n int) *answer { return &answer{status: &n} }
	m := &Middleware{errors: map[string]*answer{"40001": st(503), "08": st(504), "": st(500)}}
	var got []string
	for _, code := range []string{"40001", "08006", "23505", ""} {
		a, row := m.mapped(code)
		got = append(got, fmt.Sprint(code, ">", row, ":", *a.status))
	}
	if s := strings.Join(got, " "); s != "40001>40001:503 08006>08:504 23505>:500 >:500" {
		t.Fatal(s)
	}
	if code := sqlstate(fmt.Errorf("read: %w", io.ErrUnexpectedEOF), nil); code != "08" {
		t.Fatalf("a lost connection: %q", code)
	}
	if code := sqlstate(errors.New("cannot encode"), nil); code != "" {
		t.Fatalf("another error: %q", code)
	}
}

// The database tests.

// testPool is a pool on the libpq environment's database; configure may change its config.
func testPool(t *testing.T, configure func(*pgxpool.Config)) *pgxpool.Pool {
	if testing.Short() {
		t.Skip("needs PostgreSQL (the libpq environment)")
	}
	cfg, err := pgxpool.ParseConfig("statement_cache_mode=describe")
	if err != nil {
		t.Fatal(err)
	}
	if configure != nil {
		configure(cfg)
	}
	p, err := pgxpool.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func effects(t *testing.T, p *pgxpool.Pool) {
	if _, err := p.Exec(context.Background(), "CREATE TABLE IF NOT EXISTS go_effects (key text, n int)"); err != nil {
		t.Fatal(err)
	}
}

func one(t *testing.T, p *pgxpool.Pool, sql string, args ...interface{}) string {
	var s string
	if err := p.QueryRow(context.Background(), sql, args...).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// record is the key's record as idem_lookup gives it (or none).
func record(t *testing.T, p *pgxpool.Pool, scope, key string) string {
	return one(t, p, `SELECT coalesce((SELECT concat_ws(' ', status, attempt, resource_id, response_status)
		FROM idempotency.idem_lookup($1, $2)), 'none')`, scope, key)
}

// post sends body with key (and X-User: u1) to url: "status replayed body", or the error.
func post(t *testing.T, url, key, body string) string {
	r, _ := http.NewRequest("POST", url, strings.NewReader(body))
	r.Header.Set("X-User", "u1")
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(r)
	if err != nil { // no t.Fatal: post runs in goroutines too
		return err.Error()
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return fmt.Sprintf("%d %v %s", resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true", b)
}

func unique(prefix string) string { return fmt.Sprint(prefix, "-", time.Now().UnixNano()) }

func serve(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func newMiddleware(t *testing.T, p *pgxpool.Pool, o Options) *Middleware {
	if o.Principal == nil && !o.SharedKeySpace {
		o.Principal = user
	}
	m, err := New(context.Background(), p, o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A route in each mode: the handler's write, its answer with Location, the scope from the
// principal and the route's template, resource_id from Location or SetResource.
func TestRouteStoresAndReplays(t *testing.T) {
	p := testPool(t, nil)
	effects(t, p)
	for _, mode := range []string{Single, TwoPhase} {
		route := unique("/v1/things/{id} " + mode)
		var runs int32
		m := newMiddleware(t, p, Options{Mode: mode})
		url := serve(t, m.Handle(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := atomic.AddInt32(&runs, 1)
			c := ClaimOf(r.Context())
			tx, err := Begin(r.Context())
			if err == nil {
				_, err = tx.Exec(r.Context(), "INSERT INTO go_effects VALUES ($1, $2)", c.Key, n)
			}
			if err != nil {
				Fail(r.Context(), err)
				return
			}
			if mode == TwoPhase {
				SetResource(r.Context(), "explicit")
			}
			w.Header().Set("Location", fmt.Sprint("/v1/things/t", n))
			w.WriteHeader(201)
			fmt.Fprintf(w, "run %d attempt %d scope %s", n, c.Attempt, c.Scope)
		})))
		k := unique("k")
		got := []string{post(t, url, k, `{"a": 1}`), post(t, url, `"`+k+`"`, `{ "a":1.0 }`),
			post(t, url, k, `{"a": 2}`)[:9], record(t, p, "u1/POST "+route, k),
			one(t, p, "SELECT count(*)::text FROM go_effects WHERE key = $1", k)}
		resource := map[string]string{Single: "t1", TwoPhase: "explicit"}[mode]
		want := fmt.Sprintf("201 false run 1 attempt 1 scope u1/POST %s|201 true run 1 attempt 1 scope u1/POST %s|"+
			"422 false|completed 1 %s 201|1", route, route, resource)
		if strings.Join(got, "|") != want {
			t.Errorf("%s:\ngot  %s\nwant %s", mode, strings.Join(got, "|"), want)
		}
		if s := p.Stat(); s.AcquiredConns() != 0 {
			t.Errorf("%s: %d connections not released", mode, s.AcquiredConns())
		}
	}
}

// A panic: the 500 of the map, the handler's writes rolled back, the key released, the panic
// logged with its stack, the connection kept (the client gets an answer).
func TestPanicIs500AndReleases(t *testing.T) {
	p := testPool(t, nil)
	effects(t, p)
	for _, mode := range []string{Single, TwoPhase} {
		var logged bytes.Buffer
		m := newMiddleware(t, p, Options{Mode: mode, ErrorLog: log.New(&logged, "", 0)})
		k := unique("panic")
		url := serve(t, m.Handle("POST /panic "+k, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tx, _ := Begin(r.Context())
			tx.Exec(r.Context(), "INSERT INTO go_effects VALUES ($1, 1)", k)
			var nilMap map[string]int
			nilMap["x"]++ // a runtime error
		})))
		got := post(t, url, k, `{}`)
		if !strings.HasPrefix(got, `500 false {"type":"about:blank","title":"Internal Server Error","status":500`) {
			t.Errorf("%s: %s", mode, got)
		}
		rec := record(t, p, "u1/POST /panic "+k, k)
		if rec != "none" && rec != "failed 1" {
			t.Errorf("%s: the key's record %s", mode, rec)
		}
		if n := one(t, p, "SELECT count(*)::text FROM go_effects WHERE key = $1", k); n != "0" {
			t.Errorf("%s: %s writes of the panicking handler committed", mode, n)
		}
		if !strings.Contains(logged.String(), "the handler panicked: assignment to entry in nil map") ||
			!strings.Contains(logged.String(), "idempotency_test.go") {
			t.Errorf("%s: the panic was not logged with its stack: %q", mode, logged.String())
		}
		if s := p.Stat(); s.AcquiredConns() != 0 {
			t.Errorf("%s: %d connections not released", mode, s.AcquiredConns())
		}
	}
}

// No head-of-line blocking: with a pool of 2, a request whose handler holds its transaction
// (Single mode: a connection) on a latch, twelve duplicates answered 409 with Retry-After while
// it is held, and an unrelated request answered while it is still held: a duplicate that waited
// holding a connection would leave the unrelated request nothing to run on (it would hang until
// the clients' timeout of a minute, and fail).
func TestNoHeadOfLineBlocking(t *testing.T) {
	p := testPool(t, func(c *pgxpool.Config) { c.MaxConns = 2 })
	for _, mode := range []string{Single, TwoPhase} {
		m := newMiddleware(t, p, Options{Mode: mode})
		latch, started := make(chan struct{}), make(chan struct{})
		var once sync.Once
		unlatch := func() { once.Do(func() { close(latch) }) }
		defer unlatch() // also when the test fails: the server's Close waits for the held request
		route := unique("POST /hol " + mode)
		mux := http.NewServeMux()
		mux.Handle("/slow", m.Handle(route+" slow", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(started)
			<-latch
			w.WriteHeader(201)
		})))
		mux.Handle("/fast", m.Handle(route+" fast", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(201)
		})))
		url := serve(t, mux)
		first := make(chan string, 1)
		go func() { first <- post(t, url+"/slow", "held", `{}`) }()
		<-started
		var wg sync.WaitGroup
		answers := make([]string, 12)
		for i := range answers {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				r, _ := http.NewRequest("POST", url+"/slow", strings.NewReader(`{}`))
				r.Header.Set("X-User", "u1")
				r.Header.Set("Idempotency-Key", "held")
				resp, err := (&http.Client{Timeout: time.Minute}).Do(r) // a failure, not a hang
				if err != nil {
					answers[i] = err.Error()
					return
				}
				resp.Body.Close()
				answers[i] = fmt.Sprint(resp.StatusCode, " Retry-After ", resp.Header.Get("Retry-After") != "")
			}(i)
		}
		wg.Wait()
		for i, a := range answers {
			if a != "409 Retry-After true" {
				t.Errorf("%s: duplicate %d: %s", mode, i, a)
			}
		}
		unrelated := post(t, url+"/fast", "other", `{}`)
		select {
		case a := <-first:
			t.Fatalf("%s: the held request answered %s before its latch", mode, a)
		default:
		}
		unlatch()
		if got := (<-first) + " | " + unrelated; got != "201 false  | 201 false " {
			t.Errorf("%s: held, unrelated: %s", mode, got)
		}
	}
}

// Two-phase: the heartbeat keeps the key past the lease; a 5xx releases it (failed,
// retryable), and the retry runs as attempt 2.
func TestTwoPhaseHeartbeatAndRelease(t *testing.T) {
	p := testPool(t, nil)
	heartbeatAndRelease(t, p, p)
}

// heartbeatAndRelease runs the middleware on p and reads the records through admin.
func heartbeatAndRelease(t *testing.T, p, admin *pgxpool.Pool) {
	var runs int32
	slow := make(chan struct{})
	m := newMiddleware(t, p, Options{Mode: TwoPhase, Lease: time.Second, Heartbeat: 200 * time.Millisecond})
	route := unique("POST /two")
	url := serve(t, m.Handle(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if atomic.AddInt32(&runs, 1) == 1 {
			<-slow // longer than the lease: only the heartbeat keeps the key
			w.WriteHeader(503)
			return
		}
		fmt.Fprintf(w, "attempt %d", ClaimOf(r.Context()).Attempt)
	})))
	first := make(chan string)
	go func() { first <- post(t, url, "k", `{}`) }()
	time.Sleep(2 * time.Second)
	during := post(t, url, "k", `{}`)
	close(slow)
	got := []string{(<-first)[:9], record(t, admin, "u1/"+route, "k"), during[:9], post(t, url, "k", `{}`),
		record(t, admin, "u1/"+route, "k")}
	want := "503 false|failed 1|409 false|200 false attempt 2|completed 2 200"
	if strings.Join(got, "|") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(got, "|"), want)
	}
}

// Two-phase: an attempt whose lease ran out and was taken over: finishing while the other owns
// the key, its idem_http_end is fenced (IK002: the map's 409); finishing after the other stored
// its answer (IK003), it answers what the other stored.
func TestTwoPhaseFencedAndFinishedByAnother(t *testing.T) {
	p := testPool(t, nil)
	fencedAndFinished(t, p, p)
}

// fencedAndFinished runs the middleware on p; admin ends the first attempt's lease.
func fencedAndFinished(t *testing.T, p, admin *pgxpool.Pool) {
	var got []string
	for _, order := range []string{"fenced", "finished"} {
		route := unique("POST /fence " + order)
		gate := map[int32]chan struct{}{1: make(chan struct{}), 2: make(chan struct{})}
		started := make(chan struct{}, 2)
		var runs int32
		m := newMiddleware(t, p, Options{Mode: TwoPhase, Lease: time.Second, Heartbeat: 900 * time.Millisecond})
		url := serve(t, m.Handle(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := atomic.AddInt32(&runs, 1)
			started <- struct{}{}
			<-gate[n]
			fmt.Fprintf(w, "attempt %d", ClaimOf(r.Context()).Attempt)
		})))
		a1, a2 := make(chan string), make(chan string)
		go func() { a1 <- post(t, url, "k", `{}`) }()
		<-started
		// The first attempt's lease runs out (as if its process had stalled): the next reclaims.
		if _, err := admin.Exec(context.Background(), `UPDATE idempotency.records SET lease_expires_at = now()
			WHERE scope = $1 AND key = 'k'`, "u1/"+route); err != nil {
			t.Fatal(err)
		}
		go func() { a2 <- post(t, url, "k", `{}`) }()
		<-started
		if order == "fenced" {
			close(gate[1])
			got = append(got, <-a1)
			close(gate[2])
			got = append(got, <-a2)
		} else {
			close(gate[2])
			got = append(got, <-a2)
			close(gate[1])
			got = append(got, <-a1)
		}
	}
	want := `409 false {"type":"about:blank","title":"Conflict","status":409,"detail":"Another attempt took this ` +
		`Idempotency-Key over; retry to get its answer."}|200 false attempt 2|200 false attempt 2|200 true attempt 2`
	if strings.Join(got, "|") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(got, "|"), want)
	}
}

func TestSavepointsAndOwnedTransaction(t *testing.T) {
	p := testPool(t, nil)
	effects(t, p)
	k := unique("sp")
	m := newMiddleware(t, p, Options{})
	url := serve(t, m.Handle("POST /sp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, tx := r.Context(), Tx(r.Context())
		tx.BeginFunc(ctx, func(sp pgx.Tx) error {
			sp.Exec(ctx, "INSERT INTO go_effects VALUES ($1, 1)", k)
			return errors.New("rolled back to the savepoint")
		})
		tx.BeginFunc(ctx, func(sp pgx.Tx) error {
			_, err := sp.Exec(ctx, "INSERT INTO go_effects VALUES ($1, 2)", k)
			return err
		})
		body, _ := io.ReadAll(r.Body) // the middleware read it, and left it to read again
		fmt.Fprint(w, tx.Commit(ctx) == ErrOwned, tx.Rollback(ctx) == ErrOwned, " ", string(body))
	})))
	got := post(t, url, k, `{"b": 1}`) + " " + one(t, p, "SELECT string_agg(n::text, ',') FROM go_effects WHERE key = $1", k)
	if got != `200 false true true {"b": 1} 2` {
		t.Fatalf("got %s", got)
	}
}

// Off: a plain transaction around the handler; nothing claimed, no header needed.
func TestModeOff(t *testing.T) {
	p := testPool(t, nil)
	effects(t, p)
	k := unique("off")
	m := newMiddleware(t, p, Options{Mode: Off})
	url := serve(t, m.Handle("POST /off", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Tx(r.Context()).Exec(r.Context(), "INSERT INTO go_effects VALUES ($1, 1)", k)
		w.WriteHeader(map[bool]int{true: 500, false: 201}[r.URL.Query().Get("fail") != ""])
	})))
	got := []string{post(t, url, "", `{}`)[:3], post(t, url+"?fail=1", "", `{}`)[:3],
		one(t, p, "SELECT count(*)::text FROM go_effects WHERE key = $1", k),
		one(t, p, "SELECT count(*)::text FROM idempotency.records WHERE scope LIKE '%/POST /off'")}
	if s := strings.Join(got, " "); s != "201 500 1 0" {
		t.Fatal(s)
	}
}

// Fail fast: a pool that cannot connect, a closed pool, a TTL shorter than the extension's
// default lease.
func TestNewChecksTheDatabase(t *testing.T) {
	testPool(t, nil)
	ctx := context.Background()
	cfg, _ := pgxpool.ParseConfig("host=127.0.0.1 port=1 connect_timeout=2")
	cfg.LazyConnect = true
	unreachable, err := pgxpool.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer unreachable.Close()
	closed := testPool(t, nil)
	closed.Close()
	for _, c := range []struct {
		pool *pgxpool.Pool
		o    Options
		want string
	}{
		{unreachable, Options{Principal: user}, "the start check (idempotency.idem_http_errors()) failed"},
		{closed, Options{Principal: user}, "closed pool"},
		{testPool(t, nil), Options{Principal: user, TTL: 30 * time.Second}, "is shorter than the lease 1m0s"},
	} {
		if _, err := New(ctx, c.pool, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error with %q", err, c.want)
		}
	}
}

// The grants of README.md: a role with exactly those passes the conformance cases in both
// modes and the two-phase tests (heartbeat, release, IK002, IK003); a role without them is
// refused by New. Needs a superuser (to create the role).
func TestReadmeGrants(t *testing.T) {
	admin := testPool(t, nil)
	if one(t, admin, "SELECT rolsuper::text FROM pg_roles WHERE rolname = current_user") != "true" {
		t.Skip("needs a superuser to create the role")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```sql\n(GRANT .*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no ```sql block of GRANTs")
	}
	role := fmt.Sprint("idem_go_grants_", time.Now().UnixNano())
	ctx := context.Background()
	if _, err = admin.Exec(ctx, "CREATE ROLE "+role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(ctx, "DROP OWNED BY "+role+"; DROP ROLE "+role) })
	asRole := func() *pgxpool.Pool {
		return testPool(t, func(c *pgxpool.Config) {
			c.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
				_, err := conn.Exec(ctx, "SET ROLE "+role)
				return err
			}
		})
	}
	if _, err = New(ctx, asRole(), Options{Principal: user, Mode: TwoPhase}); err == nil ||
		!strings.Contains(err.Error(), "lacks privileges") {
		t.Fatalf("a role without the grants: %v", err)
	}
	grants := regexp.MustCompile(`\bTO app;`).ReplaceAllString(string(block[1]), "TO "+role+";")
	if _, err = admin.Exec(ctx, grants); err != nil {
		t.Fatalf("%v\n%s", err, grants)
	}
	p := asRole()
	cases := conformanceCases(t)
	for _, mode := range []string{Single, TwoPhase} {
		c := newConformance(t, p, mode)
		c.admin = admin // the stored rows are read with idem_lookup, which the role may not call
		run, failed := c.run(cases)
		t.Logf("conformance as a role with the README's grants, %s: %d cases, %d failed", mode, run, failed)
	}
	heartbeatAndRelease(t, p, admin)
	fencedAndFinished(t, p, admin)
}

// The middleware's statements and the README's JSON: what a 400 of idem_http_begin looks like.
func TestMissingKeyIs400(t *testing.T) {
	p := testPool(t, nil)
	m := newMiddleware(t, p, Options{})
	url := serve(t, m.Handle("POST /nokey", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the handler ran")
	})))
	got := post(t, url, "", `{}`)
	var doc map[string]interface{}
	if !strings.HasPrefix(got, "400 false ") || json.Unmarshal([]byte(got[10:]), &doc) != nil || doc["status"] != 400.0 {
		t.Fatal(got)
	}
}
