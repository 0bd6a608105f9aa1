package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/bot"
)

// Commit implements bot.Store: every part of c in one transaction.
func (s *Store) Commit(ctx context.Context, c bot.Change) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var dup bool
	err := s.update(ctx, func(tx *bolt.Tx) error {
		if c.EventKey != "" {
			fresh, err := markEvent(tx, c.EventKey, c.EventAt)
			if err != nil {
				return err
			}
			// A duplicate writes nothing and lets the transaction it
			// shares commit; Commit reports it afterwards.
			if dup = !fresh; dup {
				return nil
			}
		}
		if t := c.Thread; t != nil {
			threads := tx.Bucket(bucketThreads)
			if threads.Get([]byte(t.Key)) == nil {
				if err := put(threads, []byte(t.Key), t); err != nil {
					return err
				}
			}
		}
		if c.Message != nil {
			if err := s.appendMessage(tx, *c.Message); err != nil {
				return err
			}
		}
		if c.Job != nil {
			if err := s.putJob(tx, *c.Job); err != nil {
				return err
			}
		}
		if c.DeleteJob != "" {
			if err := deleteJob(tx, c.DeleteJob); err != nil {
				return err
			}
		}
		if c.Run != nil {
			if err := s.saveRun(tx, c.Run); err != nil {
				return err
			}
		}
		for _, ob := range c.Send {
			if err := s.putOutbound(tx, ob); err != nil {
				return err
			}
		}
		if err := s.appendAudit(tx, c.Audit); err != nil {
			return err
		}
		if err := addCounts(tx, c.Count); err != nil {
			return err
		}
		return setFields(tx, c.Fields)
	})
	if err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	if dup {
		return bot.ErrDuplicate
	}
	return nil
}

// addCounts adds to numeric settings (see bot.Change.Count); an absent
// or unreadable one counts from 0.
func addCounts(tx *bolt.Tx, counts map[string]int) error {
	b := tx.Bucket(bucketSettings)
	for k, n := range counts {
		var v string
		if raw := b.Get([]byte(k)); raw != nil {
			// A count that cannot be read starts again: it must not
			// fail the run's end it is committed with.
			_ = decode(raw, &v)
		}
		have, _ := strconv.Atoi(v)
		if err := put(b, []byte(k), strconv.Itoa(have+n)); err != nil {
			return err
		}
	}
	return nil
}

// setFields sets fields of settings holding a JSON object (see
// bot.Change.Fields).
func setFields(tx *bolt.Tx, fields map[string]map[string]json.RawMessage) error {
	b := tx.Bucket(bucketSettings)
	for k, f := range fields {
		var old string
		if raw := b.Get([]byte(k)); raw != nil {
			// Unreadable, it is left as it is (bot.MergeFields).
			if err := decode(raw, &old); err != nil {
				continue
			}
		}
		v, changed, err := bot.MergeFields(old, f)
		if err != nil {
			return err
		}
		if changed {
			if err := put(b, []byte(k), v); err != nil {
				return err
			}
		}
	}
	return nil
}

// MarkEvent implements bot.Store.
func (s *Store) MarkEvent(ctx context.Context, key string, at time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	var fresh bool
	err := s.update(ctx, func(tx *bolt.Tx) error {
		var err error
		fresh, err = markEvent(tx, key, at)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("store: mark event %s: %w", key, err)
	}
	return fresh, nil
}

// markEvent records an event key and reports whether it is new. A key
// recorded before is a result, not an error: an error would roll back
// the writes that share the transaction (Slack's retries come in floods).
func markEvent(tx *bolt.Tx, key string, at time.Time) (fresh bool, err error) {
	b := tx.Bucket(bucketEvents)
	if b.Get([]byte(key)) != nil {
		return false, nil
	}
	return true, b.Put([]byte(key), u64(uint64(at.UnixNano())))
}
