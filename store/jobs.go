package store

import (
	"bytes"
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/bot"
)

// putJob stores a job in arrival order, once per job id.
func (s *Store) putJob(tx *bolt.Tx, j bot.Job) error {
	b := tx.Bucket(bucketJobs)
	ids := tx.Bucket(bucketJobIDs)
	if ids.Get([]byte(j.ID)) != nil {
		return nil
	}
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	if err := s.putSealed(tx, b, u64(seq), j.ThreadKey, j); err != nil {
		return err
	}
	return ids.Put([]byte(j.ID), u64(seq))
}

// DeleteJob implements bot.Store.
func (s *Store) DeleteJob(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// A job is most often retired already, with the run it started (see
	// bot.Change.DeleteJob): a read finds it gone, and no write
	// transaction (and fsync) is spent on nothing. Job ids are never
	// reused, so a job found gone stays gone.
	var stored bool
	err := s.db.View(func(tx *bolt.Tx) error {
		stored = tx.Bucket(bucketJobIDs).Get([]byte(id)) != nil
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: find job %s: %w", id, err)
	}
	if !stored {
		return nil
	}
	err = s.update(ctx, func(tx *bolt.Tx) error { return deleteJob(tx, id) })
	if err != nil {
		return fmt.Errorf("store: delete job %s: %w", id, err)
	}
	return nil
}

func deleteJob(tx *bolt.Tx, id string) error {
	ids := tx.Bucket(bucketJobIDs)
	seq := ids.Get([]byte(id))
	if seq == nil {
		return nil
	}
	if err := tx.Bucket(bucketJobs).Delete(bytes.Clone(seq)); err != nil {
		return err
	}
	return ids.Delete([]byte(id))
}

// Jobs implements bot.Store.
func (s *Store) Jobs(ctx context.Context) ([]bot.Job, error) {
	out, err := listSealed[bot.Job](ctx, s, bucketJobs)
	if err != nil {
		return nil, fmt.Errorf("store: list jobs: %w", err)
	}
	return out, nil
}

// putOutbound queues a message, once per id.
func (s *Store) putOutbound(tx *bolt.Tx, ob bot.Outbound) error {
	b := tx.Bucket(bucketOutbox)
	ids := tx.Bucket(bucketOutIDs)
	if ids.Get([]byte(ob.ID)) != nil {
		return nil
	}
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	if err := s.putSealed(tx, b, u64(seq), scopeOutbox, ob); err != nil {
		return err
	}
	return ids.Put([]byte(ob.ID), u64(seq))
}

// Outbox implements bot.Store.
func (s *Store) Outbox(ctx context.Context) ([]bot.Outbound, error) {
	out, err := listSealed[bot.Outbound](ctx, s, bucketOutbox)
	if err != nil {
		return nil, fmt.Errorf("store: outbox: %w", err)
	}
	return out, nil
}

// listSealed decodes every sealed value of a bucket, in key order.
func listSealed[T any](ctx context.Context, s *Store, bucket []byte) ([]T, error) {
	var out []T
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(_, v []byte) error {
			var x T
			if err := s.decodeSealed(tx, v, &x); err != nil {
				return err
			}
			out = append(out, x)
			return nil
		})
	})
	return out, err
}

// Delivered implements bot.Store, in one transaction.
func (s *Store) Delivered(ctx context.Context, ob bot.Outbound, msgID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// At once, not with a later write: until this commits, a crash posts
	// the message again at the next start.
	err := s.updateNow(ctx, func(tx *bolt.Tx) error {
		ids := tx.Bucket(bucketOutIDs)
		if seq := ids.Get([]byte(ob.ID)); seq != nil {
			if err := tx.Bucket(bucketOutbox).Delete(bytes.Clone(seq)); err != nil {
				return err
			}
			if err := ids.Delete([]byte(ob.ID)); err != nil {
				return err
			}
		}
		if ob.RunID != "" && ob.WaitKey == "" {
			// An answer: its run's preview record goes with it.
			return tx.Bucket(bucketSettings).Delete([]byte(bot.StreamKey(ob.RunID)))
		}
		if ob.RunID == "" || ob.WaitKey == "" || msgID == "" {
			return nil
		}
		raw := tx.Bucket(bucketRuns).Get([]byte(ob.RunID))
		if raw == nil {
			return nil
		}
		var r bot.Run
		if err := s.decodeSealed(tx, raw, &r); err != nil {
			return err
		}
		if r.Status != bot.RunWaiting || r.Waiting == nil || r.Waiting.Key != ob.WaitKey {
			return nil // answered (or dropped) already
		}
		r.Waiting.MessageID = msgID
		return s.saveRun(tx, &r)
	})
	if err != nil {
		return fmt.Errorf("store: delivered %s: %w", ob.ID, err)
	}
	return nil
}
