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

// client is a connection as the check uses it (a pool's, or in tests
// one of a pretended pooler).
type client interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// sessionPooling refuses a database reached through a transaction
// pooler (see pooledBySession).
func (s *Store) sessionPooling(ctx context.Context) error {
	a, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("store: connect to PostgreSQL at %s (TIDYBOT_DATABASE_URL): %w", s.where(), err)
	}
	defer a.Release()
	b, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("store: connect to PostgreSQL at %s (TIDYBOT_DATABASE_URL): %w", s.where(), err)
	}
	defer b.Release()
	ok, err := pooledBySession(ctx, a, b)
	if err != nil {
		return fmt.Errorf("store: check for a transaction pooler: %w", err)
	}
	if !ok {
		// The lock it took may be on another client's server session.
		_ = a.Conn().Close(ctx)
		_ = b.Conn().Close(ctx)
		return errTransactionPooler
	}
	return nil
}

// pooledBySession tells a session pooler (or none) from a transaction
// pooler with two client connections. a takes a session advisory lock
// (a random key); b, in a transaction, reads its server session; a
// then looks for its lock. Through a session pooler each client has a
// server session of its own for as long as it is connected: b's differs
// from a's, and a's next statement runs where its lock is. A
// transaction pooler hands a's server session, idle between
// statements, to b (PgBouncer takes the most recently used), or runs
// a's second statement elsewhere. The statements go by the simple
// protocol, which a pooler in transaction mode passes, as it may not
// pass prepared ones.
func pooledBySession(ctx context.Context, a, b client) (bool, error) {
	k1, k2 := rand.Int32(), rand.Int32()
	simple := pgx.QueryExecModeSimpleProtocol
	var pidA, pidB, pidA2 int32
	var locked, seen bool
	if err := a.QueryRow(ctx, `SELECT pg_backend_pid(), pg_try_advisory_lock($1::int4, $2::int4)`, simple, k1, k2).Scan(&pidA, &locked); err != nil {
		return false, err
	}
	if !locked {
		return false, fmt.Errorf("advisory lock (%d, %d) taken by another session", k1, k2)
	}
	tx, err := b.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`, simple).Scan(&pidB); err != nil {
		return false, err
	}
	if err := a.QueryRow(ctx, `SELECT pg_backend_pid(), EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND pid = pg_backend_pid() AND classid = $1::int4::oid AND objid = $2::int4::oid AND objsubid = 2)`, simple, k1, k2).Scan(&pidA2, &seen); err != nil {
		return false, err
	}
	if pidB == pidA || pidA2 != pidA || !seen {
		return false, nil
	}
	if err := a.QueryRow(ctx, `SELECT pg_advisory_unlock($1::int4, $2::int4)`, simple, k1, k2).Scan(&locked); err != nil {
		return false, err
	}
	return true, nil
}
