package idempotency

// Unit tests (go test -short: no database) and tests against PostgreSQL with the extension
// (the libpq environment: PGHOST, PGPORT, PGUSER, PGDATABASE; test/stages/examples.sh clients:go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

func TestRecorderStoresAllowListedHeadersAndExactBytes(t *testing.T) {
	rec := &recorder{header: http.Header{}}
	rec.Header().Set("location", "/v1/things/1")
	rec.Header().Set("X-Trace", "abc")
	rec.Header().Add("Link", "<a>")
	rec.Header().Add("Link", "<b>")
	rec.WriteHeader(201)
	rec.WriteHeader(500) // a second WriteHeader changes nothing, as in net/http
	rec.Write([]byte("<html>x"))
	a := rec.answer()
	got := fmt.Sprint(*a.status, " ", string(a.body), " ", rec.stored([]string{"Location", "content-type", "link"}))
	want := "201 <html>x map[Content-Type:text/html; charset=utf-8 Link:<a>, <b> Location:/v1/things/1]"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestRules(t *testing.T) {
	var got []string
	for _, s := range []int{200, 201, 302, 400, 404, 408, 409, 422, 425, 429, 500, 503} {
		got = append(got, fmt.Sprint(s, ":", retryableStatus(s)))
	}
	for _, code := range []string{"40001", "40P01", "25006", "08006", "57P01", "IK002", "22023", "23505", "57014"} {
		got = append(got, fmt.Sprint(code, Retryable(&pgconn.PgError{Code: code})))
	}
	got = append(got, fmt.Sprint("EOF", Retryable(fmt.Errorf("read: %w", io.ErrUnexpectedEOF))),
		fmt.Sprint("other", Retryable(errors.New("cannot encode"))))
	want := "200:false 201:false 302:false 400:false 404:false 408:true 409:true 422:false 425:true " +
		"429:true 500:true 503:true 40001true 40P01true 25006true 08006true 57P01true IK002true 22023false " +
		"23505false 57014false EOFtrue otherfalse"
	if strings.Join(got, " ") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
}

func TestMissingKeyIs400AndTxIsOwned(t *testing.T) {
	h := New(nil, Options{Scope: "s"})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Fatal("ran") }))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", "/", strings.NewReader("{}")))
	got := fmt.Sprint(w.Code, " ", w.Header().Get("Content-Type"), " ", w.Body.String())
	want := `400 application/problem+json {"status":400,"title":"Idempotency-Key header required","type":"about:blank"}`
	if got != want {
		t.Fatalf("got %q", got)
	}
	if err := (&tx{}).Rollback(context.Background()); err != ErrOwned {
		t.Fatalf("Rollback of the request's transaction: %v", err)
	}
}

// The database tests.

func pool(t *testing.T) *pgxpool.Pool {
	if testing.Short() {
		t.Skip("needs PostgreSQL (the libpq environment)")
	}
	cfg, err := pgxpool.ParseConfig("statement_cache_mode=describe")
	if err != nil {
		t.Fatal(err)
	}
	p, err := pgxpool.ConnectConfig(context.Background(), cfg)
	if err == nil {
		_, err = p.Exec(context.Background(), "CREATE TABLE IF NOT EXISTS go_effects (key text, n int)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// send posts body with key through h and returns status, replayed, body.
func send(h http.Handler, key, body string) string {
	r := httptest.NewRequest("POST", "/", strings.NewReader(body))
	r.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	replayed := w.Header().Get("Idempotent-Replayed") == "true"
	return fmt.Sprintf("%d %v %s", w.Code, replayed, w.Body.String())
}

func one(t *testing.T, p *pgxpool.Pool, sql string, args ...interface{}) string {
	var s string
	if err := p.QueryRow(context.Background(), sql, args...).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func record(t *testing.T, p *pgxpool.Pool, scope, key string) string {
	return one(t, p, `SELECT coalesce((SELECT concat_ws(' ', status, retryable::text, attempt, resource_id, response_status,
		response_headers) FROM idempotency.records WHERE scope = $1 AND key = $2), 'none')`, scope, key)
}

// effect is a handler writing one go_effects row in the request's transaction and answering
// status; runs counts its runs.
func effect(runs *int32, status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := atomic.AddInt32(runs, 1)
		c := ClaimOf(r.Context())
		tx, err := Begin(r.Context())
		if err == nil {
			_, err = tx.Exec(r.Context(), "INSERT INTO go_effects VALUES ($1, $2)", c.Key, n)
		}
		if err != nil {
			panic(err)
		}
		SetResource(r.Context(), fmt.Sprint("r", n))
		w.Header().Set("Location", fmt.Sprint("/things/", n))
		w.Header().Set("X-Not-Stored", "1")
		w.WriteHeader(status)
		fmt.Fprintf(w, "run %d attempt %d", n, c.Attempt)
	}
}

func TestSingleMode(t *testing.T) {
	p := pool(t)
	k := fmt.Sprint("single-", time.Now().UnixNano())
	var runs int32
	h := New(p, Options{Scope: "go-test"})(effect(&runs, 201))
	got := []string{send(h, k, `{"a": 1}`), send(h, `"`+k+`"`, `{ "a":1 }`), send(h, k, `{"a": 2}`)[:9]}
	got = append(got, record(t, p, "go-test", k), one(t, p, "SELECT count(*)::text FROM go_effects WHERE key = $1", k))
	want := `201 false run 1 attempt 1|201 true run 1 attempt 1|422 false|` +
		`completed false 1 r1 201 {"Location": "/things/1", "Content-Type": "text/plain; charset=utf-8"}|1`
	if strings.Join(got, "|") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(got, "|"), want)
	}
	if s := p.Stat(); s.AcquiredConns() != 0 {
		t.Fatalf("connections not released: %d", s.AcquiredConns())
	}
}

func TestSingleModeAnswersNotStored(t *testing.T) {
	p := pool(t)
	var got []string
	for _, status := range []int{500, 409, 404} {
		k := fmt.Sprint("single-", status, "-", time.Now().UnixNano())
		var runs int32
		h := New(p, Options{Scope: "go-test"})(effect(&runs, status))
		got = append(got, send(h, k, `{}`), send(h, k, `{}`), record(t, p, "go-test", k),
			one(t, p, "SELECT count(*)::text FROM go_effects WHERE key = $1", k))
	}
	// 5xx and 409: rolled back, nothing stored, the retry runs the handler again; a final 4xx is
	// stored with the handler's writes, replayed, as idempotency.idem_fail(retryable => false).
	want := "500 false run 1 attempt 1|500 false run 2 attempt 1|none|0|" +
		"409 false run 1 attempt 1|409 false run 2 attempt 1|none|0|" +
		`404 false run 1 attempt 1|404 true run 1 attempt 1|failed false 1 404 {"Location": "/things/1", ` +
		`"Content-Type": "text/plain; charset=utf-8"}|1`
	if strings.Join(got, "|") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(got, "|"), want)
	}
}

func TestPanicStoresNothingAndReleases(t *testing.T) {
	p := pool(t)
	k := fmt.Sprint("panic-", time.Now().UnixNano())
	h := New(p, Options{Scope: "go-test"})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Tx(r.Context()).Exec(r.Context(), "INSERT INTO go_effects VALUES ($1, 1)", k)
		panic("handler")
	}))
	func() {
		defer func() {
			if recover() != "handler" {
				t.Error("the panic did not reach net/http")
			}
		}()
		send(h, k, `{}`)
	}()
	got := record(t, p, "go-test", k) + " " + one(t, p, "SELECT count(*)::text FROM go_effects WHERE key = $1", k)
	if got != "none 0" || p.Stat().AcquiredConns() != 0 {
		t.Fatalf("got %s, %d connections held", got, p.Stat().AcquiredConns())
	}
}

func TestSavepoints(t *testing.T) {
	p := pool(t)
	k := fmt.Sprint("sp-", time.Now().UnixNano())
	h := New(p, Options{Scope: "go-test"})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		fmt.Fprint(w, tx.Commit(ctx) == ErrOwned, " ", string(body))
	}))
	got := send(h, k, `{"b": 1}`) + " " + one(t, p, "SELECT string_agg(n::text, ',') FROM go_effects WHERE key = $1", k)
	if got != `200 false true {"b": 1} 2` {
		t.Fatalf("got %s", got)
	}
}

func TestTwoPhaseHeartbeatAndRetryableFailure(t *testing.T) {
	p := pool(t)
	k := fmt.Sprint("two-", time.Now().UnixNano())
	var runs int32
	slow := make(chan struct{})
	h := New(p, Options{Scope: "go-test-2", Mode: TwoPhase, Lease: 300 * time.Millisecond,
		Heartbeat: 100 * time.Millisecond})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if atomic.AddInt32(&runs, 1) == 1 {
			<-slow // longer than the lease: only the heartbeat keeps the key
		}
		effect(new(int32), map[bool]int{true: 503, false: 201}[runs == 1]).ServeHTTP(w, r)
	}))
	first := make(chan string)
	go func() { first <- send(h, k, `{}`) }()
	time.Sleep(700 * time.Millisecond)
	during := send(h, k, `{}`)
	close(slow)
	got := []string{(<-first)[:9], record(t, p, "go-test-2", k)[:13], during[:9], send(h, k, `{}`),
		record(t, p, "go-test-2", k)[:17]}
	want := "503 false|failed true 1|409 false|201 false run 1 attempt 2|completed false 2"
	if strings.Join(got, "|") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(got, "|"), want)
	}
}

func TestTwoPhaseFencedAndFinishedByAnother(t *testing.T) {
	p := pool(t)
	var got []string
	for _, order := range []string{"fenced", "finished"} {
		k := fmt.Sprint(order, "-", time.Now().UnixNano())
		gate := map[int32]chan struct{}{1: make(chan struct{}), 2: make(chan struct{})}
		var runs int32
		h := New(p, Options{Scope: "go-test-2", Mode: TwoPhase, Lease: 200 * time.Millisecond,
			Heartbeat: time.Hour})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := atomic.AddInt32(&runs, 1)
			<-gate[n]
			fmt.Fprintf(w, "attempt %d", ClaimOf(r.Context()).Attempt)
		}))
		a1, a2 := make(chan string), make(chan string)
		go func() { a1 <- send(h, k, `{}`) }()
		time.Sleep(400 * time.Millisecond) // the first lease ends (no heartbeat): the next reclaims
		go func() { a2 <- send(h, k, `{}`) }()
		time.Sleep(200 * time.Millisecond)
		if order == "fenced" { // the first finishes while the second holds the key: IK002
			close(gate[1])
			got = append(got, <-a1)
			close(gate[2])
			got = append(got, <-a2)
		} else { // the second finishes first: the first answers what it stored (IK003)
			close(gate[2])
			got = append(got, <-a2)
			close(gate[1])
			got = append(got, <-a1)
		}
	}
	want := `409 false {"status":409,"title":"superseded by another attempt of this Idempotency-Key",` +
		`"type":"about:blank"}|200 false attempt 2|200 false attempt 2|200 true attempt 2`
	if strings.Join(got, "|") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(got, "|"), want)
	}
}

func TestOptionsTTLHeadersFingerprint(t *testing.T) {
	p := pool(t)
	k := fmt.Sprint("opts-", time.Now().UnixNano())
	h := New(p, Options{Scope: "go-test", TTL: time.Hour, Headers: []string{"x-a"},
		Fingerprint: func(*http.Request, []byte) []byte { return []byte(`{"same": 1}`) },
	})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-A", "a")
		w.Header().Set("Location", "/l")
		fmt.Fprint(w, "ok")
	}))
	// Another body, the same fingerprint: a replay, not a mismatch.
	got := send(h, k, `{"a": 1}`) + "|" + send(h, k, `{"a": 2}`) + "|" + one(t, p, `SELECT concat_ws(' ',
		extract(epoch FROM expires_at - created_at)::int, response_headers) FROM idempotency.records
		WHERE scope = 'go-test' AND key = $1`, k)
	if want := `200 false ok|200 true ok|3600 {"X-A": "a"}`; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
