package idempotency

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

// state is one request's: its claim, its transaction, what the handler set.
type state struct {
	m        *Middleware
	claim    Claim
	conn     *pgxpool.Conn // the request's transaction's connection, while it is open
	resource *string
	err      error // Fail's, or a panic's
	claimed  bool  // begin said run: the key is this attempt's until stored or released
}

// panicked is a handler's panic as an error (no database error: the map's NULL row).
type panicked struct{ value interface{} }

func (p panicked) Error() string { return fmt.Sprint("the handler panicked: ", p.value) }

const beginSQL = `SELECT scope, key, attempt, run, reclaimed, status, headers::text, body
	FROM idempotency.idem_http_begin($1, $2, $3, $4, $5::interval, $6::interval, $7)`

// endSQL stores the answer in the request's transaction, with the COMMIT queued behind it in the
// same round trip. idem_http_end false (the answer is not stored) must not commit: 1 / 0 then
// aborts the transaction with 22012 (division_by_zero, which no function of the contract
// raises), the server skips the queued COMMIT, and the middleware rolls back and releases.
const endSQL = `SELECT 1 / idempotency.idem_http_end($1, $2, $3, $4, $5::jsonb, $6, $7, $8)::int`
const notStored = "22012"

const endAutocommitSQL = `SELECT idempotency.idem_http_end($1, $2, $3, $4, $5::jsonb, $6, $7, $8)`

// detached is the request's context without its cancellation: the middleware's statements end
// even when the client leaves (Go 1.19 has no context.WithoutCancel).
type detached struct{ context.Context }

func (detached) Done() <-chan struct{}       { return nil }
func (detached) Err() error                  { return nil }
func (detached) Deadline() (time.Time, bool) { return time.Time{}, false }

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, op string, next http.Handler) {
	s := &state{m: m}
	ctx := detached{r.Context()}
	if m.o.Mode == Off {
		s.serveOff(ctx, w, r, next)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err == nil {
		var a *answer
		if a, err = s.begin(ctx, r, op, body); err == nil && a != nil {
			a.write(w)
			return
		}
	}
	if err != nil {
		s.fail(ctx, err).write(w)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body)) // the handler reads the body again
	rec := &recorder{header: http.Header{}}
	s.run(r, rec, next)
	if s.err == nil {
		var a *answer
		if a, err = s.end(ctx, rec); err == nil {
			a.write(w)
			return
		}
		s.err = err
	}
	a := s.fail(ctx, s.err)
	if p, ok := s.err.(panicked); ok && p.value == http.ErrAbortHandler {
		panic(http.ErrAbortHandler) // the handler asked net/http to abort the response
	}
	a.write(w)
}

// begin runs idem_http_begin: Single mode on the request's connection, BEGIN and the statement in
// one round trip (ROLLBACK when the handler does not run). A nil answer: run the handler.
func (s *state) begin(ctx context.Context, r *http.Request, op string, body []byte) (*answer, error) {
	o := s.m.o
	var principal, header *string
	if o.Principal != nil {
		r.Body = io.NopCloser(bytes.NewReader(body)) // the principal function may read it
		if p := o.Principal(r); p != "" {
			principal = &p
		}
	}
	if v, ok := r.Header["Idempotency-Key"]; ok {
		j := strings.Join(v, ", ")
		header = &j
	}
	args := []interface{}{principal, op, header, body, s.m.lease, s.m.ttl, o.SharedKeySpace}
	var scope, key, headers *string
	var attempt, status *int32
	var reclaimed *bool
	var run bool
	var out []byte
	dest := []interface{}{&scope, &key, &attempt, &run, &reclaimed, &status, &headers, &out}
	if o.Mode == TwoPhase {
		if err := s.m.pool.QueryRow(ctx, beginSQL, args...).Scan(dest...); err != nil {
			return nil, err
		}
	} else {
		conn, err := s.m.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		s.conn = conn
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(beginSQL, args...)
		br := conn.SendBatch(ctx, b)
		if _, err = br.Exec(); err == nil {
			err = br.QueryRow().Scan(dest...)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
	}
	if run {
		s.claimed = true
		s.claim = Claim{Scope: *scope, Key: *key, Attempt: int(*attempt), Reclaimed: reclaimed != nil && *reclaimed}
		return nil, nil
	}
	if s.conn != nil {
		if _, err := s.conn.Exec(ctx, "ROLLBACK"); err != nil {
			return nil, err
		}
		s.done()
	}
	a := &answer{body: out}
	if status == nil {
		return nil, fmt.Errorf("idempotency: idem_http_begin returned neither run nor a status")
	}
	n := int(*status)
	a.status = &n
	if headers != nil {
		var err error
		if a.headers, err = parseHeaders(*headers); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// run calls the handler with the request's state in its context and, in TwoPhase mode, the
// heartbeat; a panic becomes s.err, logged.
func (s *state) run(r *http.Request, w http.ResponseWriter, next http.Handler) {
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), ctxKey{}, s))
	defer cancel()
	defer s.heartbeat(cancel)()
	defer func() {
		if p := recover(); p != nil {
			s.err = panicked{p}
			if p != http.ErrAbortHandler {
				s.m.o.ErrorLog.Printf("idempotency: %s: the handler panicked: %v\n%s", s.claim.Scope, p, debug.Stack())
			}
		}
	}()
	next.ServeHTTP(w, r.WithContext(ctx))
}

// heartbeat renews a TwoPhase lease every Heartbeat while the handler runs; fenced (IK002) or
// finished by another attempt (IK003), it cancels the handler's context. stop ends it.
func (s *state) heartbeat(cancel func()) (stop func()) {
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
				_, err := s.m.pool.Exec(context.Background(),
					"SELECT idempotency.idem_heartbeat($1, $2, $3, $4::interval)",
					s.claim.Scope, s.claim.Key, s.claim.Attempt, s.m.o.Lease)
				if code := sqlstate(err, nil); code == "IK002" || code == "IK003" {
					cancel()
				}
			}
		}
	}()
	return func() { t.Stop(); close(done) }
}

// end runs idem_http_end with the handler's answer: with the request's transaction, the
// statement and COMMIT in one round trip; in TwoPhase mode without one, in autocommit. Not
// stored: ROLLBACK and idem_http_release. The answer to send is the handler's.
func (s *state) end(ctx context.Context, rec *recorder) (*answer, error) {
	a := rec.answer()
	args := []interface{}{s.claim.Scope, s.claim.Key, s.claim.Attempt, *a.status, rec.headersJSON(), a.body,
		s.resource, s.m.o.Headers}
	if s.conn == nil {
		var stored bool
		if err := s.m.pool.QueryRow(ctx, endAutocommitSQL, args...).Scan(&stored); err != nil {
			return nil, err
		}
		if !stored {
			s.release(ctx)
		}
		return a, nil
	}
	b := &pgx.Batch{}
	b.Queue(endSQL, args...)
	b.Queue("COMMIT")
	br := s.conn.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil && sqlstate(err, nil) != notStored {
		return nil, err
	}
	if err != nil {
		s.release(ctx)
	} else {
		s.claimed = false
		s.done()
	}
	return a, nil
}

// fail is the error path: ROLLBACK, idem_http_release (its failure ignored), and the answer
// idem_http_errors maps err to; IK003 (another attempt finished) answers what that attempt
// stored, idem_http_answer(scope, key), or the IK002 row's answer when it has none.
func (s *state) fail(ctx context.Context, err error) *answer {
	var conn = s.pgConn()
	code := sqlstate(err, conn)
	s.release(ctx)
	a, row := s.m.mapped(code)
	if _, ok := err.(panicked); !ok && !s.m.retryable[row] && row != "IK003" { // a panic is logged with its stack
		s.m.o.ErrorLog.Printf("idempotency: %s: %v", s.claim.Scope, err)
	}
	if row == "IK003" {
		var st answer
		var headers *string
		var status *int32
		e := s.m.pool.QueryRow(ctx, "SELECT status, headers::text, body FROM idempotency.idem_http_answer($1, $2)",
			s.claim.Scope, s.claim.Key).Scan(&status, &headers, &st.body)
		if e == nil && status != nil && headers != nil {
			n := int(*status)
			st.status = &n
			if st.headers, e = parseHeaders(*headers); e == nil {
				return &st
			}
		}
		a, _ = s.m.mapped("IK002")
	}
	return a
}

// release rolls the request's transaction back and, when the handler ran, releases the key
// (idem_http_release; in Single mode a no-op, the rollback released it), in one round trip on
// the request's connection, else on another of the pool.
func (s *state) release(ctx context.Context) {
	claimed := s.claimed
	s.claimed = false
	if s.conn != nil && !s.conn.Conn().IsClosed() {
		b := &pgx.Batch{}
		if s.conn.Conn().PgConn().TxStatus() != 'I' {
			b.Queue("ROLLBACK")
		}
		if claimed {
			b.Queue("SELECT idempotency.idem_http_release($1, $2, $3)", s.claim.Scope, s.claim.Key, s.claim.Attempt)
		}
		if b.Len() > 0 && s.conn.SendBatch(ctx, b).Close() == nil {
			claimed = false
		}
	}
	s.done()
	if claimed {
		s.m.pool.Exec(ctx, "SELECT idempotency.idem_http_release($1, $2, $3)", s.claim.Scope, s.claim.Key, s.claim.Attempt)
	}
}

// done gives the request's connection back to the pool (which closes it if a transaction is
// still open on it).
func (s *state) done() {
	if s.conn != nil {
		s.conn.Release()
		s.conn = nil
	}
}

func (s *state) pgConn() *pgconn.PgConn {
	if s.conn == nil {
		return nil
	}
	return s.conn.Conn().PgConn()
}

// serveOff is Mode Off: BEGIN, the handler, COMMIT; nothing claimed, nothing stored. The
// transaction rolls back when the handler panicked, called Fail or answered 5xx.
func (s *state) serveOff(ctx context.Context, w http.ResponseWriter, r *http.Request, next http.Handler) {
	conn, err := s.m.pool.Acquire(ctx)
	if err == nil {
		s.conn = conn
		_, err = conn.Exec(ctx, "BEGIN")
	}
	if err != nil {
		s.fail(ctx, err).write(w)
		return
	}
	rec := &recorder{header: http.Header{}}
	s.run(r, rec, next)
	a := rec.answer()
	if s.err == nil && *a.status < 500 {
		if _, err = s.conn.Exec(ctx, "COMMIT"); err == nil {
			s.done()
			a.write(w)
			return
		}
		s.err = err
	}
	if s.err == nil {
		s.release(ctx)
		a.write(w)
		return
	}
	s.fail(ctx, s.err).write(w)
}
