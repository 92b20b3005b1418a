// Package idempotency is net/http middleware for the idempotency PostgreSQL extension, on pgx v4.
// It calls the extension's HTTP contract (idem_http_begin, idem_http_end, idem_http_release and
// the error map idem_http_errors; docs/records.md "The HTTP contract") and decides none of it:
// what is stored, what is replayed and how an error is answered are the database's answers.
// README.md in this directory shows a route, the options and the grants.
package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

// Modes of Options.Mode.
const (
	Single   = "single"    // begin, the handler's writes, end and COMMIT in one transaction
	TwoPhase = "two-phase" // begin commits with a lease; the handler runs outside a transaction
	Off      = "off"       // a plain transaction around the handler, nothing claimed (kill switch)
)

// Options configure a Middleware. Principal or SharedKeySpace is required.
type Options struct {
	// Principal returns who sent the request (e.g. the authenticated user's id): keys are kept
	// per principal and operation. "" means none: idem_http_begin answers 403.
	Principal func(r *http.Request) string
	// SharedKeySpace: every principal shares one key space per operation. Explicit, instead of
	// Principal: a key sent by one user is then replayed to another.
	SharedKeySpace bool
	Mode           string        // Single (default), TwoPhase or Off
	Lease          time.Duration // the claim's lease (TwoPhase default 30 s; Single: the extension's)
	TTL            time.Duration // how long a record lives (default: the extension's default_ttl)
	Heartbeat      time.Duration // TwoPhase: idem_heartbeat every Heartbeat (default Lease / 3)
	// Headers are the response headers stored and replayed (default Content-Type, Location).
	Headers []string
	// ErrorLog receives handler panics and unexpected errors (default: the log package's logger).
	ErrorLog *log.Logger
}

// Claim is what idem_http_begin said of a request whose handler runs.
type Claim struct {
	Scope, Key string // the record's scope (principal and operation) and the parsed key
	Attempt    int    // the fencing token
	Reclaimed  bool   // an earlier attempt's lease ran out: its effect is unknown; reconcile
}

// Middleware is one configuration over one pool; Handle wraps each route with it.
type Middleware struct {
	pool      *pgxpool.Pool
	o         Options
	lease     interface{} // the lease argument of idem_http_begin: nil (the extension's) or a duration
	ttl       interface{}
	errors    map[string]*answer // idem_http_errors by sqlstate; "" is the row whose sqlstate is NULL
	retryable map[string]bool
}

// New checks o and the database and returns the middleware. The check runs on the pool: it loads
// the error map (idem_http_errors) and verifies the role's EXECUTE privileges, so that a
// database, extension or grant that does not work is an error here, not a 500 per request.
// Durations under one second are refused as a likely unit mistake (TTL: 86400 is 86 µs).
func New(ctx context.Context, pool *pgxpool.Pool, o Options) (*Middleware, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if pool == nil {
		return nil, errors.New("idempotency: New needs a pgxpool.Pool")
	}
	m := &Middleware{pool: pool, o: o}
	if o.Lease > 0 {
		m.lease = o.Lease
	}
	if o.TTL > 0 {
		m.ttl = o.TTL
	}
	if err := m.load(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// check validates the options and fills in their defaults.
func (o *Options) check() error {
	switch o.Mode {
	case "":
		o.Mode = Single
	case Single, TwoPhase, Off:
	default:
		return fmt.Errorf("idempotency: unknown Mode %q (idempotency.Single, TwoPhase or Off)", o.Mode)
	}
	if o.Principal == nil && !o.SharedKeySpace {
		return errors.New("idempotency: Options.Principal is required (the user a key belongs to); " +
			"SharedKeySpace: true makes every principal share one key space")
	}
	if o.Principal != nil && o.SharedKeySpace {
		return errors.New("idempotency: Options.Principal and SharedKeySpace exclude each other")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Lease", o.Lease}, {"TTL", o.TTL}, {"Heartbeat", o.Heartbeat}} {
		if d.v < 0 || (d.v > 0 && d.v < time.Second && d.name != "Heartbeat") {
			return fmt.Errorf("idempotency: Options.%s is %v: a time.Duration of at least one second "+
				"(e.g. 30 * time.Second), or 0 for the default", d.name, d.v)
		}
	}
	if o.Mode == TwoPhase && o.Lease == 0 {
		o.Lease = 30 * time.Second
	}
	if o.TTL > 0 && o.Lease > 0 && o.TTL < o.Lease {
		return fmt.Errorf("idempotency: Options.TTL %v is shorter than the lease %v: the record would "+
			"expire while its owner holds it", o.TTL, o.Lease)
	}
	if o.Mode != TwoPhase && o.Heartbeat != 0 {
		return errors.New("idempotency: Options.Heartbeat is for Mode TwoPhase")
	} else if o.Heartbeat == 0 {
		o.Heartbeat = o.Lease / 3
	} else if o.Heartbeat >= o.Lease {
		return fmt.Errorf("idempotency: Options.Heartbeat %v must be shorter than the lease %v", o.Heartbeat, o.Lease)
	}
	if o.Headers == nil {
		o.Headers = []string{"Content-Type", "Location"}
	}
	if o.ErrorLog == nil {
		o.ErrorLog = log.Default()
	}
	return nil
}

// The functions the middleware calls (idem_http_begin, idem_http_end and idem_http_release claim,
// complete and release themselves: no grant on idem_claim, idem_complete or idem_fail is needed).
var privileges = []string{
	"idempotency.idem_http_begin(text,text,text,bytea,interval,interval,boolean)",
	"idempotency.idem_http_end(text,text,integer,integer,jsonb,bytea,text,text[])",
	"idempotency.idem_http_release(text,text,integer)",
	"idempotency.idem_http_answer(text,text)",
}

const heartbeatFunction = "idempotency.idem_heartbeat(text,text,integer,interval)"

// load reads the error map and checks the privileges and the lease against the TTL, in one
// round trip.
func (m *Middleware) load(ctx context.Context) error {
	need := privileges
	if m.o.Mode == TwoPhase {
		need = append(need[:len(need):len(need)], heartbeatFunction)
	}
	b := &pgx.Batch{}
	b.Queue("SELECT sqlstate, status, headers::text, body, retryable FROM idempotency.idem_http_errors()")
	b.Queue(`SELECT pg_catalog.has_schema_privilege('idempotency', 'USAGE'),
		ARRAY(SELECT f FROM pg_catalog.unnest($1::text[]) f WHERE NOT pg_catalog.has_function_privilege(f, 'EXECUTE')),
		extract(epoch FROM pg_catalog.current_setting('idempotency.default_lease', true)::interval)::float8,
		extract(epoch FROM pg_catalog.current_setting('idempotency.default_ttl', true)::interval)::float8`, need)
	br := m.pool.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("idempotency: the start check (idempotency.idem_http_errors()) failed: %w", err)
	}
	m.errors, m.retryable = map[string]*answer{}, map[string]bool{}
	for rows.Next() {
		var code, headers *string
		var status *int32
		var body []byte
		var retryable bool
		if err = rows.Scan(&code, &status, &headers, &body, &retryable); err != nil {
			break
		}
		a := &answer{body: body}
		if status != nil {
			s := int(*status)
			a.status = &s
		}
		if headers != nil {
			if a.headers, err = parseHeaders(*headers); err != nil {
				break
			}
		}
		key := ""
		if code != nil {
			key = *code
		}
		m.errors[key], m.retryable[key] = a, retryable
	}
	rows.Close()
	if err == nil {
		err = rows.Err()
	}
	if err == nil && m.errors[""] == nil {
		err = errors.New("the map has no row for other errors (sqlstate NULL)")
	}
	if err != nil {
		return fmt.Errorf("idempotency: the start check (idempotency.idem_http_errors()) failed: %w", err)
	}
	var usage bool
	var missing []string
	var defaultLease, defaultTTL *float64
	if err = br.QueryRow().Scan(&usage, &missing, &defaultLease, &defaultTTL); err != nil {
		return fmt.Errorf("idempotency: the start check of the privileges failed: %w", err)
	}
	if !usage || len(missing) > 0 {
		return fmt.Errorf("idempotency: the pool's role lacks privileges: usage on schema idempotency: %v; "+
			"EXECUTE on: %s (clients/go/README.md lists the GRANTs)", usage, strings.Join(missing, ", "))
	}
	lease, ttl := m.o.Lease, m.o.TTL
	if lease == 0 && defaultLease != nil {
		lease = time.Duration(*defaultLease * float64(time.Second))
	}
	if ttl == 0 && defaultTTL != nil {
		ttl = time.Duration(*defaultTTL * float64(time.Second))
	}
	if m.o.Mode != Off && ttl > 0 && lease > 0 && ttl < lease {
		return fmt.Errorf("idempotency: the TTL %v (Options.TTL or idempotency.default_ttl) is shorter than "+
			"the lease %v (Options.Lease or idempotency.default_lease): every claim would fail", ttl, lease)
	}
	return nil
}

// Handle returns h wrapped for the route registered with the template route. The request's
// operation (with the principal, the scope of its keys) is route when it names a method
// ("POST /v1/payments/{id}"), else the request's method, a space and route ("/v1/payments/{id}").
// Pass the template, not the concrete path: Go 1.19's ServeMux knows no templates, so the
// middleware cannot read it from the request. Handle panics on an empty route, as
// http.ServeMux.Handle does on an invalid pattern.
func (m *Middleware) Handle(route string, h http.Handler) http.Handler {
	if strings.TrimSpace(route) == "" {
		panic("idempotency: Handle needs the route's template, e.g. \"POST /v1/payments/{id}\"")
	}
	if h == nil {
		panic("idempotency: Handle needs a handler")
	}
	withMethod := !strings.HasPrefix(route, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := route
		if !withMethod {
			op = r.Method + " " + route
		}
		m.serve(w, r, op, h)
	})
}

// HandleFunc is Handle for a function.
func (m *Middleware) HandleFunc(route string, f func(http.ResponseWriter, *http.Request)) http.Handler {
	return m.Handle(route, http.HandlerFunc(f))
}

type ctxKey struct{}

func from(ctx context.Context) *state {
	s, _ := ctx.Value(ctxKey{}).(*state)
	return s
}

// Tx is the request's transaction (Single and Off modes: the one begun with the request;
// TwoPhase: the one Begin opened), nil outside the middleware. The middleware ends it: its Commit
// and Rollback return ErrOwned and do nothing; Begin makes a savepoint.
func Tx(ctx context.Context) pgx.Tx {
	if s := from(ctx); s != nil && s.conn != nil {
		return &tx{conn: s.conn.Conn()}
	}
	return nil
}

// Begin returns the request's transaction, opening it in TwoPhase mode: the final one, in which
// the handler's writes commit together with idem_http_end.
func Begin(ctx context.Context) (pgx.Tx, error) {
	s := from(ctx)
	if s == nil {
		return nil, errors.New("idempotency: Begin outside a handler of the middleware")
	}
	if s.conn == nil {
		conn, err := s.m.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		if _, err = conn.Exec(ctx, "BEGIN"); err != nil {
			conn.Release()
			return nil, err
		}
		s.conn = conn
	}
	return Tx(ctx), nil
}

// ClaimOf returns the request's claim (the zero Claim outside the middleware and in Off mode).
func ClaimOf(ctx context.Context) Claim {
	if s := from(ctx); s != nil {
		return s.claim
	}
	return Claim{}
}

// SetResource sets the resource_id stored with the answer (default: the last path segment of
// the Location header, as idem_http_end derives it).
func SetResource(ctx context.Context, id string) {
	if s := from(ctx); s != nil {
		s.resource = &id
	}
}

// Fail makes err the request's answer instead of what the handler writes: the answer
// idem_http_errors maps err to (a serialization failure: 503 with Retry-After; an error that is
// no database error: 500), after the transaction rolled back and the key was released. The
// handler should return after it. A panic in the handler does the same.
func Fail(ctx context.Context, err error) {
	if s := from(ctx); s != nil && err != nil && s.err == nil {
		s.err = err
	}
}
