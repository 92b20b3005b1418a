// A payment service on net/http and pgx v4 that follows the contract of examples/README.md.
// The database access of a request is in one function per mode: payOnce, payTwoPhase, payPlain,
// receiveWebhook.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

var (
	pool           *pgxpool.Pool
	leaseSeconds   = envInt("LEASE_SECONDS", 10)
	providerDelay  = time.Duration(envInt("PROVIDER_DELAY_MS", 100)) * time.Millisecond
	completeDelay  = time.Duration(envInt("COMPLETE_DELAY_MS", 0)) * time.Millisecond
	webhookSecret  = envStr("WEBHOOK_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	idempotencyOff = envStr("IDEMPOTENCY", "on") == "off"
)

type paymentRequest struct {
	Customer *string `json:"customer"`
	Amount   *int64  `json:"amount"`
	Currency *string `json:"currency"`
}

type payment struct {
	ID          string    `json:"id"`
	Customer    string    `json:"customer"`
	Amount      int64     `json:"amount"`
	Currency    string    `json:"currency"`
	ProviderRef *string   `json:"provider_ref"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
}

// answer is an HTTP response as it is stored with idem_complete and replayed.
type answer struct {
	status  int
	body    []byte
	headers map[string]string
}

// claim is what idem_claim says, with the key as idem_key_from_header parsed it.
type claim struct {
	key, outcome string
	attempt      int
	stored       answer
	retryAfter   int
}

const claimSQL = `SELECT k.key, c.outcome, coalesce(c.attempt, 0), coalesce(c.response_status, 0), c.response_body, c.response_headers,
       greatest(1, ceil(extract(epoch FROM c.lease_expires_at - clock_timestamp())))::int
FROM idem_key_from_header($2) AS k(key),
     idem_claim($1, k.key, idem_fingerprint($3::text), lease => $4::int * interval '1 second') AS c`

// querier is a *pgxpool.Pool or a pgx.Tx.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...interface{}) pgx.Row
}

func claimKey(ctx context.Context, q querier, scope, header string, body []byte, lease *int) (c claim, err error) {
	err = q.QueryRow(ctx, claimSQL, scope, header, string(body), lease).Scan(
		&c.key, &c.outcome, &c.attempt, &c.stored.status, &c.stored.body, &c.stored.headers, &c.retryAfter)
	return c, err
}

// insertPayment inserts the payment and builds the 201 answer that is stored and sent.
func insertPayment(ctx context.Context, tx pgx.Tx, req paymentRequest, providerRef *string) (id string, a answer, err error) {
	p := payment{Customer: *req.Customer, Amount: *req.Amount, Currency: *req.Currency, ProviderRef: providerRef}
	err = tx.QueryRow(ctx, `INSERT INTO payments (customer, amount, currency, provider_ref) VALUES ($1, $2, $3, $4)
		RETURNING id::text, status, created_at`, p.Customer, p.Amount, p.Currency, p.ProviderRef).Scan(&p.ID, &p.Status, &p.CreatedAt)
	body, _ := json.Marshal(p)
	return p.ID, answer{201, body, map[string]string{"Content-Type": "application/json", "Location": "/v1/payments/" + p.ID}}, err
}

// complete stores the answer: the payment's id, the exact body bytes and the headers.
func complete(ctx context.Context, tx pgx.Tx, scope string, c claim, id string, a answer) error {
	_, err := tx.Exec(ctx, `SELECT idem_complete($1, $2, $3, $4, response_status => $5, response_body => $6, response_headers => $7::jsonb)`,
		scope, c.key, c.attempt, id, a.status, a.body, a.headers)
	return err
}

// payOnce: single-transaction mode, one call of create_payment (examples/schema.sql): the claim,
// the payment when claimed and idem_complete of its answer, a transaction by itself.
func payOnce(ctx context.Context, header string, body []byte, req paymentRequest) (answer, error) {
	var c claim
	var retryAfter *int
	err := pool.QueryRow(ctx, `SELECT outcome, coalesce(response_status, 0), response_body, response_headers, retry_after FROM create_payment($1, $2, $3, $4, $5)`,
		header, string(body), *req.Customer, *req.Amount, *req.Currency).Scan(
		&c.outcome, &c.stored.status, &c.stored.body, &c.stored.headers, &retryAfter)
	if err != nil {
		return answer{}, err
	}
	if retryAfter != nil {
		c.retryAfter = *retryAfter
	}
	if c.outcome == "claimed" { // the new payment's answer, as stored
		return c.stored, nil
	}
	return notClaimed(c), nil
}

// payTwoPhase: the claim commits with a lease, the provider is called outside any transaction, then
// the payment and idem_complete commit together.
func payTwoPhase(ctx context.Context, header string, body []byte, req paymentRequest) (answer, error) {
	c, err := claimKey(ctx, pool, "payments-two-phase", header, body, &leaseSeconds)
	if err != nil || (c.outcome != "claimed" && c.outcome != "reclaimed") {
		return notClaimed(c), err
	}
	var charge string
	if c.outcome == "reclaimed" { // the previous attempt may have charged before it died
		err = pool.QueryRow(ctx, `SELECT id::text FROM provider_charges WHERE idempotency_key = $1`, c.key).Scan(&charge)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return answer{}, err
		}
	}
	if charge == "" {
		if charge, err = providerCharge(ctx, c.key, *req.Amount, *req.Currency); err != nil {
			return answer{}, err
		}
	}
	time.Sleep(completeDelay)
	var a answer
	err = pool.BeginFunc(ctx, func(tx pgx.Tx) (err error) {
		var id string
		if id, a, err = insertPayment(ctx, tx, req, &charge); err != nil {
			return err
		}
		return complete(ctx, tx, "payments-two-phase", c, id, a)
	})
	return a, err
}

// providerCharge is the fake payment provider: slow, and idempotent on the key it is given.
func providerCharge(ctx context.Context, key string, amount int64, currency string) (id string, err error) {
	time.Sleep(providerDelay)
	err = pool.QueryRow(ctx, `INSERT INTO provider_charges (idempotency_key, amount, currency) VALUES ($1, $2, $3)
		ON CONFLICT (idempotency_key) DO NOTHING RETURNING id::text`, key, amount, currency).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		err = pool.QueryRow(ctx, `SELECT id::text FROM provider_charges WHERE idempotency_key = $1`, key).Scan(&id)
	}
	return id, err
}

// payPlain is the baseline without the extension (IDEMPOTENCY=off): BEGIN; INSERT; COMMIT.
func payPlain(ctx context.Context, req paymentRequest) (a answer, err error) {
	err = pool.BeginFunc(ctx, func(tx pgx.Tx) (err error) {
		_, a, err = insertPayment(ctx, tx, req, nil)
		return err
	})
	return a, err
}

func notClaimed(c claim) answer {
	switch c.outcome {
	case "replayed":
		return replay(c.stored)
	case "mismatch":
		return errorAnswer(422, "Idempotency-Key reused with a different request")
	default: // in_progress
		a := errorAnswer(409, "a request with this Idempotency-Key is in progress")
		a.headers["Retry-After"] = strconv.Itoa(c.retryAfter)
		return a
	}
}

func replay(stored answer) answer {
	if stored.headers == nil {
		stored.headers = map[string]string{}
	}
	stored.headers["Idempotent-Replayed"] = "true"
	return stored
}

// lookup answers what is stored for the key (after IK003: another attempt finished first).
func lookup(ctx context.Context, scope, header string) (a answer, err error) {
	err = pool.QueryRow(ctx, `SELECT response_status, response_body, response_headers
		FROM idem_lookup($1, idem_key_from_header($2))`, scope, header).Scan(&a.status, &a.body, &a.headers)
	return replay(a), err
}

// receiveWebhook: idem_webhook_receive and the effect in one transaction.
func receiveWebhook(ctx context.Context, h http.Header, body []byte, eventType string, paymentID *string) (status int, outcome string, err error) {
	err = pool.BeginFunc(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT idem_webhook_receive('payments-webhooks', 'standard', ARRAY[$1::text], $2, $3::bytea, $4, $5)`,
			webhookSecret, h.Get("webhook-id"), body, h.Get("webhook-signature"), h.Get("webhook-timestamp")).Scan(&outcome)
		switch {
		case err != nil:
			return err
		case outcome == "new":
			status = 200
			_, err = tx.Exec(ctx, `INSERT INTO webhook_events (event_id, type, payment_id) VALUES ($1, $2, $3)`,
				h.Get("webhook-id"), eventType, paymentID)
		case outcome == "duplicate" || outcome == "stale":
			status = 200
		case outcome == "mismatch":
			status = 409
		default: // invalid_signature, stale_timestamp, invalid_event_id: nothing was written
			status = 400
		}
		return err
	})
	return status, outcome, err
}
