package idempotency

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/jackc/pgconn"
)

// answer is a response to send: one of the database's (status, headers, body as given) or the
// handler's own (all its headers).
type answer struct {
	status  *int              // nil: the IK003 row of the map, which has no answer of its own
	headers map[string]string // the database's
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

func parseHeaders(text string) (map[string]string, error) {
	h := map[string]string{}
	return h, json.Unmarshal([]byte(text), &h)
}

// sqlstate is the error's SQLSTATE: the server's code, "08" (connection exception) for a
// connection that failed without one, "" for any other error.
func sqlstate(err error, conn *pgconn.PgConn) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err) || (conn != nil && conn.IsClosed()) {
		return "08"
	}
	return ""
}

// mapped is the row of idem_http_errors for an SQLSTATE: the code's, else its class's, else the
// row whose sqlstate is NULL.
func (m *Middleware) mapped(code string) (a *answer, key string) {
	if a := m.errors[code]; a != nil && code != "" {
		return a, code
	}
	if len(code) >= 2 {
		if a := m.errors[code[:2]]; a != nil {
			return a, code[:2]
		}
	}
	return m.errors[""], ""
}

// recorder captures the handler's response; nothing reaches the client before idem_http_end.
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

// headersJSON are all the handler's headers as idem_http_end takes them: a JSON object, the
// values of a repeated header joined with ", ".
func (r *recorder) headersJSON() []byte {
	m := make(map[string]string, len(r.header))
	for name, values := range r.header {
		m[name] = strings.Join(values, ", ")
	}
	j, _ := json.Marshal(m)
	return j
}
