package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/bot"
)

// migrations upgrade a file from version i+1 to i+2.
var migrations = []func(s *Store, tx *bolt.Tx) error{(*Store).moveTranscripts, (*Store).sealValues}

// moveTranscripts (version 1 to 2) moves every transcript held inside its
// run's record into bucketTranscripts. The version goes up with it, so
// that a tidybot of version 1, which would read those runs without their
// transcripts (and start a working run afresh, sending its writes again
// as new), refuses the file instead of misreading it.
func (s *Store) moveTranscripts(tx *bolt.Tx) error {
	runs := tx.Bucket(bucketRuns)
	for _, id := range keys(runs) {
		var r bot.Run
		if err := s.decodeSealed(tx, runs.Get(id), &r); err != nil {
			return fmt.Errorf("run %s: %w", id, err)
		}
		if len(r.Transcript) == 0 {
			continue
		}
		if err := s.saveRun(tx, &r); err != nil {
			return fmt.Errorf("run %s: %w", id, err)
		}
	}
	return nil
}

// sealValues (version 2 to 3) seals every value written in plaintext
// before, so that deleting it later shreds it too. (What earlier
// deletions left on free pages stays there: see docs, "Data kept".)
func (s *Store) sealValues(tx *bolt.Tx) error {
	type put struct {
		l     loc
		scope string
	}
	var puts []put
	var failed error
	now := u64(uint64(s.keys.now().UnixNano()))
	allValues(tx, func(l loc, v []byte) {
		if failed != nil || sealedKeyID(v) != nil {
			return
		}
		scope, err := s.scopeOf(tx, l, v)
		if err != nil {
			failed = fmt.Errorf("%s %x: %w", l.top, l.key, err)
			return
		}
		puts = append(puts, put{loc{l.top, bytes.Clone(l.nested), bytes.Clone(l.key)}, scope})
	})
	if failed != nil {
		return failed
	}
	for _, p := range puts {
		b := tx.Bucket(p.l.top)
		if p.l.nested != nil {
			b = b.Bucket(p.l.nested)
		}
		sealed, err := s.keys.seal(tx, p.scope, bytes.Clone(b.Get(p.l.key)))
		if err != nil {
			return err
		}
		if err := b.Put(p.l.key, sealed); err != nil {
			return err
		}
		if bytes.Equal(p.l.top, bucketSnapshots) {
			if err := tx.Bucket(bucketSnapshotUsed).Put(p.l.key, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// scopeOf is the scope of a plaintext value at l.
func (s *Store) scopeOf(tx *bolt.Tx, l loc, v []byte) (string, error) {
	var owner struct {
		ThreadKey string `json:"thread_key"`
	}
	switch {
	case bytes.Equal(l.top, bucketMessages):
		return string(l.nested), nil
	case bytes.Equal(l.top, bucketOutbox):
		return scopeOutbox, nil
	case bytes.Equal(l.top, bucketSnapshots):
		return scopeSnapshot + string(l.key), nil
	case bytes.Equal(l.top, bucketSettings):
		return string(l.key), nil
	case bytes.Equal(l.top, bucketTranscripts):
		raw := tx.Bucket(bucketRuns).Get(l.key)
		if raw == nil {
			return "", fmt.Errorf("the transcript of run %s has no run", l.key)
		}
		v = raw
	}
	if err := s.decodeSealed(tx, v, &owner); err != nil {
		return "", err
	}
	return owner.ThreadKey, nil
}

func (s *Store) init(secrets [][]byte) error {
	err := s.updateTx(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("create bucket %s: %w", b, err)
			}
		}
		meta := tx.Bucket(bucketMeta)
		if err := s.keys.setUp(tx, secrets, true); err != nil {
			return fmt.Errorf("%s: %w", s.path, err)
		}
		v := SchemaVersion
		if raw := meta.Get(keySchema); raw != nil {
			v = int(binary.BigEndian.Uint64(raw))
		}
		if v > SchemaVersion {
			return fmt.Errorf("%s has schema version %d, newer than this tidybot (%d): upgrade tidybot", s.path, v, SchemaVersion)
		}
		// An index added after the file was written is built once: from
		// every run, or for the wait keys from the runs not ended only
		// (their own index is older), as only those can wait.
		var ids [][]byte
		switch {
		case meta.Get(keyRunIndex) == nil || meta.Get(keyThreadOpen) == nil:
			ids = keys(tx.Bucket(bucketRuns))
		case meta.Get(keyWaitKeys) == nil:
			ids = keys(tx.Bucket(bucketOpenRuns))
		}
		if len(ids) > 0 {
			runs := tx.Bucket(bucketRuns)
			for _, id := range ids {
				raw := runs.Get(id)
				if raw == nil {
					continue
				}
				var r bot.Run
				if err := s.decodeSealed(tx, raw, &r); err != nil {
					return fmt.Errorf("index run %s: %w", id, err)
				}
				if err := indexRun(tx, keysOf(&r)); err != nil {
					return fmt.Errorf("index run %s: %w", id, err)
				}
			}
		}
		for _, k := range [][]byte{keyRunIndex, keyThreadOpen, keyWaitKeys} {
			if err := meta.Put(k, []byte("1")); err != nil {
				return err
			}
		}
		if meta.Get(keyFileID) == nil {
			id := make([]byte, 16)
			if _, err := rand.Read(id); err != nil {
				return fmt.Errorf("file id: %w", err)
			}
			if err := meta.Put(keyFileID, []byte(hex.EncodeToString(id))); err != nil {
				return err
			}
		}
		from := v
		for ; v < SchemaVersion; v++ {
			if err := migrations[v-1](s, tx); err != nil {
				return fmt.Errorf("migrate %s to version %d: %w", s.path, v+1, err)
			}
		}
		if from < 3 && tx.Bucket(bucketRuns).Stats().KeyN+tx.Bucket(bucketMessages).Stats().KeyN+tx.Bucket(bucketSettings).Stats().KeyN > 0 {
			// The values just sealed are still on the pages they were
			// freed from, in plain text: the file is copied without them.
			if err := meta.Put(keyCompact, []byte("1")); err != nil {
				return err
			}
		}
		return meta.Put(keySchema, u64(SchemaVersion))
	})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// compactIfDue copies the file without its free pages when init marked
// it (keyCompact): bbolt frees pages without wiping them, so after the
// values of an older file are sealed, their plain text is still in the
// file. The copy replaces the file; the mark goes only with it, so a
// copy that fails (a full disk) fails Open and is tried again at the
// next.
func (s *Store) compactIfDue(bo *bolt.Options) error {
	var due bool
	if err := s.db.View(func(tx *bolt.Tx) error { due = tx.Bucket(bucketMeta).Get(keyCompact) != nil; return nil }); err != nil || !due {
		return err
	}
	tmp := s.path + ".compact"
	_ = os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("store: copy %s without its free pages: %w", s.path, err)
	}
	err = bolt.Compact(dst, s.db, 64<<20)
	if err == nil {
		err = dst.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyCompact) })
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("store: copy %s without its free pages (it needs as much free disk space as the file): %w", s.path, err)
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", s.path, err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("store: replace %s by its copy %s: %w", s.path, tmp, err)
	}
	if s.db, err = bolt.Open(s.path, 0o600, bo); err != nil {
		return fmt.Errorf("open database %s (TIDYBOT_DB): %w", s.path, err)
	}
	return nil
}

// FileID returns the id written in the file at its first read-write
// open by a tidybot that writes one (issue 35), or "" for a file none
// has opened so: the same file under another path, or copied, has the
// same id (tidybot migrate --from knows a file it copied by it).
func (s *Store) FileID(ctx context.Context) (string, error) {
	var id string
	err := s.view(ctx, func(tx *bolt.Tx) error {
		id = string(tx.Bucket(bucketMeta).Get(keyFileID))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("store: file id: %w", err)
	}
	return id, nil
}

// check refuses, for a read-only Open, a file that init has not set up
// at this schema version.
func (s *Store) check(secrets [][]byte) error {
	return s.db.View(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if tx.Bucket(b) == nil {
				return fmt.Errorf("store: %s is not a tidybot database (or older than this tidybot): start tidybot serve or chat on it once", s.path)
			}
		}
		if raw := tx.Bucket(bucketMeta).Get(keySchema); raw == nil || int(binary.BigEndian.Uint64(raw)) != SchemaVersion {
			return fmt.Errorf("store: %s has another schema version than this tidybot (%d): start tidybot serve or chat on it once", s.path, SchemaVersion)
		}
		if err := s.keys.setUp(tx, secrets, false); err != nil {
			return fmt.Errorf("store: %s: %w", s.path, err)
		}
		return nil
	})
}

// Check verifies the file's consistency (bbolt's own check), that every
// value decodes, and that every transcript is JSON kept for a stored run.
func (s *Store) Check() error {
	return s.db.View(func(tx *bolt.Tx) error {
		var first error
		for err := range tx.Check() {
			if first == nil {
				first = fmt.Errorf("store: check: %w", err)
			}
		}
		if first != nil {
			return first
		}
		var walk func(b *bolt.Bucket) error
		walk = func(b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				if v == nil {
					return walk(b.Bucket(k))
				}
				var data json.RawMessage
				return s.decodeSealed(tx, v, &data)
			})
		}
		// The buckets of versioned values (the others hold keys, times
		// and indexes).
		for _, name := range [][]byte{bucketThreads, bucketMessages, bucketRuns, bucketJobs, bucketSettings, bucketAudit, bucketOutbox} {
			if err := walk(tx.Bucket(name)); err != nil {
				return fmt.Errorf("store: check %s: %w", name, err)
			}
		}
		runs := tx.Bucket(bucketRuns)
		return tx.Bucket(bucketTranscripts).ForEach(func(id, tr []byte) error {
			if runs.Get(id) == nil {
				return fmt.Errorf("store: check %s: the transcript of run %s outlived its run", bucketTranscripts, id)
			}
			tr, err := s.keys.open(tx, tr)
			if err != nil {
				return fmt.Errorf("store: check %s: the transcript of run %s: %w", bucketTranscripts, id, err)
			}
			if !json.Valid(tr) {
				return fmt.Errorf("store: check %s: the transcript of run %s is not JSON", bucketTranscripts, id)
			}
			return nil
		})
	})
}
