package idempotency

import (
	"context"
	"errors"
	"strconv"

	"github.com/jackc/pgx/v4"
)

// ErrOwned is what Commit and Rollback of the request's transaction return: the middleware ends
// it (COMMIT with idem_http_end, or ROLLBACK), so a habitual `defer tx.Rollback(ctx)` is harmless.
var ErrOwned = errors.New("idempotency: the middleware ends the request's transaction")

// tx is the request's transaction as a pgx.Tx over the connection that sent BEGIN together with
// idem_http_begin (pgx's own Tx sends BEGIN in a round trip of its own). Begin makes a savepoint, as
// pgx's does; LargeObjects is not available.
type tx struct {
	*conn     // Exec, Query, QueryRow, QueryFunc, SendBatch, CopyFrom, Prepare
	depth int // 0: the transaction; n: the savepoint idem_sp_n
	done  bool
}

func (t *tx) Begin(ctx context.Context) (pgx.Tx, error) {
	sp := &tx{conn: t.conn, depth: t.depth + 1}
	_, err := t.conn.Exec(ctx, "SAVEPOINT idem_sp_"+strconv.Itoa(sp.depth))
	if err != nil {
		return nil, err
	}
	return sp, nil
}

func (t *tx) BeginFunc(ctx context.Context, f func(pgx.Tx) error) error {
	sp, err := t.Begin(ctx)
	if err != nil {
		return err
	}
	if err = f(sp); err != nil {
		sp.Rollback(ctx)
		return err
	}
	return sp.Commit(ctx)
}

func (t *tx) Commit(ctx context.Context) error   { return t.end(ctx, "RELEASE SAVEPOINT idem_sp_") }
func (t *tx) Rollback(ctx context.Context) error { return t.end(ctx, "ROLLBACK TO SAVEPOINT idem_sp_") }

func (t *tx) end(ctx context.Context, sql string) error {
	if t.depth == 0 {
		return ErrOwned
	}
	if t.done {
		return pgx.ErrTxClosed
	}
	t.done = true
	_, err := t.conn.Exec(ctx, sql+strconv.Itoa(t.depth))
	return err
}

func (t *tx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }
func (t *tx) Conn() *pgx.Conn                { return t.conn }

type conn = pgx.Conn
