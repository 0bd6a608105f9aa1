package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// LeadPolling implements telegram.Leader: one process opens the file,
// so it always leads; the lead ends with ctx.
func (s *Store) LeadPolling(ctx context.Context, _ string) (context.Context, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	lead, cancel := context.WithCancel(ctx)
	return lead, cancel, nil
}

// pollOffset is a saved getUpdates offset, in the meta bucket.
type pollOffset struct {
	Offset int   `json:"offset"`
	Saved  int64 `json:"saved"` // unix nanoseconds
}

func pollOffsetKey(name string) []byte { return []byte("poll_offset " + name) }

// PollOffset implements telegram.Offsets.
func (s *Store) PollOffset(ctx context.Context, name string) (int, time.Time, error) {
	var p pollOffset
	err := s.view(ctx, func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketMeta).Get(pollOffsetKey(name))
		if raw == nil {
			return nil
		}
		return json.Unmarshal(raw, &p)
	})
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("store: poll offset of %s: %w", name, err)
	}
	if p.Saved == 0 {
		return p.Offset, time.Time{}, nil
	}
	return p.Offset, time.Unix(0, p.Saved), nil
}

// SavePollOffset implements telegram.Offsets: a smaller offset than the
// one saved changes nothing.
func (s *Store) SavePollOffset(ctx context.Context, name string, offset int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMeta)
		var p pollOffset
		if raw := b.Get(pollOffsetKey(name)); raw != nil {
			if err := json.Unmarshal(raw, &p); err != nil {
				return err
			}
		}
		if offset < p.Offset {
			return nil
		}
		raw, err := json.Marshal(pollOffset{Offset: offset, Saved: time.Now().UnixNano()})
		if err != nil {
			return err
		}
		return b.Put(pollOffsetKey(name), raw)
	})
	if err != nil {
		return fmt.Errorf("store: save poll offset of %s: %w", name, err)
	}
	return nil
}
