// Package idempotency is net/http middleware for the idempotency PostgreSQL extension, on pgx v4:
// it claims the request's Idempotency-Key, runs the handler once per key, stores the handler's own
// response (status, allow-listed headers, exact body bytes) and replays it to every retry.
// README.md in this directory shows the five lines of a route, the options and the rules.
package idempotency

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

// Modes of Options.Mode.
const (
	Single   = "single"    // claim, handler's writes and idem_complete in one transaction
	TwoPhase = "two-phase" // the claim commits with a lease; the handler runs outside it
)

// Options configure one middleware: one scope, one mode.
type Options struct {
	Scope     string        // the records' scope (required)
	Mode      string        // Single (default) or TwoPhase
	Lease     time.Duration // TwoPhase: the claim's lease (default 30 s)
	TTL       time.Duration // how long the record lives (0: the extension's default)
	Heartbeat time.Duration // TwoPhase: idem_heartbeat every Heartbeat (default Lease / 3)
	Headers   []string      // response headers stored and replayed (default Content-Type, Location)
	// Fingerprint returns the JSON bytes hashed by idempotency.idem_fingerprint(bytea) (default: the body).
	Fingerprint func(r *http.Request, body []byte) []byte
}

// Claim is what idem_claim said of the request's key.
type Claim struct {
	Scope, Key string // Key as idem_key_from_header parsed the header
	Attempt    int    // the fencing token
	Reclaimed  bool   // TwoPhase: an earlier attempt's lease ended; reconcile before acting
}

type middleware struct {
	pool     *pgxpool.Pool
	o        Options
	claimSQL string
	args     []interface{} // the claim's arguments after scope, header and fingerprint
}

// New returns the middleware of one scope over pool. The pool's statements must be unnamed
// behind PgBouncer before 1.21 (statement_cache_mode=describe); nothing depends on the session.
func New(pool *pgxpool.Pool, o Options) func(http.Handler) http.Handler {
	m := &middleware{pool: pool, o: o}
	if m.o.Mode == "" {
		m.o.Mode = Single
	}
	if m.o.Headers == nil {
		m.o.Headers = []string{"Content-Type", "Location"}
	}
	claim := "idempotency.idem_claim($1, idempotency.idem_key_from_header($2), idempotency.idem_fingerprint($3::bytea)"
	if m.o.Mode == TwoPhase {
		if m.o.Lease <= 0 {
			m.o.Lease = 30 * time.Second
		}
		if m.o.Heartbeat <= 0 {
			m.o.Heartbeat = m.o.Lease / 3
		}
		m.args = append(m.args, m.o.Lease)
		claim += ", lease => $4::interval"
	}
	if m.o.TTL > 0 {
		m.args = append(m.args, m.o.TTL)
		claim += ", ttl => $" + strconv.Itoa(3+len(m.args)) + "::interval"
	}
	m.claimSQL = "SELECT idempotency.idem_key_from_header($2), c.outcome, coalesce(c.attempt, 0), c.resource_id, " +
		"c.response::text, c.response_status, c.lease_expires_at, c.expires_at, c.response_body, " +
		"c.response_headers::text FROM " + claim + ") c"
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}
}

type ctxKey struct{}

// state is one request's: its claim, its transaction, the resource id to store.
type state struct {
	Claim
	m        *middleware
	conn     *pgxpool.Conn // the transaction's connection, while it is open
	resource *string
}

func from(ctx context.Context) *state {
	s, _ := ctx.Value(ctxKey{}).(*state)
	return s
}

// Tx is the request's transaction (Single mode: the claim's, where idem_complete will commit the
// handler's writes; TwoPhase: the one Begin opened), nil outside the middleware. The middleware
// commits or rolls it back: its Commit and Rollback refuse; Begin makes a savepoint.
func Tx(ctx context.Context) pgx.Tx {
	if s := from(ctx); s != nil && s.conn != nil {
		return &tx{conn: s.conn.Conn()}
	}
	return nil
}

// Begin returns the request's transaction, opening it in TwoPhase mode: the final one, in which
// the handler's last writes commit together with idem_complete.
func Begin(ctx context.Context) (pgx.Tx, error) {
	s := from(ctx)
	if s == nil || s.conn != nil {
		return Tx(ctx), nil
	}
	conn, err := s.m.pool.Acquire(ctx)
	if err == nil {
		if _, err = conn.Exec(ctx, "BEGIN"); err != nil {
			conn.Release()
			return nil, err
		}
		s.conn = conn
	}
	return Tx(ctx), err
}

// ClaimOf returns the request's claim (the zero Claim outside the middleware).
func ClaimOf(ctx context.Context) Claim {
	if s := from(ctx); s != nil {
		return s.Claim
	}
	return Claim{}
}

// SetResource sets the resource_id stored with the response (e.g. the new payment's id).
func SetResource(ctx context.Context, id string) {
	if s := from(ctx); s != nil {
		s.resource = &id
	}
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	header, ok := r.Header["Idempotency-Key"]
	if !ok {
		problem(400, "Idempotency-Key header required").write(w)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		problem(400, "the request body could not be read").write(w)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if m.o.Fingerprint != nil {
		body = m.o.Fingerprint(r, body)
	}
	s := &state{Claim: Claim{Scope: m.o.Scope}, m: m}
	ctx := detached{r.Context()}
	if a, err := s.claim(ctx, header[0], body); a != nil || err != nil {
		s.end(ctx, "ROLLBACK")
		s.answer(ctx, a, err).write(w)
		return
	}
	rec := &recorder{header: http.Header{}}
	defer func() { // a panicking handler: nothing stored, the panic goes on to net/http
		if p := recover(); p != nil {
			s.abort(context.Background())
			panic(p)
		}
	}()
	hctx, cancel := context.WithCancel(context.WithValue(r.Context(), ctxKey{}, s))
	stop := s.heartbeat(hctx, cancel)
	next.ServeHTTP(rec, r.WithContext(hctx))
	stop()
	cancel()
	a, err := s.finish(ctx, rec)
	s.answer(ctx, a, err).write(w)
}

// claim runs idem_claim alone: planned on every call (no prepared statements behind PgBouncer),
// its join with idem_http_answer cost as much again (bench/RESULTS.md). An outcome not to run
// asks idem_http_answer with the claim's row. Single mode: BEGIN and the claim in one round trip.
func (s *state) claim(ctx context.Context, header string, fp []byte) (*answer, error) {
	args := append([]interface{}{s.Scope, header, fp}, s.m.args...)
	var row []interface{}
	var err error
	if s.m.o.Mode == TwoPhase {
		row, err = values(s.m.pool.Query(ctx, s.m.claimSQL, args...))
	} else if s.conn, err = s.m.pool.Acquire(ctx); err == nil {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(s.m.claimSQL, args...)
		br := s.conn.SendBatch(ctx, b)
		if _, err = br.Exec(); err == nil {
			row, err = values(br.Query())
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return nil, err
	}
	s.Key, s.Attempt, s.Reclaimed = row[0].(string), int(row[2].(int32)), row[1] == "reclaimed"
	if row[1] == "claimed" || s.Reclaimed {
		return nil, nil
	}
	var a answer
	q := pgx.Row(nil)
	if s.conn != nil { // the request's own connection: a pool of N serves N replays at once
		q = s.conn.QueryRow(ctx, answerSQL, row[1:]...)
	} else {
		q = s.m.pool.QueryRow(ctx, answerSQL, row[1:]...)
	}
	return &a, q.Scan(&a.status, &a.headers, &a.body)
}

const answerSQL = `SELECT status, headers, body FROM idempotency.idem_http_answer(ROW($1::text, $2::int, $3::text,
	$4::jsonb, $5::int, $6::timestamptz, $7::timestamptz, $8::bytea, $9::jsonb)::idempotency.idem_claim_result)`

// values is the one row of a query.
func values(rows pgx.Rows, err error) ([]interface{}, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err = rows.Err(); err == nil {
			err = pgx.ErrNoRows
		}
		return nil, err
	}
	return rows.Values()
}

// detached is the request's context without its cancellation: the middleware's statements end
// even when the client leaves, and pgx watches no context for them (a goroutine per statement).
type detached struct{ context.Context }

func (detached) Done() <-chan struct{}       { return nil }
func (detached) Err() error                  { return nil }
func (detached) Deadline() (time.Time, bool) { return time.Time{}, false }

// heartbeat extends a TwoPhase lease every Heartbeat while the handler runs; fenced (IK002) or
// finished, it cancels the handler's context. stop ends it.
func (s *state) heartbeat(ctx context.Context, cancel func()) (stop func()) {
	if s.m.o.Mode != TwoPhase {
		return func() {}
	}
	t := time.NewTicker(s.m.o.Heartbeat)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_, err := s.m.pool.Exec(ctx, "SELECT idempotency.idem_heartbeat($1, $2, $3, $4::interval)",
					s.Scope, s.Key, s.Attempt, s.m.o.Lease)
				if sqlstate(err) == "IK002" || sqlstate(err) == "IK003" {
					cancel()
				}
			}
		}
	}()
	return func() { t.Stop(); close(done) }
}

// finish stores the handler's answer: 2xx and 3xx with idem_complete, a final 4xx with
// idempotency.idem_fail(retryable => false); with the request's transaction, the statement and COMMIT go in
// one round trip. A retryable answer (5xx, 408, 409, 425, 429) stores nothing.
func (s *state) finish(ctx context.Context, rec *recorder) (*answer, error) {
	a := rec.answer()
	if retryableStatus(*a.status) {
		s.abort(ctx)
		return a, nil
	}
	stored := rec.stored(s.m.o.Headers)
	sql := "SELECT idempotency.idem_complete($1, $2, $3, response_status => $4, response_body => $5, " +
		"response_headers => $6, resource_id => $7)"
	args := []interface{}{s.Scope, s.Key, s.Attempt, *a.status, a.body, stored, s.resource}
	if *a.status >= 400 {
		sql = "SELECT idempotency.idem_fail($1, $2, $3, false, response_status => $4, response_body => $5, " +
			"response_headers => $6)"
		args = args[:6]
	}
	if s.conn == nil {
		_, err := s.m.pool.Exec(ctx, sql, args...)
		return a, err
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	b.Queue("COMMIT")
	br := s.conn.SendBatch(ctx, b)
	_, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	s.end(ctx, "ROLLBACK") // after an error: the COMMIT was not run
	return a, err
}

// abort stores nothing of this attempt: its transaction rolls back, and a TwoPhase claim is
// failed as retryable, so that the same key is claimed again.
func (s *state) abort(ctx context.Context) {
	s.end(ctx, "ROLLBACK")
	if s.m.o.Mode == TwoPhase && s.Key != "" {
		s.m.pool.Exec(ctx, "SELECT idempotency.idem_fail($1, $2, $3, true)", s.Scope, s.Key, s.Attempt)
	}
}

// end releases the request's connection, after sql when a transaction is still open on it.
func (s *state) end(ctx context.Context, sql string) {
	if s.conn == nil {
		return
	}
	if s.conn.Conn().PgConn().TxStatus() != 'I' {
		s.conn.Exec(ctx, sql)
	}
	s.conn.Release()
	s.conn = nil
}
