// A payment service on net/http, pgx v4 and the idempotency package (clients/go), following the
// contract of examples/README.md.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/jackc/pgx/v4/pgxpool"
)

var pool *pgxpool.Pool

// payments checks the body before any claim (400, nothing stored), then picks the mode.
func payments(single, twoPhase http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if p := decode(r); p.Customer == "" || p.Amount <= 0 || p.Currency == "" {
			http.Error(w, "body must be {customer: string, amount: positive integer, currency: string}", 400)
		} else if r.URL.Query().Get("mode") == "two-phase" {
			twoPhase.ServeHTTP(w, r)
		} else {
			single.ServeHTTP(w, r)
		}
	}
}

// decode reads the payment from the body and leaves the body readable again.
func decode(r *http.Request) (p payment) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	json.Unmarshal(body, &p)
	return p
}

func main() {
	mode := "describe" // unnamed statements, for PgBouncer; PREPARE=on: named (direct connections)
	if os.Getenv("PREPARE") == "on" {
		mode = "prepare"
	}
	if m := os.Getenv("STATEMENT_CACHE_MODE"); m != "" {
		mode = m
	}
	cfg, err := pgxpool.ParseConfig("statement_cache_mode=" + mode)
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = int32(env("POOL_SIZE", 8))
	if pool, err = pgxpool.ConnectConfig(context.Background(), cfg); err != nil {
		log.Fatal(err)
	}
	// The Idempotency-Key middleware, one per mode. The principal is who a key belongs to: this
	// demo has no authentication, so it is the payment's customer; a real service returns its
	// authenticated user. New checks the database (the extension, the grants) before we listen.
	ctx := context.Background()
	principal := func(r *http.Request) string { return decode(r).Customer }
	lease := time.Duration(env("LEASE_SECONDS", 10)) * time.Second
	single, err := idempotency.New(ctx, pool, idempotency.Options{Principal: principal})
	if err != nil {
		log.Fatal(err)
	}
	twoPhase, err := idempotency.New(ctx, pool, idempotency.Options{Principal: principal,
		Mode: idempotency.TwoPhase, Lease: lease})
	if err != nil {
		log.Fatal(err)
	}
	// Both modes are one operation, POST /v1/payments: a key is the same request in either.
	route := payments(single.HandleFunc("POST /v1/payments", pay), twoPhase.HandleFunc("POST /v1/payments", payTwoPhase))
	switch os.Getenv("IDEMPOTENCY") {
	case "off": // bench/http.sh's baseline: BEGIN; INSERT; COMMIT
		off, err := idempotency.New(ctx, pool, idempotency.Options{Principal: principal, Mode: idempotency.Off})
		if err != nil {
			log.Fatal(err)
		}
		route = payments(off.HandleFunc("POST /v1/payments", pay), off.HandleFunc("POST /v1/payments", pay))
	case "manual": // bench/http.sh's yardstick: single-transaction mode with the record by hand
		route = payments(http.HandlerFunc(payByHand), twoPhase.HandleFunc("POST /v1/payments", payTwoPhase))
	}
	http.Handle("/v1/payments", route)
	http.HandleFunc("/v1/webhooks/provider", webhook)
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(env("PORT", 8080)))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("listening on " + ln.Addr().String())
	log.Fatal(http.Serve(ln, nil))
}

func env(name string, fallback int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return fallback
}
