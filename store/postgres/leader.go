package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/bot"
)

// leadRetry is how often a replica that does not lead tries to, and how
// often the leader checks the connection that holds its lead: a new
// leader polls within about leadRetry of the old one's death.
const leadRetry = time.Second

// LeadPolling implements telegram.Leader with a session advisory lock,
// per schema and name, on a connection of its own: PostgreSQL releases
// it when that connection closes, so when the leader's process dies
// (its socket closes) another replica takes the lock within leadRetry.
// The leader checks its connection every leadRetry; when the check
// fails, lead ends (the lock may be gone with the connection). Each new
// leader takes a new epoch (poll_leads), which lead carries as a fence:
// a write made with a context carrying lead's values (SavePollOffset,
// the Commit of a polled update's intake) is refused with bot.ErrFenced, in its
// transaction, once another replica leads, even when this one has not
// noticed yet that its lock went with its connection.
func (s *Store) LeadPolling(ctx context.Context, name string) (context.Context, func(), error) {
	conn, err := s.leaderConn(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("store: lead %s: %w", name, err)
	}
	closeConn := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}
	for {
		var ok bool
		err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext('tidybot lead'), hashtext(current_schema() || ' ' || $1))`, name).Scan(&ok)
		if err != nil {
			closeConn()
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			return nil, nil, fmt.Errorf("store: lead %s: %w", name, err)
		}
		if ok {
			var epoch int64
			err = conn.QueryRow(ctx, `INSERT INTO poll_leads AS p (name, epoch) VALUES ($1, nextval('lease_epochs'))
				ON CONFLICT (name) DO UPDATE SET epoch = excluded.epoch RETURNING epoch`, name).Scan(&epoch)
			if err != nil {
				closeConn() // frees the lock
				return nil, nil, fmt.Errorf("store: lead %s: %w", name, err)
			}
			ctx = context.WithValue(ctx, pollFenceKey{}, pollFence{name: name, epoch: epoch})
			break
		}
		select {
		case <-ctx.Done():
			closeConn()
			return nil, nil, ctx.Err()
		case <-time.After(s.leadRetry()):
		}
	}
	lead, cancel := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		defer cancel()
		t := time.NewTicker(s.leadRetry())
		defer t.Stop()
		for {
			select {
			case <-lead.Done():
				return
			case <-t.C:
			}
			pctx, pcancel := context.WithTimeout(lead, 2*time.Second)
			err := conn.Ping(pctx)
			pcancel()
			if err != nil {
				return
			}
		}
	}()
	release := func() {
		cancel()
		<-watched
		closeConn() // releases the lock
	}
	return lead, release, nil
}

// leaderConn takes a connection out of the pool for a lead. PostgreSQL
// frees the lead's lock when it notices the connection is dead: at once
// when the replica's process dies (its socket closes), but when the
// network to the replica is cut, only once TCP keepalives go
// unanswered. The connection asks for them after 5 s of silence, every
// second, giving up after 3 (by default the server's system waits two
// hours), so another replica leads about 10 s after such a cut.
func (s *Store) leaderConn(ctx context.Context) (*pgx.Conn, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	conn := c.Hijack()
	if _, err := conn.Exec(ctx, `SELECT set_config('tcp_keepalives_idle', '5', false), set_config('tcp_keepalives_interval', '1', false), set_config('tcp_keepalives_count', '3', false)`); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
		return nil, err
	}
	return conn, nil
}

func (s *Store) leadRetry() time.Duration {
	if s.retry > 0 {
		return s.retry
	}
	return leadRetry
}

// pollOffset is a saved getUpdates offset, in meta.
type pollOffset struct {
	Offset int   `json:"offset"`
	Saved  int64 `json:"saved"` // unix nanoseconds
}

func pollOffsetKey(name string) string { return "poll_offset " + name }

// PollOffset implements telegram.Offsets.
func (s *Store) PollOffset(ctx context.Context, name string) (int, time.Time, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM meta WHERE key = $1`, pollOffsetKey(name)).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, time.Time{}, nil
	}
	var p pollOffset
	if err == nil {
		err = json.Unmarshal(raw, &p)
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("store: poll offset of %s: %w", name, err)
	}
	return p.Offset, time.Unix(0, p.Saved), nil
}

// SavePollOffset implements telegram.Offsets: a smaller offset than the
// one saved changes nothing, and one saved with the values of a lead
// that another replica has taken since is refused (bot.ErrFenced), so a
// leader that lost its lead without knowing cannot move the next one's.
func (s *Store) SavePollOffset(ctx context.Context, name string, offset int) error {
	raw, err := json.Marshal(pollOffset{Offset: offset, Saved: time.Now().UnixNano()})
	if err != nil {
		return err
	}
	err = s.pipeTx(ctx, func(p *pipe) error {
		pollGuardLater(ctx, p)
		_, err := p.Exec(ctx, `INSERT INTO meta (key, value) VALUES ($1, $2)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value
			WHERE (convert_from(meta.value, 'UTF8')::jsonb->>'offset')::bigint <= $3`, pollOffsetKey(name), raw, offset)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: save poll offset of %s: %w", name, err)
	}
	return nil
}

// pollFenceKey is the context key of a poll lead's fence.
type pollFenceKey struct{}

// pollFence is a poll lead as taken: the writes made with it are refused
// once another replica took the lead.
type pollFence struct {
	name  string
	epoch int64
}

// pollGuardSQL: poll lead $1 is at epoch $2, its row locked FOR SHARE,
// so that no replica takes the lead before the transaction ends (its
// epoch's update waits).
const pollGuardSQL = `SELECT 1 / count(*) FROM (SELECT FROM poll_leads WHERE name = $1 AND epoch = $2 FOR SHARE) l`

// pollGuardLater, when ctx carries a poll lead's fence, queues on p its
// guard: the statements after it run only while the lead is still at
// its epoch; else p's transaction fails with bot.ErrFenced.
func pollGuardLater(ctx context.Context, p *pipe) {
	f, ok := ctx.Value(pollFenceKey{}).(pollFence)
	if !ok {
		return
	}
	p.guardLater(func() error {
		return fmt.Errorf("%w: the polling lead of %s was taken by another replica (ours was epoch %d)", bot.ErrFenced, f.name, f.epoch)
	}, pollGuardSQL, f.name, f.epoch)
}
