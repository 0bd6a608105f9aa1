package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/seal"
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
// them at once (its socket closes), and so does a lost connection,
// which a check every leaseCheckEvery notices and reports on lost.
type leases struct {
	// lost receives a value (one for several) when the connection was
	// lost; see LeasesLost.
	lost chan struct{}

	// mu protects the fields below; a connection runs one query at a time.
	mu   sync.Mutex
	conn *pgx.Conn
	stop chan struct{} // closed when conn is dropped: its check ends
}

// leaseCheckEvery is how often the lease connection is checked;
// leaseCheckTimeout is how long a check may wait (a vanished server
// sends no error: the check times out).
const (
	leaseCheckEvery   = 2 * time.Second
	leaseCheckTimeout = 5 * time.Second
)

// leaseApp is the application_name of the lease connection, for whoever
// reads pg_stat_activity.
const leaseApp = "tidybot leases"

func newReplicaID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// leaseConn returns the lease connection, made at the first call (a
// store that never leases, as tidybot runs, holds none), with this
// process's replica lock taken. A connection that was lost is reported
// (LeasesLost) and made again. mu must be held.
//
// Its queries run on a context that the caller's end does not cancel:
// pgx closes a connection whose query is cancelled, which would drop
// every lease.
func (s *Store) leaseConn(ctx context.Context) (*pgx.Conn, error) {
	if c := s.leases.conn; c != nil {
		if !c.IsClosed() {
			return c, nil
		}
		s.dropLeases() // a query on it failed: its leases are gone
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: lease connection: %w", err)
	}
	conn := c.Hijack()
	if _, err := conn.Exec(ctx, `SELECT set_config('application_name', $2, false),
			pg_advisory_lock(hashtext('tidybot replica ' || current_schema()), hashtext($1))`, s.replica, leaseApp); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("store: replica lock: %w", err)
	}
	stop := make(chan struct{})
	s.leases.conn, s.leases.stop = conn, stop
	go s.watchLeases(conn, stop)
	return conn, nil
}

// dropLeases closes the lease connection after its loss, and reports
// the loss on lost. mu must be held.
func (s *Store) dropLeases() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.leases.conn.Close(ctx) // lost already: only the socket is left to close
	close(s.leases.stop)
	s.leases.conn, s.leases.stop = nil, nil
	select {
	case s.leases.lost <- struct{}{}:
	default: // a loss not yet read covers this one
	}
}

// watchLeases checks conn every leaseCheckEvery until it is dropped
// (stop), dropping it when the check fails.
func (s *Store) watchLeases(conn *pgx.Conn, stop <-chan struct{}) {
	t := time.NewTicker(leaseCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.checkLeases(conn)
	}
}

// checkLeases pings conn, if it is still the lease connection, and drops
// it when the ping fails.
func (s *Store) checkLeases(conn *pgx.Conn) {
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	if s.leases.conn != conn {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseCheckTimeout)
	defer cancel()
	if err := conn.Ping(ctx); err != nil {
		s.dropLeases()
	}
}

// LeasesLost implements bot.Shared: a value comes after the lease
// connection was lost, found by the check every leaseCheckEvery or by a
// failed lease query.
func (s *Store) LeasesLost() <-chan struct{} {
	return s.leases.lost
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
	jobs, err := s.threadJobs(ctx, key)
	if err != nil {
		return nil, nil, fmt.Errorf("store: jobs of %s: %w", key, err)
	}
	return runs, jobs, nil
}

// threadJobs returns the jobs of conversation key in order, each
// decoded on its own. A job whose data key was destroyed can never be
// read (a destroy seals again what its keys seal, under lockKeys, so
// only a database written by an older tidybot holds one): it is deleted
// and logged, so that the jobs after it are answered.
func (s *Store) threadJobs(ctx context.Context, key string) ([]bot.Job, error) {
	var out []bot.Job
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = nil // a transaction tried again starts over
		rows, err := tx.Query(ctx, `SELECT id, value FROM jobs WHERE thread_key = $1 ORDER BY seq`, key)
		if err != nil {
			return err
		}
		type rec struct {
			ID  string
			Raw []byte
		}
		recs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rec])
		if err != nil {
			return err
		}
		for _, r := range recs {
			var j bot.Job
			err := s.decode(ctx, tx, r.Raw, &j)
			if errors.Is(err, seal.ErrKeyGone) {
				s.log.Error("job unreadable: its data key was destroyed; dropped", slog.String("thread_key", key), slog.String("job_id", r.ID))
				if _, err := tx.Exec(ctx, `DELETE FROM jobs WHERE id = $1`, r.ID); err != nil {
					return fmt.Errorf("drop job %s: %w", r.ID, err)
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("job %s: %w", r.ID, err)
			}
			out = append(out, j)
		}
		return nil
	})
	return out, err
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
	close(s.leases.stop)
	s.leases.conn, s.leases.stop = nil, nil
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("store: close lease connection: %w", err)
	}
	return nil
}
