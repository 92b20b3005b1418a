package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v4"
	idempotency "idempotency/clients/go"
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

// pay is the route in single-transaction mode: its INSERT commits with idem_complete.
func pay(w http.ResponseWriter, r *http.Request) {
	if err := insert(w, r, idempotency.Tx(r.Context()), nil); err != nil {
		http.Error(w, err.Error(), 500) // 5xx: the transaction rolls back, the key stays free
	}
}

// payTwoPhase: the claim committed with a lease; the slow provider runs outside any transaction,
// then the payment commits with idem_complete in the final transaction.
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
		http.Error(w, err.Error(), 500) // 5xx: idempotency.idem_fail(retryable => true), the key is free again
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
	idempotency.SetResource(r.Context(), p.ID)
	w.Header().Set("Location", "/v1/payments/"+p.ID)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(201)
	return json.NewEncoder(w).Encode(p)
}
