package store

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/bot"
)

// Thread implements bot.Store.
func (s *Store) Thread(ctx context.Context, key string) (bot.Thread, error) {
	var t bot.Thread
	err := s.view(ctx, func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketThreads).Get([]byte(key))
		if raw == nil {
			return bot.ErrNotFound
		}
		return decode(raw, &t)
	})
	if err != nil {
		return t, fmt.Errorf("store: thread %s: %w", key, err)
	}
	return t, nil
}

// SaveThread implements bot.Store.
func (s *Store) SaveThread(ctx context.Context, t bot.Thread) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.update(ctx, func(tx *bolt.Tx) error { return put(tx.Bucket(bucketThreads), []byte(t.Key), t) })
	if err != nil {
		return fmt.Errorf("store: save thread %s: %w", t.Key, err)
	}
	return nil
}

func (s *Store) appendMessage(tx *bolt.Tx, m bot.Message) error {
	b, err := tx.Bucket(bucketMessages).CreateBucketIfNotExists([]byte(m.ThreadKey))
	if err != nil {
		return err
	}
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	return s.putSealed(tx, b, u64(seq), m.ThreadKey, m)
}

// messageRecord is a stored bot.Message as RecentMessages reads it:
// without its thread key, which is the name of the bucket it is in
// (appendMessage), so that each message's copy of it is not decoded.
type messageRecord struct {
	Role  string    `json:"role"`
	Text  string    `json:"text"`
	RunID string    `json:"run_id,omitempty"`
	At    time.Time `json:"at"`
}

// RecentMessages implements bot.Store: it walks the thread backwards and
// stops after n messages or at the first one before since.
func (s *Store) RecentMessages(ctx context.Context, threadKey string, since time.Time, n int) ([]bot.Message, error) {
	var out []bot.Message
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMessages).Bucket([]byte(threadKey))
		if b == nil {
			return nil
		}
		out = make([]bot.Message, 0, min(n, 64))
		var rec messageRecord // one for all: a run reads 16 messages
		c := b.Cursor()
		for k, v := c.Last(); k != nil && len(out) < n; k, v = c.Prev() {
			rec = messageRecord{}
			if err := s.decodeSealed(tx, v, &rec); err != nil {
				return err
			}
			if rec.At.Before(since) {
				break
			}
			out = append(out, bot.Message{ThreadKey: threadKey, Role: rec.Role, Text: rec.Text, RunID: rec.RunID, At: rec.At})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: messages of %s: %w", threadKey, err)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}
