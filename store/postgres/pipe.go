package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pipe is a transaction whose statements reach the server in as few
// round trips as their results allow (docs/performance.md counts them):
// BEGIN and every statement queued with later wait until a result is
// needed (flush, or a querier method) or the commit, then go together
// as one pgx batch. A statement's error surfaces at the flush that sent
// it, and ends the transaction as it would have at once. Through the
// querier methods a pipe is an ordinary transaction: each flushes what
// waits, with itself, and answers as pgx.Tx would.
type pipe struct {
	conn *pgxpool.Conn
	b    *pgx.Batch
	// keys are the data keys this transaction locked (FOR SHARE) and
	// may seal with, by scope (see keyring.lockLater).
	keys map[string]lockedKey
	// looked are the scopes whose current key it read (lockLater), found
	// or not: one it did not find gets a new key without reading again.
	looked map[string]bool
	// rows are the settings rows it locked FOR UPDATE, by key, as read
	// (see lockSettingsLater).
	rows map[string][]byte
}

// errNothingWritten, returned by a pipeTx's fn, rolls its transaction
// back as a success: what it found left nothing to write, and a commit
// of a transaction that locked a row (a guard's FOR SHARE) would be a
// WAL flush for nothing.
var errNothingWritten = errors.New("nothing to write")

// pipeTx runs fn in a pipe, committed (with what fn left queued, in one
// round trip) when fn returns nil, rolled back otherwise (returning nil
// when fn returned errNothingWritten).
func (s *Store) pipeTx(ctx context.Context, fn func(p *pipe) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release() // a connection left in a transaction is closed, not reused
	p := &pipe{conn: conn, b: &pgx.Batch{}}
	p.later("begin")
	if err = fn(p); err == nil {
		p.later("commit")
		err = p.flush(ctx)
		if err == nil {
			return nil
		}
		if commitMayHaveRun(conn, err) {
			err = fmt.Errorf("%w: %w", errCommitUnknown, err)
		}
	}
	if conn.Conn().PgConn().TxStatus() != 'I' {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if _, rerr := conn.Exec(rctx, "rollback"); rerr != nil {
			_ = conn.Conn().Close(rctx)
		}
	}
	if errors.Is(err, errNothingWritten) {
		return nil
	}
	return err
}

// errCommitUnknown marks a pipeTx's failure whose COMMIT may have been
// made: the connection was lost (or its wait given up) once COMMIT was
// sent, before its answer came. What it wrote may be there; made again
// it could be there twice.
var errCommitUnknown = errors.New("commit outcome unknown (connection lost after COMMIT was sent)")

// commitMayHaveRun reports whether the failed flush (err) of a batch
// that ends with COMMIT may have committed: not when nothing was sent,
// nor when the connection is still there to tell that the transaction
// was refused (the server ended it, or runs it still: a statement's
// failure skips the rest, COMMIT included).
func commitMayHaveRun(conn *pgxpool.Conn, err error) bool {
	if pgconn.SafeToRetry(err) {
		return false
	}
	pc := conn.Conn().PgConn()
	if pc.IsClosed() {
		return true
	}
	// 'I' after the batch: COMMIT ran (a callback's error came after the
	// server's success).
	return pc.TxStatus() == 'I'
}

// later queues a statement whose result nobody reads.
func (p *pipe) later(sql string, args ...any) *pgx.QueuedQuery {
	return p.b.Queue(sql, args...)
}

// flush sends what waits, in one round trip, and runs the queued
// statements' callbacks.
func (p *pipe) flush(ctx context.Context) error {
	if p.b.Len() == 0 {
		return nil
	}
	b := p.b
	p.b = &pgx.Batch{}
	return p.conn.SendBatch(ctx, b).Close()
}

// Exec implements querier: what waits and sql, in one round trip.
func (p *pipe) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	p.later(sql, args...).Exec(func(ct pgconn.CommandTag) error {
		tag = ct
		return nil
	})
	err := p.flush(ctx) // sets tag: Go does not order reading tag against this call in one return
	return tag, err
}

// QueryRow implements querier: what waits and sql, in one round trip
// once Scan is called.
func (p *pipe) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return pipeRow{ctx: ctx, p: p, sql: sql, args: args}
}

// Query implements querier: what waits goes first (a round trip of its
// own when something does).
func (p *pipe) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := p.flush(ctx); err != nil {
		return nil, err
	}
	return p.conn.Query(ctx, sql, args...)
}

// pipeRow is a pipe's QueryRow, sent with what waits when scanned.
type pipeRow struct {
	ctx  context.Context
	p    *pipe
	sql  string
	args []any
}

func (r pipeRow) Scan(dest ...any) error {
	var none error
	r.p.later(r.sql, r.args...).QueryRow(func(row pgx.Row) error {
		err := row.Scan(dest...)
		if errors.Is(err, pgx.ErrNoRows) {
			none = err // no failure of the batch (pgx would forget its prepared statements)
			return nil
		}
		return err
	})
	if err := r.p.flush(r.ctx); err != nil {
		return err
	}
	return none
}

// execLater runs a statement whose result nobody reads: queued on a
// pipe, at once on another querier.
func execLater(ctx context.Context, q querier, sql string, args ...any) error {
	if p, ok := q.(*pipe); ok {
		p.later(sql, args...)
		return nil
	}
	_, err := q.Exec(ctx, sql, args...)
	return err
}

// The locking of a settings row $1 (lockSettingsLater, lockedSetting):
// made with value $2 when it is not there yet, then read FOR UPDATE.
const (
	settingMakeSQL = `INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`
	settingLockSQL = `SELECT value FROM settings WHERE key = $1 FOR UPDATE`
)

// lockSettingsLater queues the locking (FOR UPDATE) of settings rows
// keys, each made with value initial when it is not there yet, and
// their reading into p.rows (see lockedSetting).
func lockSettingsLater(p *pipe, keys []string, initial string) {
	for _, k := range keys {
		p.later(settingMakeSQL, k, []byte(initial))
		p.later(settingLockSQL, k).QueryRow(func(row pgx.Row) error {
			var raw []byte
			if err := row.Scan(&raw); err != nil {
				return fmt.Errorf("lock setting %s: %w", k, err)
			}
			if p.rows == nil {
				p.rows = map[string][]byte{}
			}
			p.rows[k] = raw
			return nil
		})
	}
}

// lockedSetting returns settings row k, locked FOR UPDATE in q's
// transaction: as read by lockSettingsLater, or made (with value
// initial) and read now.
func lockedSetting(ctx context.Context, q querier, k, initial string) ([]byte, error) {
	if p, ok := q.(*pipe); ok {
		if raw, ok := p.rows[k]; ok {
			return raw, nil
		}
	}
	if _, err := q.Exec(ctx, settingMakeSQL, k, []byte(initial)); err != nil {
		return nil, err
	}
	var raw []byte
	if err := q.QueryRow(ctx, settingLockSQL, k).Scan(&raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// A guard is a statement that fails (division by zero, 22012) when a
// condition the transaction depends on does not hold, so that the
// statements after it in the same round trip, COMMIT included, are not
// run: the server ends the transaction at the first error. Its callback
// turns the failure into the error it stands for.
const (
	// fenceGuardSQL: lease $1 is at epoch $2 (its row locked FOR SHARE).
	fenceGuardSQL = `SELECT 1 / count(*) FROM (SELECT FROM leases WHERE thread_key = $1 AND epoch = $2 FOR SHARE) l`
	// cancelsGuardSQL: no cancel of conversation $1 after $2.
	cancelsGuardSQL = `SELECT 1 / (coalesce(max(id), 0) <= $2)::int FROM cancels WHERE thread_key = $1`
	// keyGuardSQL: data key $1 is there (locked FOR SHARE, as current
	// locks a key it seals with).
	keyGuardSQL = `SELECT 1 / count(*) FROM (SELECT FROM data_keys WHERE id = $1 FOR SHARE) k`
)

// errKeyGone is a keyGuard's failure: a key kept in keyring.sealing was
// destroyed since.
var errKeyGone = errors.New("a data key kept to seal with was destroyed")

// guardLater queues guard sql; its failure is failed().
func (p *pipe) guardLater(failed func() error, sql string, args ...any) {
	p.later(sql, args...).QueryRow(func(row pgx.Row) error {
		var one int64
		err := row.Scan(&one)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "22012" {
			return failed()
		}
		return err
	})
}
