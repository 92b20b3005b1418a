// The HTTP side: routes, request checks, SQLSTATE -> HTTP status, start-up.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4/pgxpool"
)

func main() {
	// The libpq environment (PGHOST, PGPORT, ...) fills in the rest. describe: no named prepared
	// statements, so that PgBouncer's transaction pooling works (README.md).
	cfg, err := pgxpool.ParseConfig("statement_cache_mode=describe")
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = int32(envInt("POOL_SIZE", 8))
	if pool, err = pgxpool.ConnectConfig(context.Background(), cfg); err != nil {
		log.Fatal(err)
	}
	http.HandleFunc("/v1/payments", post(handlePayment))
	http.HandleFunc("/v1/webhooks/provider", post(handleWebhook))
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

	addr := "127.0.0.1:" + envStr("PORT", "8080")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("listening on " + addr) // os.Stdout is unbuffered
	log.Fatal(http.Serve(ln, nil))
}

func post(h func(http.ResponseWriter, *http.Request, []byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			errorAnswer(405, "POST only").write(w)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			errorAnswer(413, "body too large").write(w)
			return
		}
		h(w, r, body)
	}
}

func handlePayment(w http.ResponseWriter, r *http.Request, body []byte) {
	header := r.Header.Values("Idempotency-Key")
	req, ok := parsePayment(body)
	switch {
	case !ok:
		errorAnswer(400, "body must be {customer: string, amount: positive integer, currency: string}").write(w)
		return
	case idempotencyOff: // the baseline for bench/: no key needed, no extension
		a, err := payPlain(r.Context(), req)
		if err != nil {
			a = errorStatus(err)
		}
		a.write(w)
		return
	case len(header) == 0:
		errorAnswer(400, "Idempotency-Key header required").write(w)
		return
	}
	scope, pay := "payments", payOnce
	if r.URL.Query().Get("mode") == "two-phase" {
		scope, pay = "payments-two-phase", payTwoPhase
	}
	a, err := pay(r.Context(), header[0], body, req)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "IK003" { // finished by another attempt: answer that
		a, err = lookup(r.Context(), scope, header[0])
	}
	if err != nil {
		a = errorStatus(err)
	}
	a.write(w)
}

func handleWebhook(w http.ResponseWriter, r *http.Request, body []byte) {
	var event struct {
		Type string `json:"type"`
		Data struct {
			PaymentID *string `json:"payment_id"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &event) != nil {
		errorAnswer(400, "body must be JSON").write(w)
		return
	}
	status, outcome, err := receiveWebhook(r.Context(), r.Header, body, event.Type, event.Data.PaymentID)
	switch {
	case err != nil: // the receiver's own configuration (a malformed secret), or the database
		log.Print(err)
		errorAnswer(500, "internal error").write(w)
	case status == 200:
		jsonAnswer(status, map[string]string{"outcome": outcome}).write(w)
	default:
		errorAnswer(status, outcome).write(w)
	}
}

// parsePayment checks the fields; idem_fingerprint checks the JSON itself (I-JSON) in the claim.
func parsePayment(body []byte) (req paymentRequest, ok bool) {
	err := json.Unmarshal(body, &req)
	return req, err == nil && req.Customer != nil && req.Amount != nil && *req.Amount > 0 && req.Currency != nil
}

// errorStatus maps a SQLSTATE to the answer of examples/README.md.
func errorStatus(err error) answer {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "22023", "22001": // idem_key_from_header / idem_claim: malformed or too long a key
			return errorAnswer(400, "malformed Idempotency-Key")
		case "22P02", "22021", "22003", "54001": // idem_fingerprint: the body is not I-JSON
			return errorAnswer(400, "body is not I-JSON")
		case "IK002": // fenced: another attempt owns the key now; send nothing of this one
			a := errorAnswer(409, "superseded by another attempt")
			a.headers["Retry-After"] = "1"
			return a
		case "25006":
			return errorAnswer(503, "read-only database")
		}
	}
	log.Print(err)
	return errorAnswer(500, "internal error")
}

func errorAnswer(status int, message string) answer {
	return jsonAnswer(status, map[string]string{"error": message})
}

func jsonAnswer(status int, v interface{}) answer {
	body, _ := json.Marshal(v)
	return answer{status, body, map[string]string{"Content-Type": "application/json"}}
}

func (a answer) write(w http.ResponseWriter) {
	for name, value := range a.headers {
		w.Header().Set(name, value)
	}
	w.WriteHeader(a.status)
	w.Write(a.body)
}

func envStr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func envInt(name string, fallback int) int {
	n, err := strconv.Atoi(envStr(name, strconv.Itoa(fallback)))
	if err != nil {
		log.Fatalf("%s: %v", name, err)
	}
	return n
}
