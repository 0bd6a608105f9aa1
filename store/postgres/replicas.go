package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.Shared = (*Store)(nil)

// jobsChannel is the NOTIFY channel a commit that stores a job signals,
// with the schema as its payload (databases kept in several schemas of
// one server, as in tests, share the channel).
const jobsChannel = "tidybot_jobs"

// cancelChannel carries /cancel to the replica running the run: the
// schema, a newline and the conversation's key.
const cancelChannel = "tidybot_cancel"

// leases is this process's connection for session advisory locks: the
// lease of each conversation it works on, and its replica lock, which
// says it is alive (so that another replica leaves its outbox entries
// alone). Locks of a session end with it: a process that dies frees
// them at once (its socket closes), and so does a lost connection.
type leases struct {
	// mu protects the fields below; a connection runs one query at a time.
	mu   sync.Mutex
	conn *pgx.Conn
}

func newReplicaID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// leaseConn returns the lease connection, made at the first call (a
// store that never leases, as tidybot runs, holds none), with this
// process's replica lock taken. A connection that was lost (its leases
// with it) is made again. mu must be held.
//
// Its queries run on a context that the caller's end does not cancel:
// pgx closes a connection whose query is cancelled, which would drop
// every lease.
func (s *Store) leaseConn(ctx context.Context) (*pgx.Conn, error) {
	if c := s.leases.conn; c != nil && !c.IsClosed() {
		return c, nil
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: lease connection: %w", err)
	}
	conn := c.Hijack()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext('tidybot replica ' || current_schema()), hashtext($1))`, s.replica); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("store: replica lock: %w", err)
	}
	s.leases.conn = conn
	return conn, nil
}

// Hold implements bot.Shared: a session advisory lock on the
// conversation, on the lease connection.
func (s *Store) Hold(ctx context.Context, key string) (bool, error) {
	var ok bool
	err := s.onLease(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext('tidybot thread ' || current_schema()), hashtext($1))`, key).Scan(&ok); err != nil {
			return fmt.Errorf("store: hold %s: %w", key, err)
		}
		return nil
	})
	return ok, err
}

// onLease runs fn on the lease connection, made if need be, holding its
// mutex. fn's context is not cancelled with the caller's (pgx closes a
// connection whose query is cancelled, dropping every lease) but times
// out after 10 seconds.
func (s *Store) onLease(ctx context.Context, fn func(ctx context.Context, conn *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	conn, err := s.leaseConn(ctx)
	if err != nil {
		return err
	}
	return fn(ctx, conn)
}

// Release implements bot.Shared.
func (s *Store) Release(ctx context.Context, key string) error {
	return s.onLease(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtext('tidybot thread ' || current_schema()), hashtext($1))`, key); err != nil {
			return fmt.Errorf("store: release %s: %w", key, err)
		}
		return nil
	})
}

// Pending implements bot.Shared: conversations with an unfinished run
// (left by a process that died) first, then by their oldest job.
func (s *Store) Pending(ctx context.Context, platforms []string, n int) ([]string, error) {
	prefixes := make([]string, len(platforms))
	for i, p := range platforms {
		prefixes[i] = p + ":%"
	}
	rows, err := s.pool.Query(ctx, `SELECT thread_key FROM (
			SELECT thread_key, 0 AS pass, min(created) AS at FROM runs WHERE status IN ('working', 'queued') GROUP BY thread_key
			UNION ALL
			SELECT thread_key, 1, min(seq) FROM jobs GROUP BY thread_key
		) w WHERE thread_key LIKE ANY($1)
		GROUP BY thread_key ORDER BY min(pass), min(at) LIMIT $2`, prefixes, n)
	if err != nil {
		return nil, fmt.Errorf("store: pending conversations: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: pending conversations: %w", err)
	}
	return keys, nil
}

// Work implements bot.Shared.
func (s *Store) Work(ctx context.Context, key string) ([]*bot.Run, []bot.Job, error) {
	runs, err := s.runs(ctx, `SELECT value FROM runs WHERE thread_key = $1 AND status IN ('working', 'queued') ORDER BY created, id`, key)
	if err != nil {
		return nil, nil, fmt.Errorf("store: unfinished runs of %s: %w", key, err)
	}
	jobs, err := decodeAll[bot.Job](ctx, s, `SELECT value FROM jobs WHERE thread_key = $1 ORDER BY seq`, key)
	if err != nil {
		return nil, nil, fmt.Errorf("store: jobs of %s: %w", key, err)
	}
	return runs, jobs, nil
}

// Listen implements bot.Shared: LISTEN on a connection of its own,
// until ctx ends (nil) or the connection fails.
func (s *Store) Listen(ctx context.Context, wake func(), cancel func(key string)) error {
	err := s.listen(ctx, wake, cancel)
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("store: listen: %w", err)
}

func (s *Store) listen(ctx context.Context, wake func(), cancel func(key string)) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := c.Hijack() // never back to the pool in the LISTEN state
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+jobsChannel+"; LISTEN "+cancelChannel); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		switch n.Channel {
		case jobsChannel:
			if n.Payload == schema {
				wake()
			}
		case cancelChannel:
			if key, ok := strings.CutPrefix(n.Payload, schema+"\n"); ok {
				cancel(key)
			}
		}
	}
}

// Cancel implements bot.Shared.
func (s *Store) Cancel(ctx context.Context, key string) error {
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, current_schema() || E'\n' || $2)`, cancelChannel, key); err != nil {
		return fmt.Errorf("store: cancel %s: %w", key, err)
	}
	return nil
}

// notifyJob signals the jobs channel at the commit of q's transaction.
func notifyJob(ctx context.Context, q querier) error {
	_, err := q.Exec(ctx, `SELECT pg_notify($1, current_schema())`, jobsChannel)
	return err
}

// ClaimOutbox implements bot.Shared: an entry's owner is dead when its
// replica lock is free; its entries become this process's in one
// UPDATE, which two replicas claiming together cannot both make.
func (s *Store) ClaimOutbox(ctx context.Context, platforms []string) ([]bot.Outbound, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT owner FROM outbox WHERE owner IS NOT NULL AND owner <> $1`, s.replica)
	if err != nil {
		return nil, fmt.Errorf("store: outbox owners: %w", err)
	}
	owners, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: outbox owners: %w", err)
	}
	var out []bot.Outbound
	claim := func(owner *string) error {
		got, err := s.claimFrom(ctx, owner, platforms)
		out = append(out, got...)
		return err
	}
	if err := claim(nil); err != nil {
		return nil, err
	}
	for _, o := range owners {
		if _, err := s.lockDead(ctx, o, func() error { return claim(&o) }); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// lockDead runs fn while holding owner's replica lock, if it is free
// (its process is gone), and reports whether it was.
func (s *Store) lockDead(ctx context.Context, owner string, fn func() error) (bool, error) {
	var free bool
	err := s.onLease(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext('tidybot replica ' || current_schema()), hashtext($1))`, owner).Scan(&free); err != nil {
			return fmt.Errorf("store: replica lock of %s: %w", owner, err)
		}
		if !free {
			return nil
		}
		ferr := fn()
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtext('tidybot replica ' || current_schema()), hashtext($1))`, owner); err != nil && ferr == nil {
			ferr = fmt.Errorf("store: replica unlock of %s: %w", owner, err)
		}
		return ferr
	})
	return free, err
}

// claimFrom makes the entries of owner (nil: of none) on platforms
// this process's and returns them.
func (s *Store) claimFrom(ctx context.Context, owner *string, platforms []string) ([]bot.Outbound, error) {
	out, err := decodeAll[bot.Outbound](ctx, s, `UPDATE outbox SET owner = $1
		WHERE owner IS NOT DISTINCT FROM $2::text AND (platform IS NULL OR platform = ANY($3))
		RETURNING value`, s.replica, owner, platforms)
	if err != nil {
		return nil, fmt.Errorf("store: claim outbox: %w", err)
	}
	return out, nil
}

// closeLeases ends the lease connection, freeing every lease and the
// replica lock.
func (s *Store) closeLeases() error {
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	if s.leases.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.leases.conn.Close(ctx)
	s.leases.conn = nil
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("store: close lease connection: %w", err)
	}
	return nil
}
