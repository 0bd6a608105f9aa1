package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/jackc/pgx/v5"
)

// errTransactionPooler is Open's refusal of a connection pooler in
// transaction (or statement) mode: leases, LISTEN and the lead of
// polling are session state, which such a pooler hands to other
// clients between transactions.
var errTransactionPooler = errors.New("store: TIDYBOT_DATABASE_URL leads to a connection pooler in transaction mode (an advisory lock taken by one statement was not seen by the next): tidybot needs session pooling (PgBouncer pool_mode = session) or a direct connection; see docs/deploy.md")

// rower runs one statement and returns its row (a connection, or in
// tests two behind a pretended pooler).
type rower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// sessionPooling refuses a database reached through a transaction
// pooler (see pooledBySession).
func (s *Store) sessionPooling(ctx context.Context) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("store: connect to PostgreSQL at %s (TIDYBOT_DATABASE_URL): %w", s.where(), err)
	}
	defer c.Release()
	ok, err := pooledBySession(ctx, c)
	if err != nil {
		return fmt.Errorf("store: check for a transaction pooler: %w", err)
	}
	if !ok {
		c.Conn().Close(ctx) // the lock it took may be on another server session
		return errTransactionPooler
	}
	return nil
}

// pooledBySession takes a session advisory lock (a random key) in one
// statement and looks for it, held by the same server session, in the
// next, then frees it: a transaction pooler may run the second on
// another server session, which holds no such lock. (A pooler that
// happens to run both on one session is not caught: the check is made
// at every start.) The statements go by the simple protocol, which a
// pooler in transaction mode passes, as it may not pass prepared ones.
func pooledBySession(ctx context.Context, q rower) (bool, error) {
	k1, k2 := rand.Int32(), rand.Int32()
	simple := pgx.QueryExecModeSimpleProtocol
	var locked bool
	if err := q.QueryRow(ctx, `SELECT pg_try_advisory_lock($1::int4, $2::int4)`, simple, k1, k2).Scan(&locked); err != nil {
		return false, err
	}
	if !locked {
		return false, fmt.Errorf("advisory lock (%d, %d) taken by another session", k1, k2)
	}
	var seen bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND pid = pg_backend_pid() AND classid = $1::int4::oid AND objid = $2::int4::oid AND objsubid = 2)`, simple, k1, k2).Scan(&seen); err != nil {
		return false, err
	}
	if !seen {
		return false, nil
	}
	if err := q.QueryRow(ctx, `SELECT pg_advisory_unlock($1::int4, $2::int4)`, simple, k1, k2).Scan(&locked); err != nil {
		return false, err
	}
	return true, nil
}
