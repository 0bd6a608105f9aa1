package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.TimerStore = (*Store)(nil)

// timerRecord is a stored timer with its claim's lease.
type timerRecord struct {
	bot.Timer
	// Lease is when the claim lapses (zero: not claimed).
	Lease time.Time `json:"lease,omitzero"`
}

func timerKey(kind, key string) []byte { return []byte(kind + "\x00" + key) }

// SetTimer implements bot.TimerStore.
func (s *Store) SetTimer(ctx context.Context, t bot.Timer) error {
	if t.Kind == "" || t.Key == "" {
		return fmt.Errorf("store: set timer: kind and key are required")
	}
	t.Claim = ""
	err := s.update(ctx, func(tx *bolt.Tx) error {
		return put(tx.Bucket(bucketTimers), timerKey(t.Kind, t.Key), timerRecord{Timer: t})
	})
	if err != nil {
		return fmt.Errorf("store: set timer %s %s: %w", t.Kind, t.Key, err)
	}
	return nil
}

// Timer implements bot.TimerStore.
func (s *Store) Timer(ctx context.Context, kind, key string) (bot.Timer, error) {
	var rec timerRecord
	err := s.view(ctx, func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketTimers).Get(timerKey(kind, key))
		if raw == nil {
			return bot.ErrNotFound
		}
		return decode(raw, &rec)
	})
	if err != nil {
		return bot.Timer{}, fmt.Errorf("store: timer %s %s: %w", kind, key, err)
	}
	return rec.Timer, nil
}

// DeleteTimer implements bot.TimerStore.
func (s *Store) DeleteTimer(ctx context.Context, kind, key string) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTimers).Delete(timerKey(kind, key))
	})
	if err != nil {
		return fmt.Errorf("store: delete timer %s %s: %w", kind, key, err)
	}
	return nil
}

// ClaimTimers implements bot.TimerStore. It reads every timer of the
// kinds asked: there are a few per person.
func (s *Store) ClaimTimers(ctx context.Context, now time.Time, kinds []string, claim string, lease time.Duration, n int) ([]bot.Timer, error) {
	var out []bot.Timer
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out = out[:0] // a retried transaction starts again
		b := tx.Bucket(bucketTimers)
		var due []timerRecord
		err := b.ForEach(func(k, v []byte) error {
			kind, _, _ := bytes.Cut(k, []byte{0})
			if !slices.Contains(kinds, string(kind)) {
				return nil
			}
			var rec timerRecord
			if err := decode(v, &rec); err != nil {
				return fmt.Errorf("timer %q: %w", k, err)
			}
			if !rec.Due.After(now) && !rec.Lease.After(now) {
				due = append(due, rec)
			}
			return nil
		})
		if err != nil {
			return err
		}
		sort.SliceStable(due, func(i, j int) bool { return due[i].Due.Before(due[j].Due) })
		if len(due) > n {
			due = due[:n]
		}
		for _, rec := range due {
			rec.Claim, rec.Lease = claim, now.Add(lease)
			if err := put(b, timerKey(rec.Kind, rec.Key), rec); err != nil {
				return err
			}
			out = append(out, rec.Timer)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: claim timers: %w", err)
	}
	return out, nil
}

// FinishTimer implements bot.TimerStore.
func (s *Store) FinishTimer(ctx context.Context, t bot.Timer, next time.Time) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTimers)
		k := timerKey(t.Kind, t.Key)
		raw := b.Get(k)
		if raw == nil {
			return nil
		}
		var rec timerRecord
		if err := decode(raw, &rec); err != nil {
			return err
		}
		if t.Claim == "" || rec.Claim != t.Claim {
			return nil
		}
		if next.IsZero() {
			return b.Delete(k)
		}
		rec.Due, rec.Claim, rec.Lease = next, "", time.Time{}
		return put(b, k, rec)
	})
	if err != nil && !errors.Is(err, bot.ErrNotFound) {
		return fmt.Errorf("store: finish timer %s %s: %w", t.Kind, t.Key, err)
	}
	return nil
}
