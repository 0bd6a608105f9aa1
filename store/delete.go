package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/bot"
)

// deleteBatch bounds the values one transaction of Prune or
// DeleteConversation deletes or seals again (a run counts with its
// journal, which goes whole): the writer, which every message and every
// run's step wait for, is never held for a whole history at once. Each
// transaction costs an fsync: BenchmarkPruneWriterWait weighs the
// longest wait of another writer against the prune's own time.
var deleteBatch = 1024

// onBatch, when set (tests), hears how many values each such
// transaction touched.
var onBatch func(n int)

// batch runs fn, which touches up to deleteBatch values and reports how
// many and whether more are left, in write transactions until none is.
// fn may run more than once for one transaction (see update): it sets
// its results, never adds to them.
func (s *Store) batch(ctx context.Context, fn func(tx *bolt.Tx) (n int, more bool, err error)) (int, error) {
	total := 0
	for {
		var n int
		var more bool
		err := s.update(ctx, func(tx *bolt.Tx) error {
			var err error
			n, more, err = fn(tx)
			return err
		})
		if err != nil {
			return total, err
		}
		if onBatch != nil {
			onBatch(n)
		}
		total += n
		if !more {
			return total, nil
		}
	}
}

// view runs fn in a read transaction.
func (s *Store) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(fn)
}

// Prune implements bot.Store. It also deletes the pending requests
// (bot's "pending:…" settings) made before t, the Todoist snapshots last
// saved before t, and the data keys of periods before t, sealing again
// with a current key the few values still sealed with one: what Prune
// (or an overwrite) left on free pages cannot be opened any more.
func (s *Store) Prune(ctx context.Context, before time.Time) (bot.Pruned, error) {
	var n bot.Pruned
	var err error
	if n.Messages, err = s.pruneMessages(ctx, before); err != nil {
		return n, fmt.Errorf("store: prune: %w", err)
	}
	var old [][]byte
	err = s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRuns).ForEach(func(id, v []byte) error {
			r, err := s.decodeRun(tx, v)
			if err != nil {
				return fmt.Errorf("run %s: %w", id, err)
			}
			if !busy(r) && r.Updated.Before(before) {
				old = append(old, bytes.Clone(id))
			}
			return nil
		})
	})
	if err != nil {
		return n, fmt.Errorf("store: prune: %w", err)
	}
	runs, audit, err := s.deleteRuns(ctx, old, func(r *bot.Run) bool { return !busy(r) && r.Updated.Before(before) })
	n.Runs, n.Audit = runs, audit
	if err != nil {
		return n, fmt.Errorf("store: prune runs: %w", err)
	}
	if err := s.prunePending(ctx, before); err != nil {
		return n, fmt.Errorf("store: prune pending requests: %w", err)
	}
	if err := s.pruneSnapshots(ctx, before); err != nil {
		return n, fmt.Errorf("store: prune snapshots: %w", err)
	}
	if err := s.pruneKeys(ctx, before); err != nil {
		return n, fmt.Errorf("store: prune data keys: %w", err)
	}
	return n, nil
}

// pruneMessages deletes the messages sent before t. Messages are
// appended in time order: each thread's are deleted from its first up
// to the first kept, several threads to a transaction (most have a few
// old messages each).
func (s *Store) pruneMessages(ctx context.Context, before time.Time) (int, error) {
	var threads [][]byte
	if err := s.view(ctx, func(tx *bolt.Tx) error { threads = keys(tx.Bucket(bucketMessages)); return nil }); err != nil {
		return 0, err
	}
	total := 0
	for ti := 0; ti < len(threads); {
		var done, next int
		err := s.update(ctx, func(tx *bolt.Tx) error {
			done, next = 0, ti
			for next < len(threads) && done < deleteBatch {
				n, finished, err := s.pruneThread(tx, threads[next], before, deleteBatch-done)
				if err != nil {
					return err
				}
				done += n
				if finished {
					next++
				}
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		if onBatch != nil {
			onBatch(done)
		}
		total += done
		ti = next
	}
	return total, nil
}

// pruneThread deletes up to limit of thread's messages sent before t,
// oldest first; finished reports that none of them is left.
func (s *Store) pruneThread(tx *bolt.Tx, thread []byte, before time.Time, limit int) (n int, finished bool, err error) {
	b := tx.Bucket(bucketMessages).Bucket(thread)
	if b == nil {
		return 0, true, nil
	}
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.First() {
		if n == limit {
			return n, false, nil
		}
		// A message whose key is gone is unreadable already: it goes
		// too.
		var m bot.Message
		err := s.decodeSealed(tx, v, &m)
		if err != nil && !errors.Is(err, errKeyGone) {
			return n, false, fmt.Errorf("messages of %s: %w", thread, err)
		}
		if err == nil && !m.At.Before(before) {
			break
		}
		if err := c.Delete(); err != nil {
			return n, false, err
		}
		n++
	}
	return n, true, nil
}

// deleteRuns deletes the runs ids that still pass doomed, in batches;
// a run counts as one value, and one more per journal entry (a run's
// journal goes whole, with its run).
func (s *Store) deleteRuns(ctx context.Context, ids [][]byte, doomed func(*bot.Run) bool) (runs, audit int, err error) {
	for len(ids) > 0 {
		var r, a, taken int
		_, err := s.batch(ctx, func(tx *bolt.Tx) (int, bool, error) {
			r, a, taken = 0, 0, 0
			work := 0
			for _, id := range ids {
				if taken > 0 && work >= deleteBatch {
					break
				}
				taken++
				work++
				raw := tx.Bucket(bucketRuns).Get(id)
				if raw == nil {
					continue
				}
				run, err := s.decodeRun(tx, raw)
				if err != nil {
					return 0, false, fmt.Errorf("run %s: %w", id, err)
				}
				if !doomed(run) {
					continue
				}
				n, err := deleteRun(tx, run)
				if err != nil {
					return 0, false, err
				}
				r, a, work = r+1, a+n, work+n
			}
			return work, false, nil
		})
		if err != nil {
			return runs, audit, err
		}
		runs, audit = runs+r, audit+a
		ids = ids[taken:]
	}
	return runs, audit, nil
}

// DeleteConversation implements bot.Store. The conversation's data keys
// are destroyed: what its deleted values left on free pages cannot be
// opened. The runs it keeps (working or queued) and the thread's jobs are
// sealed again with a new key first.
func (s *Store) DeleteConversation(ctx context.Context, threadKey string) error {
	var old [][]byte
	var cutoff uint64
	err := s.update(ctx, func(tx *bolt.Tx) error {
		var err error
		// From here on the thread's new values take a new key.
		if old, err = retire(tx, threadKey); err != nil {
			return err
		}
		cutoff = 0
		if b := tx.Bucket(bucketMessages).Bucket([]byte(threadKey)); b != nil {
			cutoff = b.Sequence()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: delete conversation %s: %w", threadKey, err)
	}
	_, err = s.batch(ctx, func(tx *bolt.Tx) (int, bool, error) {
		b := tx.Bucket(bucketMessages).Bucket([]byte(threadKey))
		if b == nil {
			return 0, false, nil
		}
		c, done := b.Cursor(), 0
		for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= cutoff; k, _ = c.First() {
			if done == deleteBatch {
				return done, true, nil
			}
			if err := c.Delete(); err != nil {
				return done, false, err
			}
			done++
		}
		if b.Stats().KeyN == 0 && b.Sequence() == cutoff {
			return done, false, tx.Bucket(bucketMessages).DeleteBucket([]byte(threadKey))
		}
		return done, false, nil
	})
	if err != nil {
		return fmt.Errorf("store: delete conversation %s: %w", threadKey, err)
	}
	var ids [][]byte
	if err := s.view(ctx, func(tx *bolt.Tx) error {
		ids = keys(tx.Bucket(bucketThreadRn).Bucket([]byte(threadKey)))
		return nil
	}); err != nil {
		return fmt.Errorf("store: delete conversation %s: %w", threadKey, err)
	}
	if _, _, err := s.deleteRuns(ctx, ids, func(r *bot.Run) bool { return !busy(r) }); err != nil {
		return fmt.Errorf("store: delete conversation %s: %w", threadKey, err)
	}
	doomed := idSet(old)
	var left []loc
	if err := s.view(ctx, func(tx *bolt.Tx) error {
		left = sealedWith(tx, doomed, func(visit visitor) { threadValues(tx, threadKey, visit) })
		return nil
	}); err != nil {
		return fmt.Errorf("store: delete conversation %s: %w", threadKey, err)
	}
	if err := s.resealAndDestroy(ctx, doomed, left, old); err != nil {
		return fmt.Errorf("store: delete conversation %s: %w", threadKey, err)
	}
	return nil
}

// loc is where a value is: a top bucket, a nested bucket in it (nil for
// none) and its key.
type loc struct{ top, nested, key []byte }

type visitor func(l loc, v []byte)

// nestedValues visits every value of the nested buckets of top.
func nestedValues(tx *bolt.Tx, top []byte, visit visitor) {
	b := tx.Bucket(top)
	_ = b.ForEach(func(name, v []byte) error {
		if v != nil {
			return nil
		}
		_ = b.Bucket(name).ForEach(func(k, v []byte) error {
			visit(loc{top, name, k}, v)
			return nil
		})
		return nil
	})
}

func flatValues(tx *bolt.Tx, top []byte, visit visitor) {
	_ = tx.Bucket(top).ForEach(func(k, v []byte) error {
		if v != nil {
			visit(loc{top, nil, k}, v)
		}
		return nil
	})
}

// allValues visits every value that may be sealed.
func allValues(tx *bolt.Tx, visit visitor) {
	nestedValues(tx, bucketMessages, visit)
	nestedValues(tx, bucketAudit, visit)
	for _, top := range [][]byte{bucketRuns, bucketTranscripts, bucketJobs, bucketOutbox, bucketSnapshots} {
		flatValues(tx, top, visit)
	}
	c := tx.Bucket(bucketSettings).Cursor()
	for k, v := c.Seek([]byte(scopePending)); k != nil && bytes.HasPrefix(k, []byte(scopePending)); k, v = c.Next() {
		visit(loc{bucketSettings, nil, k}, v)
	}
}

// threadValues visits every value a conversation's keys may seal: its
// messages, its runs (records, transcripts, journals) and the jobs.
func threadValues(tx *bolt.Tx, threadKey string, visit visitor) {
	if b := tx.Bucket(bucketMessages).Bucket([]byte(threadKey)); b != nil {
		_ = b.ForEach(func(k, v []byte) error { visit(loc{bucketMessages, []byte(threadKey), k}, v); return nil })
	}
	for _, id := range keys(tx.Bucket(bucketThreadRn).Bucket([]byte(threadKey))) {
		for _, top := range [][]byte{bucketRuns, bucketTranscripts} {
			if v := tx.Bucket(top).Get(id); v != nil {
				visit(loc{top, nil, id}, v)
			}
		}
		if b := tx.Bucket(bucketAudit).Bucket(id); b != nil {
			_ = b.ForEach(func(k, v []byte) error { visit(loc{bucketAudit, id, k}, v); return nil })
		}
	}
	flatValues(tx, bucketJobs, visit)
}

// sealedWith lists the values walk visits that a key of doomed sealed.
func sealedWith(tx *bolt.Tx, doomed map[string]bool, walk func(visitor)) []loc {
	var out []loc
	walk(func(l loc, v []byte) {
		if id := sealedKeyID(v); id != nil && doomed[string(id)] {
			out = append(out, loc{l.top, bytes.Clone(l.nested), bytes.Clone(l.key)})
		}
	})
	return out
}

func idSet(ids [][]byte) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[string(id)] = true
	}
	return m
}

// resealAndDestroy seals the values at locs again with their scope's
// current key, when a key of doomed still seals them, then destroys the
// keys ids, in batches.
func (s *Store) resealAndDestroy(ctx context.Context, doomed map[string]bool, locs []loc, ids [][]byte) error {
	for len(locs) > 0 {
		chunk := locs[:min(deleteBatch, len(locs))]
		if _, err := s.batch(ctx, func(tx *bolt.Tx) (int, bool, error) {
			for _, l := range chunk {
				if err := s.reseal(tx, doomed, l); err != nil {
					return 0, false, err
				}
			}
			return len(chunk), false, nil
		}); err != nil {
			return err
		}
		locs = locs[len(chunk):]
	}
	for len(ids) > 0 {
		chunk := ids[:min(deleteBatch, len(ids))]
		if _, err := s.batch(ctx, func(tx *bolt.Tx) (int, bool, error) {
			return len(chunk), false, s.keys.destroy(tx, chunk)
		}); err != nil {
			return err
		}
		ids = ids[len(chunk):]
	}
	return nil
}

// reseal seals the value at l again with its scope's current key if a
// key of doomed seals it.
func (s *Store) reseal(tx *bolt.Tx, doomed map[string]bool, l loc) error {
	b := tx.Bucket(l.top)
	if l.nested != nil {
		if b = b.Bucket(l.nested); b == nil {
			return nil
		}
	}
	v := b.Get(l.key)
	id := sealedKeyID(v)
	if id == nil || !doomed[string(id)] {
		return nil // deleted or sealed again since
	}
	raw := tx.Bucket(bucketDataKeys).Get(id)
	if raw == nil {
		return fmt.Errorf("value %s/%s/%x: %w", l.top, l.nested, l.key, errKeyGone)
	}
	d, err := parseDataKey(raw)
	if err != nil {
		return err
	}
	pt, err := s.keys.open(tx, v)
	if err != nil {
		return err
	}
	sealed, err := s.keys.seal(tx, d.scope, pt)
	if err != nil {
		return err
	}
	return b.Put(l.key, sealed)
}

// pruneKeys destroys the data keys of the periods that ended before t,
// sealing again the values they still seal (a run kept working, a job
// queued that long, a transcript kept while its run was saved without
// it). The current period's keys are kept whatever t.
func (s *Store) pruneKeys(ctx context.Context, before time.Time) error {
	now := periodOf(s.keys.now())
	var ids [][]byte
	var left []loc
	err := s.view(ctx, func(tx *bolt.Tx) error {
		_ = tx.Bucket(bucketDataKeys).ForEach(func(id, raw []byte) error {
			if len(raw) >= 8 {
				p := int64(binary.BigEndian.Uint64(raw))
				if p != now && time.Unix(p, 0).Add(keyPeriod).Compare(before) <= 0 {
					ids = append(ids, bytes.Clone(id))
				}
			}
			return nil
		})
		if len(ids) > 0 {
			left = sealedWith(tx, idSet(ids), func(visit visitor) { allValues(tx, visit) })
		}
		return nil
	})
	if err != nil || len(ids) == 0 {
		return err
	}
	return s.resealAndDestroy(ctx, idSet(ids), left, ids)
}

// pendingAt is when a pending request (a bot.Incoming) was made.
type pendingAt struct {
	At time.Time `json:"at"`
}

// prunePending deletes the pending requests made before t.
func (s *Store) prunePending(ctx context.Context, before time.Time) error {
	var old []string
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketSettings).Cursor()
		for k, v := c.Seek([]byte(scopePending)); k != nil && bytes.HasPrefix(k, []byte(scopePending)); k, v = c.Next() {
			var raw string
			if err := s.decodeSealed(tx, v, &raw); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			var p pendingAt
			// A request that does not say when it was made is as old
			// as can be: retention must not keep it for ever.
			if raw == "" || json.Unmarshal([]byte(raw), &p) != nil || p.At.Before(before) {
				old = append(old, string(k))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return deleteKeys(ctx, s, old, s.deletePending)
}

// pruneSnapshots deletes the snapshots last saved before t. A snapshot
// saved before its time was kept (a file of schema version 2) counts
// from its migration.
func (s *Store) pruneSnapshots(ctx context.Context, before time.Time) error {
	var old [][]byte
	if err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSnapshotUsed).ForEach(func(k, v []byte) error {
			if len(v) == 8 && int64(binary.BigEndian.Uint64(v)) < before.UnixNano() {
				old = append(old, bytes.Clone(k))
			}
			return nil
		})
	}); err != nil {
		return err
	}
	return deleteKeys(ctx, s, old, s.deleteSnapshot)
}

// deleteKeys deletes keys with del, in write transactions of at most
// deleteBatch keys.
func deleteKeys[K any](ctx context.Context, s *Store, keys []K, del func(*bolt.Tx, K) error) error {
	for len(keys) > 0 {
		chunk := keys[:min(deleteBatch, len(keys))]
		if _, err := s.batch(ctx, func(tx *bolt.Tx) (int, bool, error) {
			for _, k := range chunk {
				if err := del(tx, k); err != nil {
					return 0, false, err
				}
			}
			return len(chunk), false, nil
		}); err != nil {
			return err
		}
		keys = keys[len(chunk):]
	}
	return nil
}

// PruneEvents implements bot.Store.
func (s *Store) PruneEvents(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	err := s.updateTx(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketEvents).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(v) == 8 && int64(binary.BigEndian.Uint64(v)) < before.UnixNano() {
				if err := c.Delete(); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune events: %w", err)
	}
	return n, nil
}
