package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.TimerStore = (*Store)(nil)

// SetTimer implements bot.TimerStore.
func (s *Store) SetTimer(ctx context.Context, t bot.Timer) error {
	if t.Kind == "" || t.Key == "" || t.Due.Before(time.Unix(0, 0)) {
		return fmt.Errorf("store: set timer: a kind, a key and a due time are required")
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO timers (kind, key, due, data) VALUES ($1, $2, $3, $4)
		ON CONFLICT (kind, key) DO UPDATE SET due = excluded.due, data = excluded.data, claim = '', lease_until = 0`,
		t.Kind, t.Key, t.Due.UnixNano(), t.Data)
	if err != nil {
		return fmt.Errorf("store: set timer %s %s: %w", t.Kind, t.Key, err)
	}
	return nil
}

// Timer implements bot.TimerStore.
func (s *Store) Timer(ctx context.Context, kind, key string) (bot.Timer, error) {
	t := bot.Timer{Kind: kind, Key: key}
	var due int64
	err := s.pool.QueryRow(ctx, `SELECT due, data, claim FROM timers WHERE kind = $1 AND key = $2`, kind, key).Scan(&due, &t.Data, &t.Claim)
	if errors.Is(err, pgx.ErrNoRows) {
		err = bot.ErrNotFound
	}
	if err != nil {
		return bot.Timer{}, fmt.Errorf("store: timer %s %s: %w", kind, key, err)
	}
	t.Due = time.Unix(0, due).UTC()
	return t, nil
}

// DeleteTimer implements bot.TimerStore.
func (s *Store) DeleteTimer(ctx context.Context, kind, key string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM timers WHERE kind = $1 AND key = $2`, kind, key); err != nil {
		return fmt.Errorf("store: delete timer %s %s: %w", kind, key, err)
	}
	return nil
}

// dbNow is the database's clock in unix nanoseconds: leases are
// measured on it, so that no replica's clock decides whether another's
// claim has lapsed.
const dbNow = `(extract(epoch FROM clock_timestamp()) * 1e9)::bigint`

// ClaimTimers implements bot.TimerStore: replicas claiming at once skip
// each other's locked rows, so each due timer goes to one of them. Due
// times are the caller's (now); the lease is on the database's clock.
func (s *Store) ClaimTimers(ctx context.Context, now time.Time, kinds []string, claim string, lease time.Duration, n int) ([]bot.Timer, error) {
	rows, err := s.pool.Query(ctx, `UPDATE timers t SET claim = $1, lease_until = `+dbNow+` + $2
		FROM (SELECT kind, key FROM timers WHERE kind = ANY($3) AND due <= $4 AND lease_until <= `+dbNow+`
			ORDER BY due LIMIT $5 FOR UPDATE SKIP LOCKED) d
		WHERE t.kind = d.kind AND t.key = d.key
		RETURNING t.kind, t.key, t.due, t.data`,
		claim, lease.Nanoseconds(), kinds, now.UnixNano(), n)
	if err != nil {
		return nil, fmt.Errorf("store: claim timers: %w", err)
	}
	var out []bot.Timer
	for rows.Next() {
		t := bot.Timer{Claim: claim}
		var due int64
		if err := rows.Scan(&t.Kind, &t.Key, &due, &t.Data); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: claim timers: %w", err)
		}
		t.Due = time.Unix(0, due).UTC()
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: claim timers: %w", err)
	}
	// UPDATE … RETURNING gives no order.
	slices.SortStableFunc(out, func(a, b bot.Timer) int { return a.Due.Compare(b.Due) })
	return out, nil
}

// ExtendTimer implements bot.TimerStore, on the database's clock (now
// is not used).
func (s *Store) ExtendTimer(ctx context.Context, _ time.Time, t bot.Timer, lease time.Duration) (bool, error) {
	if t.Claim == "" {
		return false, nil
	}
	tag, err := s.pool.Exec(ctx, `UPDATE timers SET lease_until = `+dbNow+` + $4 WHERE kind = $1 AND key = $2 AND claim = $3`,
		t.Kind, t.Key, t.Claim, lease.Nanoseconds())
	if err != nil {
		return false, fmt.Errorf("store: extend timer %s %s: %w", t.Kind, t.Key, err)
	}
	return tag.RowsAffected() == 1, nil
}

// FinishTimer implements bot.TimerStore.
func (s *Store) FinishTimer(ctx context.Context, t bot.Timer, next time.Time) error {
	if t.Claim == "" {
		return nil
	}
	var err error
	if next.IsZero() {
		_, err = s.pool.Exec(ctx, `DELETE FROM timers WHERE kind = $1 AND key = $2 AND claim = $3`, t.Kind, t.Key, t.Claim)
	} else {
		_, err = s.pool.Exec(ctx, `UPDATE timers SET due = $4, claim = '', lease_until = 0 WHERE kind = $1 AND key = $2 AND claim = $3`,
			t.Kind, t.Key, t.Claim, next.UnixNano())
	}
	if err != nil {
		return fmt.Errorf("store: finish timer %s %s: %w", t.Kind, t.Key, err)
	}
	return nil
}
