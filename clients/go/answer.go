package idempotency

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strings"

	"github.com/jackc/pgconn"
)

// answer is a response to send: a stored one (idem_http_answer), a problem, or the handler's own.
type answer struct {
	status  *int
	headers map[string]string // idem_http_answer's, or a problem's
	all     http.Header       // the handler's, sent as they are
	body    []byte
}

func (a *answer) write(w http.ResponseWriter) {
	h := w.Header()
	for name, values := range a.all {
		h[name] = values
	}
	for name, value := range a.headers {
		h.Set(name, value)
	}
	w.WriteHeader(*a.status)
	w.Write(a.body)
}

// problem is an RFC 9457 problem answer.
func problem(status int, title string) *answer {
	body, _ := json.Marshal(map[string]interface{}{"type": "about:blank", "title": title, "status": status})
	return &answer{status: &status, headers: map[string]string{"Content-Type": "application/problem+json"}, body: body}
}

func retryLater(a *answer) *answer {
	a.headers["Retry-After"] = "1"
	return a
}

// badRequest are the SQLSTATEs of a malformed key or body: 400, nothing stored.
var badRequest = map[string]bool{"22004": true, "22023": true, "22001": true, "22P02": true,
	"22021": true, "22003": true, "54001": true}

// answer is a when err is nil, else the answer of err (the table in docs/records.md).
func (s *state) answer(ctx context.Context, a *answer, err error) *answer {
	if err == nil {
		return a
	}
	var pe *pgconn.PgError
	errors.As(err, &pe)
	switch code := sqlstate(err); {
	case code == "IK003": // another attempt finished first: what it stored
		var st answer
		e := s.m.pool.QueryRow(ctx, "SELECT status, headers, body FROM idempotency.idem_http_answer($1, $2)",
			s.Scope, s.Key).Scan(&st.status, &st.headers, &st.body)
		if e == nil && st.status != nil {
			return &st
		}
		return retryLater(problem(409, "this Idempotency-Key was finished by another attempt"))
	case code == "IK002": // fenced: nothing of this attempt is sent
		return retryLater(problem(409, "superseded by another attempt of this Idempotency-Key"))
	case badRequest[code]:
		return problem(400, pe.Message)
	case Retryable(err):
		return retryLater(problem(503, "temporarily unavailable"))
	}
	log.Printf("idempotency: scope %s: %v", s.Scope, err)
	return problem(500, "internal error")
}

func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// Retryable is the rule for errors: a retry with the same key is answered correctly whatever
// happened (fenced, serialization failure, deadlock, read-only or shutting-down server, lost
// connection); the client is told so (409 or 503 with Retry-After), never retried silently.
func Retryable(err error) bool {
	if code := sqlstate(err); code != "" {
		return code == "IK002" || code == "40001" || code == "40P01" || code == "25006" ||
			strings.HasPrefix(code, "08") || strings.HasPrefix(code, "57P")
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err)
}

// retryableStatus: an answer of the handler that is not stored, so that a retry runs it again.
func retryableStatus(status int) bool {
	return status >= 500 || status == 408 || status == 409 || status == 425 || status == 429
}

// recorder captures the handler's response; nothing reaches the client before it is stored.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 && status >= 200 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

// answer is the response as net/http would send it (a Content-Type sniffed when none is set).
func (r *recorder) answer() *answer {
	r.WriteHeader(http.StatusOK)
	if _, set := r.header["Content-Type"]; !set && r.body.Len() > 0 {
		r.header.Set("Content-Type", http.DetectContentType(r.body.Bytes()))
	}
	status := r.status
	return &answer{status: &status, all: r.header, body: r.body.Bytes()}
}

// stored are the allow-listed headers, stored with the response and replayed.
func (r *recorder) stored(names []string) map[string]string {
	m := map[string]string{}
	for _, name := range names {
		if v := r.header.Values(name); len(v) > 0 {
			m[http.CanonicalHeaderKey(name)] = strings.Join(v, ", ")
		}
	}
	return m
}
