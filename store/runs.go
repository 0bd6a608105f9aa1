package store

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/bot"
)

// SaveRun implements bot.Store; it keeps the run indexes (by thread, the
// runs not ended, the wait keys) in the same transaction.
func (s *Store) SaveRun(ctx context.Context, r *bot.Run) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.update(ctx, func(tx *bolt.Tx) error { return s.saveRun(tx, r) })
	if err != nil {
		return fmt.Errorf("store: save run %s: %w", r.ID, err)
	}
	return nil
}

// saveRun stores r: its record, its transcript (as given, apart in
// bucketTranscripts) and its index entries. A run without a transcript
// keeps the stored one: bot's lists return runs without theirs, and a
// run taken from one may be saved again.
func (s *Store) saveRun(tx *bolt.Tx, r *bot.Run) error {
	rec := *r
	rec.Transcript = nil
	id := []byte(r.ID)
	if len(r.Transcript) > 0 {
		tr, err := s.keys.seal(tx, r.ThreadKey, r.Transcript)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketTranscripts).Put(id, tr); err != nil {
			return err
		}
	}
	if err := s.putSealed(tx, tx.Bucket(bucketRuns), id, r.ThreadKey, &rec); err != nil {
		return err
	}
	return indexRun(tx, keysOf(r))
}

// runKeys is what the run indexes hold of a run.
type runKeys struct {
	id, threadKey string
	status        bot.RunStatus
	// waitKey is the Waiting.Key of a run that waits; "" otherwise.
	waitKey string
}

func keysOf(r *bot.Run) runKeys {
	k := runKeys{id: r.ID, threadKey: r.ThreadKey, status: r.Status}
	if r.Status == bot.RunWaiting && r.Waiting != nil {
		k.waitKey = r.Waiting.Key
	}
	return k
}

func indexRun(tx *bolt.Tx, k runKeys) error {
	id := []byte(k.id)
	tb, err := tx.Bucket(bucketThreadRn).CreateBucketIfNotExists([]byte(k.threadKey))
	if err != nil {
		return err
	}
	if err := tb.Put(id, nil); err != nil {
		return err
	}
	if err := indexWaitKey(tx, id, k.waitKey); err != nil {
		return err
	}
	open := tx.Bucket(bucketOpenRuns)
	to, err := tx.Bucket(bucketThreadOpen).CreateBucketIfNotExists([]byte(k.threadKey))
	if err != nil {
		return err
	}
	if k.status.Final() {
		if err := to.Delete(id); err != nil {
			return err
		}
		return open.Delete(id)
	}
	if err := to.Put(id, []byte(k.status)); err != nil {
		return err
	}
	return open.Put(id, []byte(k.status))
}

// indexWaitKey points key ("" for none) at run id, and drops the key
// the run waited on before. A key another run took since (keys are
// short and random) stays with that run.
func indexWaitKey(tx *bolt.Tx, id []byte, key string) error {
	byRun := tx.Bucket(bucketRunWaitKey)
	old := byRun.Get(id)
	if old == nil && key == "" {
		return nil // most saves: the run neither waits nor waited
	}
	byKey := tx.Bucket(bucketWaitKeys)
	if old != nil && string(old) != key {
		old = bytes.Clone(old)
		if bytes.Equal(byKey.Get(old), id) {
			if err := byKey.Delete(old); err != nil {
				return err
			}
		}
		if err := byRun.Delete(id); err != nil {
			return err
		}
	}
	if key == "" {
		return nil
	}
	if err := byKey.Put([]byte(key), id); err != nil {
		return err
	}
	return byRun.Put(id, []byte(key))
}

// WaitingRun implements bot.Store. It reads the records of the thread's
// runs not ended only (an index), not their transcripts, so its cost
// does not grow with the thread's history.
func (s *Store) WaitingRun(ctx context.Context, threadKey string) (*bot.Run, error) {
	var best *bot.Run
	err := s.view(ctx, func(tx *bolt.Tx) error {
		to := tx.Bucket(bucketThreadOpen).Bucket([]byte(threadKey))
		if to == nil {
			return nil
		}
		runs := tx.Bucket(bucketRuns)
		return to.ForEach(func(id, status []byte) error {
			if bot.RunStatus(status) != bot.RunWaiting {
				return nil
			}
			raw := runs.Get(id)
			if raw == nil {
				return nil
			}
			r, err := s.decodeRun(tx, raw)
			if err != nil {
				return err
			}
			if r.Status != bot.RunWaiting || r.Waiting == nil {
				return nil
			}
			if best == nil || r.Created.After(best.Created) || r.Created.Equal(best.Created) && r.ID > best.ID {
				best = r
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: waiting run of %s: %w", threadKey, err)
	}
	return best, nil
}

// WaitingRunByKey implements bot.Store, through the index of wait keys.
func (s *Store) WaitingRunByKey(ctx context.Context, key string) (*bot.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if key == "" {
		return nil, nil
	}
	var found *bot.Run
	err := s.db.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketWaitKeys).Get([]byte(key))
		if id == nil {
			return nil
		}
		raw := tx.Bucket(bucketRuns).Get(id)
		if raw == nil {
			return nil
		}
		r, err := s.decodeRun(tx, raw)
		if err != nil {
			return err
		}
		if r.Status == bot.RunWaiting && r.Waiting != nil && r.Waiting.Key == key {
			found = r
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: run waiting on %s: %w", key, err)
	}
	return found, nil
}

// Run implements bot.Store: the run with its transcript.
func (s *Store) Run(ctx context.Context, id string) (*bot.Run, error) {
	var r bot.Run
	err := s.view(ctx, func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketRuns).Get([]byte(id))
		if raw == nil {
			return bot.ErrNotFound
		}
		if err := s.decodeSealed(tx, raw, &r); err != nil {
			return err
		}
		if tr := tx.Bucket(bucketTranscripts).Get([]byte(id)); tr != nil {
			pt, err := s.keys.open(tx, tr)
			if err != nil {
				return fmt.Errorf("transcript: %w", err)
			}
			r.Transcript = bytes.Clone(pt)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: run %s: %w", id, err)
	}
	return &r, nil
}

// decodeRun decodes a run's record: the run without its transcript.
func (s *Store) decodeRun(tx *bolt.Tx, raw []byte) (*bot.Run, error) {
	var r bot.Run
	if err := s.decodeSealed(tx, raw, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// runs loads the runs that keep selects, oldest first. ids, when not nil,
// lists the candidates (from an index); otherwise every run is read.
func (s *Store) runs(ctx context.Context, ids func(tx *bolt.Tx) [][]byte, keep func(*bot.Run) bool) ([]*bot.Run, error) {
	var out []*bot.Run
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRuns)
		load := func(v []byte) error {
			r, err := s.decodeRun(tx, v)
			if err != nil {
				return err
			}
			if keep(r) {
				out = append(out, r)
			}
			return nil
		}
		if ids == nil {
			return b.ForEach(func(_, v []byte) error { return load(v) })
		}
		for _, id := range ids(tx) {
			if v := b.Get(id); v != nil {
				if err := load(v); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: list runs: %w", err)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Runs implements bot.Store. Runs that have not ended are found through
// their index; asking for ended ones (or all) reads every run's record
// (not its transcript).
func (s *Store) Runs(ctx context.Context, statuses ...bot.RunStatus) ([]*bot.Run, error) {
	var ids func(tx *bolt.Tx) [][]byte
	openOnly := len(statuses) > 0
	for _, st := range statuses {
		openOnly = openOnly && !st.Final()
	}
	if openOnly {
		ids = func(tx *bolt.Tx) [][]byte { return keys(tx.Bucket(bucketOpenRuns)) }
	}
	return s.runs(ctx, ids, func(r *bot.Run) bool {
		if len(statuses) == 0 {
			return true
		}
		for _, st := range statuses {
			if r.Status == st {
				return true
			}
		}
		return false
	})
}

// ThreadRuns implements bot.Store, through the thread's index; it reads
// no transcript.
func (s *Store) ThreadRuns(ctx context.Context, threadKey string) ([]*bot.Run, error) {
	ids := func(tx *bolt.Tx) [][]byte { return keys(tx.Bucket(bucketThreadRn).Bucket([]byte(threadKey))) }
	return s.runs(ctx, ids, func(r *bot.Run) bool { return r.ThreadKey == threadKey })
}

// deleteRun removes a run, its transcript, its index entries and its
// journal.
func deleteRun(tx *bolt.Tx, r *bot.Run) (audit int, err error) {
	if err := tx.Bucket(bucketRuns).Delete([]byte(r.ID)); err != nil {
		return 0, err
	}
	if err := tx.Bucket(bucketTranscripts).Delete([]byte(r.ID)); err != nil {
		return 0, err
	}
	if err := indexWaitKey(tx, []byte(r.ID), ""); err != nil {
		return 0, err
	}
	if tb := tx.Bucket(bucketThreadRn).Bucket([]byte(r.ThreadKey)); tb != nil {
		if err := tb.Delete([]byte(r.ID)); err != nil {
			return 0, err
		}
	}
	if err := tx.Bucket(bucketOpenRuns).Delete([]byte(r.ID)); err != nil {
		return 0, err
	}
	if to := tx.Bucket(bucketThreadOpen).Bucket([]byte(r.ThreadKey)); to != nil {
		if err := to.Delete([]byte(r.ID)); err != nil {
			return 0, err
		}
	}
	ab := tx.Bucket(bucketAudit)
	if b := ab.Bucket([]byte(r.ID)); b != nil {
		audit = b.Stats().KeyN
		if err := ab.DeleteBucket([]byte(r.ID)); err != nil {
			return 0, err
		}
	}
	return audit, nil
}

// busy reports whether a run is in progress (kept by Prune and
// DeleteConversation: a worker owns it).
func busy(r *bot.Run) bool { return r.Status == bot.RunWorking || r.Status == bot.RunQueued }

// appendAudit journals entries, each under its run.
func (s *Store) appendAudit(tx *bolt.Tx, entries []bot.AuditEntry) error {
	for _, e := range entries {
		b, err := tx.Bucket(bucketAudit).CreateBucketIfNotExists([]byte(e.RunID))
		if err != nil {
			return err
		}
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		if err := s.putSealed(tx, b, u64(seq), e.ThreadKey, e); err != nil {
			return err
		}
	}
	return nil
}

// RunAudit implements bot.Store.
func (s *Store) RunAudit(ctx context.Context, runID string) ([]bot.AuditEntry, error) {
	var out []bot.AuditEntry
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAudit).Bucket([]byte(runID))
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			var e bot.AuditEntry
			if err := s.decodeSealed(tx, v, &e); err != nil {
				return err
			}
			out = append(out, e)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: journal of %s: %w", runID, err)
	}
	return out, nil
}
