package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"

	"github.com/jackc/pgx/v4"
)

// webhook receives a Standard Webhooks delivery: idem_webhook_receive and its effect (a
// webhook_events row) in one transaction. Not Idempotency-Key based: no middleware.
func webhook(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var event struct {
		Type string `json:"type"`
		Data struct {
			PaymentID *string `json:"payment_id"`
		} `json:"data"`
	}
	if r.Method != http.MethodPost || json.Unmarshal(body, &event) != nil {
		http.Error(w, "POST a JSON body", 400)
		return
	}
	secret := os.Getenv("WEBHOOK_SECRET")
	if secret == "" {
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	}
	h, outcome := r.Header, ""
	err := pool.BeginFunc(r.Context(), func(tx pgx.Tx) error {
		err := tx.QueryRow(r.Context(), `SELECT idempotency.idem_webhook_receive('payments-webhooks', 'standard',
			ARRAY[$1::text], $2, $3::bytea, $4, $5)`, secret, h.Get("webhook-id"), body,
			h.Get("webhook-signature"), h.Get("webhook-timestamp")).Scan(&outcome)
		if err == nil && outcome == "new" {
			_, err = tx.Exec(r.Context(), `INSERT INTO webhook_events (event_id, type, payment_id)
				VALUES ($1, $2, $3)`, h.Get("webhook-id"), event.Type, event.Data.PaymentID)
		}
		return err
	})
	switch {
	case err != nil: // the receiver's own configuration (a malformed secret), or the database
		http.Error(w, err.Error(), 500)
	case outcome == "new" || outcome == "duplicate" || outcome == "stale":
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"outcome": outcome})
	case outcome == "mismatch":
		http.Error(w, outcome, 409)
	default: // invalid_signature, stale_timestamp, invalid_event_id: nothing was written
		http.Error(w, outcome, 400)
	}
}
