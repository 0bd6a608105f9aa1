package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
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

// dueKey is a timer's key in bucketTimersDue: its due time (big-endian
// unix nanoseconds, so the bucket is in due order) then its key.
func dueKey(t bot.Timer) []byte {
	return append(u64(uint64(t.Due.UnixNano())), timerKey(t.Kind, t.Key)...)
}

// getTimer reads a timer's record; nil when there is none.
func getTimer(tx *bolt.Tx, k []byte) (*timerRecord, error) {
	raw := tx.Bucket(bucketTimers).Get(k)
	if raw == nil {
		return nil, nil
	}
	var rec timerRecord
	if err := decode(raw, &rec); err != nil {
		return nil, fmt.Errorf("timer %q: %w", k, err)
	}
	return &rec, nil
}

// putTimer stores rec in place of old (nil: none) and keeps the due
// index.
func putTimer(tx *bolt.Tx, old, rec *timerRecord) error {
	if old != nil && !old.Due.Equal(rec.Due) {
		if err := tx.Bucket(bucketTimersDue).Delete(dueKey(old.Timer)); err != nil {
			return err
		}
	}
	if err := tx.Bucket(bucketTimersDue).Put(dueKey(rec.Timer), nil); err != nil {
		return err
	}
	return put(tx.Bucket(bucketTimers), timerKey(rec.Kind, rec.Key), rec)
}

// deleteTimer deletes old and its index entry.
func deleteTimer(tx *bolt.Tx, old *timerRecord) error {
	if err := tx.Bucket(bucketTimersDue).Delete(dueKey(old.Timer)); err != nil {
		return err
	}
	return tx.Bucket(bucketTimers).Delete(timerKey(old.Kind, old.Key))
}

// SetTimer implements bot.TimerStore.
func (s *Store) SetTimer(ctx context.Context, t bot.Timer) error {
	if t.Kind == "" || t.Key == "" || t.Due.Before(time.Unix(0, 0)) {
		return fmt.Errorf("store: set timer: a kind, a key and a due time are required")
	}
	t.Claim = ""
	err := s.update(ctx, func(tx *bolt.Tx) error {
		old, err := getTimer(tx, timerKey(t.Kind, t.Key))
		if err != nil {
			return err
		}
		return putTimer(tx, old, &timerRecord{Timer: t})
	})
	if err != nil {
		return fmt.Errorf("store: set timer %s %s: %w", t.Kind, t.Key, err)
	}
	return nil
}

// Timer implements bot.TimerStore.
func (s *Store) Timer(ctx context.Context, kind, key string) (bot.Timer, error) {
	var rec *timerRecord
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		if rec, err = getTimer(tx, timerKey(kind, key)); err == nil && rec == nil {
			err = bot.ErrNotFound
		}
		return err
	})
	if err != nil {
		return bot.Timer{}, fmt.Errorf("store: timer %s %s: %w", kind, key, err)
	}
	return rec.Timer, nil
}

// DeleteTimer implements bot.TimerStore.
func (s *Store) DeleteTimer(ctx context.Context, kind, key string) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		old, err := getTimer(tx, timerKey(kind, key))
		if err != nil || old == nil {
			return err
		}
		return deleteTimer(tx, old)
	})
	if err != nil {
		return fmt.Errorf("store: delete timer %s %s: %w", kind, key, err)
	}
	return nil
}

// claimable returns up to n timers due at now that may be claimed, in
// due order, reading the due index only as far as now.
func claimable(tx *bolt.Tx, now time.Time, kinds []string, n int) ([]timerRecord, error) {
	var out []timerRecord
	end := uint64(now.UnixNano())
	c := tx.Bucket(bucketTimersDue).Cursor()
	for k, _ := c.First(); k != nil && len(out) < n; k, _ = c.Next() {
		if len(k) < 8 || binary.BigEndian.Uint64(k[:8]) > end {
			break
		}
		kind, _, _ := bytes.Cut(k[8:], []byte{0})
		if !slices.Contains(kinds, string(kind)) {
			continue
		}
		rec, err := getTimer(tx, k[8:])
		if err != nil {
			return nil, err
		}
		if rec != nil && !rec.Due.After(now) && !rec.Lease.After(now) {
			out = append(out, *rec)
		}
	}
	return out, nil
}

// ClaimTimers implements bot.TimerStore. It looks in a read
// transaction first: the loop's pass when nothing is due (nearly every
// one) takes no write transaction.
func (s *Store) ClaimTimers(ctx context.Context, now time.Time, kinds []string, claim string, lease time.Duration, n int) ([]bot.Timer, error) {
	var any bool
	err := s.view(ctx, func(tx *bolt.Tx) error {
		due, err := claimable(tx, now, kinds, 1)
		any = len(due) > 0
		return err
	})
	if err != nil || !any {
		if err != nil {
			return nil, fmt.Errorf("store: claim timers: %w", err)
		}
		return nil, nil
	}
	var out []bot.Timer
	err = s.update(ctx, func(tx *bolt.Tx) error {
		out = out[:0] // a transaction run again starts again
		due, err := claimable(tx, now, kinds, n)
		if err != nil {
			return err
		}
		for _, rec := range due {
			old := rec
			rec.Claim, rec.Lease = claim, now.Add(lease)
			if err := putTimer(tx, &old, &rec); err != nil {
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

// ExtendTimer implements bot.TimerStore.
func (s *Store) ExtendTimer(ctx context.Context, now time.Time, t bot.Timer, lease time.Duration) (bool, error) {
	var held bool
	err := s.update(ctx, func(tx *bolt.Tx) error {
		old, err := getTimer(tx, timerKey(t.Kind, t.Key))
		held = err == nil && old != nil && t.Claim != "" && old.Claim == t.Claim
		if !held {
			return err
		}
		rec := *old
		rec.Lease = now.Add(lease)
		return putTimer(tx, old, &rec)
	})
	if err != nil {
		return false, fmt.Errorf("store: extend timer %s %s: %w", t.Kind, t.Key, err)
	}
	return held, nil
}

// FinishTimer implements bot.TimerStore.
func (s *Store) FinishTimer(ctx context.Context, t bot.Timer, next time.Time) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		old, err := getTimer(tx, timerKey(t.Kind, t.Key))
		if err != nil || old == nil || t.Claim == "" || old.Claim != t.Claim {
			return err
		}
		if next.IsZero() {
			return deleteTimer(tx, old)
		}
		rec := timerRecord{Timer: old.Timer}
		rec.Due, rec.Claim = next, ""
		return putTimer(tx, old, &rec)
	})
	if err != nil {
		return fmt.Errorf("store: finish timer %s %s: %w", t.Kind, t.Key, err)
	}
	return nil
}
