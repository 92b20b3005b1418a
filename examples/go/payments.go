package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/jackc/pgx/v4"
)

type payment struct {
	ID          string    `json:"id"`
	Customer    string    `json:"customer"`
	Amount      int64     `json:"amount"`
	Currency    string    `json:"currency"`
	ProviderRef *string   `json:"provider_ref"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
}

// pay is the route in single-transaction mode: its INSERT commits with the stored answer.
func pay(w http.ResponseWriter, r *http.Request) {
	if err := insert(w, r, idempotency.Tx(r.Context()), nil); err != nil {
		idempotency.Fail(r.Context(), err) // the map's answer (500 here); rolled back, the key released
	}
}

// payByHand is IDEMPOTENCY=manual (bench/http.sh's yardstick): pay with the exactly-once record
// written by hand instead of the package, as a careful user would without the extension (the
// table manual_keys, examples/schema.sql): the same pool, statements with parameters; one payment
// per key, a retry gets the stored answer byte for byte, another body under the key is refused.
func payByHand(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimSpace(r.Header.Get("Idempotency-Key")) // an RFC 8941 string ("k-1") or k-1
	if n := len(key); n >= 2 && key[0] == '"' && key[n-1] == '"' {
		key = strings.NewReplacer(`\\`, `\`, `\"`, `"`).Replace(key[1 : n-1])
	}
	if key == "" {
		http.Error(w, "an Idempotency-Key header is required", 400)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body)) // decode and insert read it again
	// The record's scope: the principal and the operation, as the package's.
	scope := decode(r).Customer + "/POST /v1/payments"
	fingerprint := sha256.Sum256(body)
	ctx := r.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	defer tx.Rollback(ctx) // after Commit, a no-op
	tag, err := tx.Exec(ctx, `INSERT INTO manual_keys (scope, key, fingerprint) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING`, scope, key, fingerprint[:])
	if err == nil && tag.RowsAffected() == 0 { // a retry (or a duplicate: the INSERT waited for the first's COMMIT)
		var stored, out []byte
		var status int
		var headers map[string]string
		if err = tx.QueryRow(ctx, `SELECT fingerprint, status, headers, body FROM manual_keys
			WHERE scope = $1 AND key = $2`, scope, key).Scan(&stored, &status, &headers, &out); err == nil {
			if !bytes.Equal(stored, fingerprint[:]) {
				http.Error(w, "this Idempotency-Key was used with another request body", 422)
				return
			}
			for name, v := range headers {
				w.Header().Set(name, v)
			}
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(status)
			w.Write(out)
			return
		}
	}
	rec := httptest.NewRecorder() // the handler's answer, stored before it is sent
	if err == nil {
		err = insert(rec, r, tx, nil)
	}
	if err == nil {
		headers := map[string]string{"Content-Type": rec.Header().Get("Content-Type"), "Location": rec.Header().Get("Location")}
		_, err = tx.Exec(ctx, `UPDATE manual_keys SET status = $3, headers = $4, body = $5
			WHERE scope = $1 AND key = $2`, scope, key, rec.Code, headers, rec.Body.Bytes())
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	for name, v := range rec.Header() {
		w.Header()[name] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// payTwoPhase: the claim committed with a lease; the slow provider runs outside any transaction,
// then the payment commits with the stored answer in the final transaction.
func payTwoPhase(w http.ResponseWriter, r *http.Request) {
	ctx, p := r.Context(), decode(r)
	charge, err := provider(ctx, idempotency.ClaimOf(ctx).Key, p)
	time.Sleep(time.Duration(env("COMPLETE_DELAY_MS", 0)) * time.Millisecond)
	if err == nil && p.Customer == "c_throw" {
		err = fmt.Errorf("the handler failed after the provider")
	}
	var tx pgx.Tx
	if err == nil {
		tx, err = idempotency.Begin(ctx)
	}
	if err == nil {
		err = insert(w, r, tx, &charge)
	}
	if err != nil {
		idempotency.Fail(ctx, err) // the map's answer; the key is released (failed, retryable)
	}
}

// provider is the fake payment provider: slow, idempotent on the key (a reclaimed attempt that
// asks again gets the charge its predecessor made).
func provider(ctx context.Context, key string, p payment) (charge string, err error) {
	time.Sleep(time.Duration(env("PROVIDER_DELAY_MS", 100)) * time.Millisecond)
	err = pool.QueryRow(ctx, `WITH n AS (INSERT INTO provider_charges (idempotency_key, amount, currency)
		VALUES ($1, $2, $3) ON CONFLICT (idempotency_key) DO NOTHING RETURNING id)
		SELECT id::text FROM n UNION ALL SELECT id::text FROM provider_charges WHERE idempotency_key = $1`,
		key, p.Amount, p.Currency).Scan(&charge)
	return charge, err
}

// insert writes the payment and answers 201 with it; customer c_throw fails after the INSERT.
func insert(w http.ResponseWriter, r *http.Request, tx pgx.Tx, providerRef *string) error {
	p := decode(r)
	err := tx.QueryRow(r.Context(), `INSERT INTO payments (customer, amount, currency, provider_ref)
		VALUES ($1, $2, $3, $4) RETURNING id::text, status, created_at`, p.Customer, p.Amount, p.Currency,
		providerRef).Scan(&p.ID, &p.Status, &p.CreatedAt)
	if err == nil && p.Customer == "c_throw" && providerRef == nil {
		err = fmt.Errorf("the handler failed after its INSERT")
	}
	if err != nil {
		return err
	}
	p.ProviderRef = providerRef
	w.Header().Set("Location", "/v1/payments/"+p.ID) // resource_id: the payment's id
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(201)
	return json.NewEncoder(w).Encode(p)
}
