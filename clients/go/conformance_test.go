package idempotency

// The runner of test/conformance/http.json, the HTTP contract's cases that test/regress/sql/http_contract.sql
// (test/conformance/http_runner.sql) and every client package pass: each case in both modes,
// through this middleware over real HTTP (net/http/httptest) against the libpq environment's
// database, checked as http_runner.sql checks it.

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

type confRequest struct {
	Principal      *string `json:"principal"`
	Operation      string  `json:"operation"`
	Key            *string `json:"key"`
	Body           string  `json:"body"`
	BodyHex        *string `json:"body_hex"`
	SharedKeySpace bool    `json:"shared_key_space"`
}

type confHandler struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Raise   string            `json:"raise"`
}

type confCase struct {
	Name  string   `json:"name"`
	Modes []string `json:"modes"`
	Prior []struct {
		Request confRequest `json:"request"`
		Handler confHandler `json:"handler"`
		Hold    *string     `json:"hold"`
		SleepMs float64     `json:"sleep_ms"`
	} `json:"prior"`
	Request confRequest `json:"request"`
	Handler confHandler `json:"handler"`
	Expect  struct {
		Ran       bool              `json:"ran"`
		Reclaimed *bool             `json:"reclaimed"`
		Status    int               `json:"status"`
		Headers   map[string]string `json:"headers"`
		Absent    []string          `json:"absent"`
		Body      *string           `json:"body"`
		Problem   *int              `json:"problem"`
	} `json:"expect"`
	Stored json.RawMessage `json:"stored"`
}

// conformanceCases reads test/conformance/http.json, found from this file's location.
func conformanceCases(t *testing.T) []confCase {
	_, here, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "test", "conformance", "http.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Cases []confCase }
	if err = json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Cases
}

func (r confRequest) raw() []byte {
	if r.BodyHex != nil {
		b, _ := hex.DecodeString(*r.BodyHex)
		return b
	}
	return []byte(r.Body)
}

// conformance is one run: the middlewares of a mode (one with the principal of the request's
// X-Test-Principal header, one with a shared key space), an HTTP server whose routes are added
// per request, and the run's tag.
type conformance struct {
	t          *testing.T
	pool       *pgxpool.Pool
	admin      *pgxpool.Pool // reads the stored rows (idem_lookup); the pool by default
	mode, tag  string
	byUser     *Middleware
	shared     *Middleware
	srv        *httptest.Server
	routes     sync.Map
	n          int64
	ran        int32
	reclaimed  int32
	logged     bytes.Buffer
	loggedLock sync.Mutex
}

func (c *conformance) Write(p []byte) (int, error) {
	c.loggedLock.Lock()
	defer c.loggedLock.Unlock()
	return c.logged.Write(p)
}

func newConformance(t *testing.T, p *pgxpool.Pool, mode string) *conformance {
	c := &conformance{t: t, pool: p, admin: p, mode: mode, tag: fmt.Sprintf("go-%s-%d", mode, time.Now().UnixNano())}
	logger := log.New(c, "", 0)
	var err error
	c.byUser, err = New(context.Background(), p, Options{Mode: mode, ErrorLog: logger,
		Principal: func(r *http.Request) string { return r.Header.Get("X-Test-Principal") }})
	if err == nil {
		c.shared, err = New(context.Background(), p, Options{Mode: mode, SharedKeySpace: true, ErrorLog: logger})
	}
	if err != nil {
		t.Fatal(err)
	}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, _ := c.routes.Load(r.URL.Path)
		h.(http.Handler).ServeHTTP(w, r)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// handler answers as the case says, counting its runs.
func (c *conformance) handler(spec confHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		atomic.AddInt32(&c.ran, 1)
		if ClaimOf(ctx).Reclaimed {
			atomic.AddInt32(&c.reclaimed, 1)
		}
		switch spec.Raise {
		case "":
		case "exception":
			panic("the case's handler raised")
		default: // a real database error on the request's transaction
			tx, err := Begin(ctx)
			if err == nil {
				_, err = tx.Exec(ctx, "DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '"+spec.Raise+"'; END $$")
			}
			Fail(ctx, err)
			return
		}
		for name, value := range spec.Headers {
			w.Header().Set(name, value)
		}
		w.WriteHeader(spec.Status)
		io.WriteString(w, spec.Body)
	}
}

// request sends one request of a case through the middleware; a hold claims the key two-phase
// with that lease and never finishes it, as http_runner.sql does.
func (c *conformance) request(req confRequest, spec confHandler, hold *string) (*http.Response, []byte) {
	ctx := context.Background()
	op := req.Operation + " #" + c.tag
	if hold != nil {
		if _, err := c.pool.Exec(ctx, `SELECT idempotency.idem_http_begin($1, $2, $3, $4,
			lease => $5::text::interval, shared_key_space => $6)`, req.Principal, op, req.Key, req.raw(),
			*hold, req.SharedKeySpace); err != nil {
			c.t.Fatal(err)
		}
		return nil, nil
	}
	m := c.byUser
	if req.SharedKeySpace {
		m = c.shared
	}
	path := fmt.Sprint("/r/", atomic.AddInt64(&c.n, 1))
	c.routes.Store(path, m.Handle(op, c.handler(spec)))
	r, _ := http.NewRequest("POST", c.srv.URL+path, bytes.NewReader(req.raw()))
	if req.Principal != nil {
		r.Header.Set("X-Test-Principal", *req.Principal)
	}
	if req.Key != nil {
		r.Header.Set("Idempotency-Key", *req.Key)
	}
	resp, err := noRedirects.Do(r)
	if err != nil {
		c.t.Fatalf("%s: %v", req.Operation, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, body
}

// check is what differs between the case's expectation and what happened (nil: nothing).
func (c *conformance) check(cs confCase, resp *http.Response, body []byte, ran, reclaimed bool) []string {
	var problems []string
	x := cs.Expect
	if x.Ran != ran {
		problems = append(problems, fmt.Sprint("ran ", ran))
	}
	if x.Reclaimed != nil && *x.Reclaimed != reclaimed {
		problems = append(problems, fmt.Sprint("reclaimed ", reclaimed))
	}
	if x.Status != resp.StatusCode {
		problems = append(problems, fmt.Sprint("status ", resp.StatusCode))
	}
	for name, want := range x.Headers {
		got := resp.Header.Values(name)
		if len(got) == 0 || (want != "*" && strings.Join(got, ", ") != want) {
			problems = append(problems, fmt.Sprintf("header %s: %q", name, got))
		}
	}
	for _, name := range x.Absent {
		if got := resp.Header.Values(name); len(got) > 0 {
			problems = append(problems, fmt.Sprintf("header %s present: %q", name, got))
		}
	}
	if x.Body != nil && *x.Body != string(body) {
		problems = append(problems, fmt.Sprintf("body %q", body))
	}
	if x.Problem != nil {
		var doc struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
		}
		if json.Unmarshal(body, &doc) != nil || doc.Type != "about:blank" || doc.Status != *x.Problem {
			problems = append(problems, fmt.Sprintf("problem %s", body))
		}
	}
	return append(problems, c.checkStored(cs)...)
}

// checkStored compares idem_lookup of the request's scope and key with the case's stored.
func (c *conformance) checkStored(cs confCase) []string {
	var s interface{}
	if len(cs.Stored) == 0 || json.Unmarshal(cs.Stored, &s) != nil || s == nil {
		return nil
	}
	req := cs.Request
	var status, resource, headers *string
	var responseStatus, attempt *int32
	var responseBody []byte
	err := c.admin.QueryRow(context.Background(), `SELECT l.status, l.response_status, l.resource_id, l.attempt,
			l.response_headers::text, l.response_body
		FROM idempotency.idem_lookup(idempotency.idem_http_scope($1, $2, $3), idempotency.idem_key_from_header($4)) l`,
		req.Principal, req.Operation+" #"+c.tag, req.SharedKeySpace, req.Key).
		Scan(&status, &responseStatus, &resource, &attempt, &headers, &responseBody)
	if err != nil && err != pgx.ErrNoRows {
		return []string{err.Error()}
	}
	var problems []string
	str := func(p *string) string {
		if p == nil {
			return "NULL"
		}
		return *p
	}
	num := func(p *int32) string {
		if p == nil {
			return "NULL"
		}
		return fmt.Sprint(*p)
	}
	if s == "released" {
		if status != nil && *status != "failed" {
			problems = append(problems, "stored "+*status)
		}
		return problems
	}
	want := s.(map[string]interface{})
	if w, ok := want["status"]; ok && str(status) != w {
		problems = append(problems, "stored status "+str(status))
	}
	if w, ok := want["response_status"]; ok && num(responseStatus) != fmt.Sprint(w) {
		problems = append(problems, "stored response_status "+num(responseStatus))
	}
	if w, ok := want["resource_id"]; ok && str(resource) != w {
		problems = append(problems, "stored resource_id "+str(resource))
	}
	if w, ok := want["attempt"]; ok && num(attempt) != fmt.Sprint(w) {
		problems = append(problems, "stored attempt "+num(attempt))
	}
	if w, ok := want["response_headers"]; ok {
		var got interface{}
		if headers != nil {
			json.Unmarshal([]byte(*headers), &got)
		}
		if !reflect.DeepEqual(got, w) {
			problems = append(problems, "stored response_headers "+str(headers))
		}
	}
	if w, ok := want["response_body"]; ok && (responseBody == nil || string(responseBody) != w) {
		problems = append(problems, fmt.Sprintf("stored response_body %q", responseBody))
	}
	return problems
}

// run drives every case of the mode; it returns the number of cases run and failed.
func (c *conformance) run(cases []confCase) (run, failed int) {
	for _, cs := range cases {
		if len(cs.Modes) > 0 && !contains(cs.Modes, c.mode) {
			continue
		}
		for _, p := range cs.Prior {
			c.request(p.Request, p.Handler, p.Hold)
			time.Sleep(time.Duration(p.SleepMs * float64(time.Millisecond)))
		}
		atomic.StoreInt32(&c.ran, 0)
		atomic.StoreInt32(&c.reclaimed, 0)
		resp, body := c.request(cs.Request, cs.Handler, nil)
		run++
		if problems := c.check(cs, resp, body, c.ran > 0, c.reclaimed > 0); len(problems) > 0 {
			failed++
			c.t.Errorf("%s [%s]: %s", cs.Name, c.mode, strings.Join(problems, "; "))
		}
	}
	return run, failed
}

// noRedirects is a client that returns a 3xx answer as it is.
var noRedirects = &http.Client{Timeout: time.Minute,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestConformance(t *testing.T) {
	p := testPool(t, nil)
	cases := conformanceCases(t)
	for _, mode := range []string{Single, TwoPhase} {
		t.Run(mode, func(t *testing.T) {
			c := newConformance(t, p, mode)
			run, failed := c.run(cases)
			t.Logf("conformance %s (tag %s): %d cases, %d passed, %d failed", mode, c.tag, run, run-failed, failed)
			if s := p.Stat(); s.AcquiredConns() != 0 {
				t.Errorf("%d connections still acquired after the cases", s.AcquiredConns())
			}
		})
	}
}
