// Package store keeps tidybot's state in a bbolt file: threads, messages,
// runs (status and agent transcript), jobs, dedupe keys, settings and the
// audit journal of writes. It implements bot.Store.
package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/tidybot/tidybot/bot"
)

// SchemaVersion is the layout this package writes. Open refuses a file of
// a newer version and migrates an older one. Version 2 keeps transcripts
// apart from their runs (bucketTranscripts); version 3 seals what people
// wrote with data keys (see seal.go).
const SchemaVersion = 3

// valueVersion is the version of every stored JSON value.
const valueVersion = 1

var (
	bucketMeta     = []byte("meta")
	bucketThreads  = []byte("threads")
	bucketMessages = []byte("messages") // nested: one bucket per thread
	bucketRuns     = []byte("runs")
	bucketThreadRn = []byte("thread_runs") // nested per thread: run id → ""
	bucketOpenRuns = []byte("open_runs")   // run id → status, for runs not ended
	bucketJobs     = []byte("jobs")        // key: big-endian sequence
	bucketJobIDs   = []byte("job_ids")
	bucketEvents   = []byte("events")
	bucketSettings = []byte("settings")
	bucketAudit    = []byte("audit")  // nested: one bucket per run
	bucketOutbox   = []byte("outbox") // key: big-endian sequence
	bucketOutIDs   = []byte("outbox_ids")
	// bucketThreadOpen is nested per thread: run id → status, for the
	// thread's runs not ended, so that a message finds its thread's
	// waiting run without reading the thread's other runs.
	bucketThreadOpen = []byte("thread_open_runs")
	// bucketSnapshots holds each Todoist account's last snapshot, keyed
	// by a hash of its token (todoist.AccountKey), as the client wrote it.
	bucketSnapshots = []byte("todoist_snapshots")
	// bucketTranscripts holds each run's transcript (run id → the bytes
	// bot gave), apart from its record in bucketRuns: lists read records
	// only, and a save stores the transcript without encoding it again.
	// Opening a file of schema version 1, whose records hold their
	// transcripts, moves them here (moveTranscripts).
	bucketTranscripts = []byte("run_transcripts")
	// bucketWaitKeys maps the Waiting.Key of each run that waits to the
	// run's id, so that a button press finds its run without reading the
	// others; bucketRunWaitKey is its reverse (run id → key), so that a
	// save finds the key to drop without decoding the run it replaces.
	bucketWaitKeys   = []byte("wait_keys")
	bucketRunWaitKey = []byte("run_wait_keys")
	// bucketSnapshotUsed: account key → when its snapshot was last
	// saved (unix nanoseconds), for retention.
	bucketSnapshotUsed = []byte("todoist_snapshots_used")
	allBuckets         = [][]byte{bucketMeta, bucketThreads, bucketMessages, bucketRuns, bucketThreadRn, bucketOpenRuns, bucketJobs, bucketJobIDs, bucketEvents, bucketSettings, bucketAudit, bucketOutbox, bucketOutIDs, bucketThreadOpen, bucketSnapshots, bucketTranscripts, bucketWaitKeys, bucketRunWaitKey, bucketDataKeys, bucketScopeKeys, bucketCurrentKeys, bucketSnapshotUsed}
	keySchema          = []byte("schema_version")
	keyRunIndex        = []byte("runs_indexed")
	keyThreadOpen      = []byte("thread_open_runs_indexed")
	keyWaitKeys        = []byte("wait_keys_indexed")
	// keyCompact marks a file to copy without its free pages (compact).
	keyCompact = []byte("compact_pending")
)

// Store is a bbolt-backed bot.Store, safe for concurrent use.
type Store struct {
	db   *bolt.DB
	path string
	keys *keyring

	// writes is update's queue to writeLoop, which closes stopped once
	// it has answered every write.
	writes  chan *write
	stopped chan struct{}

	// mu protects closed, and writes against a send after its close.
	mu     sync.RWMutex
	closed bool
}

var _ bot.Store = (*Store)(nil)

// options are Open's settings.
type options struct {
	bolt    bolt.Options
	secrets [][]byte
	now     func() time.Time
}

// Option configures Open.
type Option func(*options)

// WithLockTimeout sets how long Open waits for a file another process
// holds (default 1s).
func WithLockTimeout(d time.Duration) Option { return func(o *options) { o.bolt.Timeout = d } }

// ReadOnly opens the file for reading only (tidybot runs): it is neither
// created nor migrated, and opening fails with ErrInUse while another
// process holds it for writing (bbolt allows one writer and no reader
// beside it).
func ReadOnly() Option { return func(o *options) { o.bolt.ReadOnly = true } }

// WithSecretKeys gives the TIDYBOT_SECRET_KEY keys (the current one
// first, then older ones during a rotation) from which the master key
// that seals data keys is derived. Without them, a master key is
// generated at first start and kept in the file.
func WithSecretKeys(keys [][]byte) Option { return func(o *options) { o.secrets = keys } }

// withClock sets the clock that dates data keys (tests).
func withClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// ErrInUse is returned by Open for a file another process holds.
var ErrInUse = errors.New("database in use by another process")

// Open opens or creates the database at path. A file that another process
// holds fails within the lock timeout with a message that says so.
func Open(path string, opts ...Option) (*Store, error) {
	o := &options{bolt: bolt.Options{Timeout: time.Second}, now: time.Now}
	for _, opt := range opts {
		opt(o)
	}
	db, err := bolt.Open(path, 0o600, &o.bolt)
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("database %s is in use by another process (is another tidybot running? set TIDYBOT_DB to use another file): %w", path, ErrInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("open database %s (TIDYBOT_DB): %w", path, err)
	}
	// The file holds conversations: an older file created with a looser
	// mode is tightened to the owner only.
	if err := os.Chmod(path, 0o600); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("restrict database %s to its owner (TIDYBOT_DB): %w", path, err)
	}
	s := &Store{db: db, path: path, keys: &keyring{now: o.now}}
	if o.bolt.ReadOnly {
		err = s.check(o.secrets)
	} else {
		err = s.init(o.secrets)
		if err == nil {
			err = s.compactIfDue(&o.bolt)
		}
	}
	if err != nil {
		if s.db != nil {
			_ = s.db.Close()
		}
		return nil, err
	}
	// A read-only store has a writer too: its writes fail, as bbolt's
	// do, with "database is in read-only mode".
	s.writes, s.stopped = make(chan *write, maxBatch), make(chan struct{})
	go s.writeLoop()
	return s, nil
}

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

func (s *Store) init(secrets [][]byte) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
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

// Close closes the database once the writes already queued are done;
// later writes fail with bbolt's ErrDatabaseNotOpen, as reads do.
func (s *Store) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.writes)
	}
	s.mu.Unlock()
	<-s.stopped
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// envelope is how every value is stored: versioned JSON.
type envelope struct {
	V    int             `json:"v"`
	Data json.RawMessage `json:"data"`
}

func encode(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return envelop(data), nil
}

// envelopeStart is how json.Marshal writes an envelope up to its data.
var envelopeStart = `{"v":` + strconv.Itoa(valueVersion) + `,"data":`

// envelop wraps data, as json.Marshal wrote it, in an envelope with the
// bytes json.Marshal(envelope{…}) would write, without its cost:
// Marshal validates and compacts a RawMessage again, byte by byte.
func envelop(data []byte) []byte {
	out := make([]byte, 0, len(envelopeStart)+len(data)+1)
	out = append(out, envelopeStart...)
	out = append(out, data...)
	return append(out, '}')
}

func decode(raw []byte, v any) error {
	// A value as envelop wrote it (all of them) decodes in one pass, not
	// one for the envelope and one for its data. Anything else, such as
	// another version, goes through the envelope.
	if data, ok := bytes.CutPrefix(raw, []byte(envelopeStart)); ok && bytes.HasSuffix(data, []byte("}")) {
		err := json.Unmarshal(data[:len(data)-1], v)
		// A syntax error (a layout envelop did not write) has changed
		// nothing in v: json checks the whole input first.
		if syntax := (*json.SyntaxError)(nil); !errors.As(err, &syntax) {
			if err != nil {
				return fmt.Errorf("decode value: %w", err)
			}
			return nil
		}
	}
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("decode value: %w", err)
	}
	if env.V != valueVersion {
		return fmt.Errorf("value version %d, want %d", env.V, valueVersion)
	}
	if err := json.Unmarshal(env.Data, v); err != nil {
		return fmt.Errorf("decode value: %w", err)
	}
	return nil
}

func u64(n uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n)
	return b
}

func put(b *bolt.Bucket, key []byte, v any) error {
	raw, err := encode(v)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}

// putSealed stores v under key in b, sealed with scope's data key.
func (s *Store) putSealed(tx *bolt.Tx, b *bolt.Bucket, key []byte, scope string, v any) error {
	raw, err := encode(v)
	if err != nil {
		return err
	}
	if raw, err = s.keys.seal(tx, scope, raw); err != nil {
		return err
	}
	return b.Put(key, raw)
}

// decodeSealed decodes a stored value, sealed or (written before values
// were sealed) not.
func (s *Store) decodeSealed(tx *bolt.Tx, raw []byte, v any) error {
	if sealedKeyID(raw) == nil {
		return decode(raw, v)
	}
	// The plaintext is needed only while it is decoded (json copies
	// what it keeps): lists of thousands of runs reuse one buffer.
	bp := plainBufs.Get().(*[]byte)
	defer plainBufs.Put(bp)
	pt, err := s.keys.openTo((*bp)[:0], tx, raw)
	if err != nil {
		return err
	}
	*bp = pt[:0]
	return decode(pt, v)
}

var plainBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// Scopes of data keys (see seal.go) besides conversations, which are
// scoped by their thread key.
const (
	scopeOutbox   = "outbox"
	scopeSnapshot = "snapshot:"       // + account key
	scopePending  = bot.PendingPrefix // each pending request is a scope of its own
)

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

// PruneEvents implements bot.Store.
func (s *Store) PruneEvents(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
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

// Thread implements bot.Store.
func (s *Store) Thread(ctx context.Context, key string) (bot.Thread, error) {
	var t bot.Thread
	if err := ctx.Err(); err != nil {
		return t, err
	}
	err := s.db.View(func(tx *bolt.Tx) error {
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

// RecentMessages implements bot.Store: it walks the thread backwards and
// stops after n messages or at the first one before since.
func (s *Store) RecentMessages(ctx context.Context, threadKey string, since time.Time, n int) ([]bot.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []bot.Message
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMessages).Bucket([]byte(threadKey))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Last(); k != nil && len(out) < n; k, v = c.Prev() {
			var m bot.Message
			if err := s.decodeSealed(tx, v, &m); err != nil {
				return err
			}
			if m.At.Before(since) {
				break
			}
			out = append(out, m)
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
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var best *bot.Run
	err := s.db.View(func(tx *bolt.Tx) error {
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
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var r bot.Run
	err := s.db.View(func(tx *bolt.Tx) error {
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
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []*bot.Run
	err := s.db.View(func(tx *bolt.Tx) error {
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

func keys(b *bolt.Bucket) [][]byte {
	var out [][]byte
	if b != nil {
		_ = b.ForEach(func(k, _ []byte) error { out = append(out, bytes.Clone(k)); return nil })
	}
	return out
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

// Jobs implements bot.Store.
func (s *Store) Jobs(ctx context.Context) ([]bot.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []bot.Job
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJobs).ForEach(func(_, v []byte) error {
			var j bot.Job
			if err := s.decodeSealed(tx, v, &j); err != nil {
				return err
			}
			out = append(out, j)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: list jobs: %w", err)
	}
	return out, nil
}

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

// RunAudit implements bot.Store.
func (s *Store) RunAudit(ctx context.Context, runID string) ([]bot.AuditEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []bot.AuditEntry
	err := s.db.View(func(tx *bolt.Tx) error {
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

// Setting implements bot.Store.
func (s *Store) Setting(ctx context.Context, key string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	var v string
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketSettings).Get([]byte(key))
		if raw == nil {
			return bot.ErrNotFound
		}
		return s.decodeSealed(tx, raw, &v)
	})
	if err != nil {
		return "", fmt.Errorf("store: setting %s: %w", key, err)
	}
	return v, nil
}

// SetSetting implements bot.Store.
func (s *Store) SetSetting(ctx context.Context, key, value string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		if isPending(key) {
			return s.setPending(tx, key, value)
		}
		return put(tx.Bucket(bucketSettings), []byte(key), value)
	})
	if err != nil {
		return fmt.Errorf("store: set %s: %w", key, err)
	}
	return nil
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
		return addCounts(tx, c.Count)
	})
	if err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	if dup {
		return bot.ErrDuplicate
	}
	return nil
}

// Outbox implements bot.Store.
func (s *Store) Outbox(ctx context.Context) ([]bot.Outbound, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []bot.Outbound
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).ForEach(func(_, v []byte) error {
			var ob bot.Outbound
			if err := s.decodeSealed(tx, v, &ob); err != nil {
				return err
			}
			out = append(out, ob)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: outbox: %w", err)
	}
	return out, nil
}

// Delivered implements bot.Store, in one transaction.
func (s *Store) Delivered(ctx context.Context, ob bot.Outbound, msgID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// At once, not with a later write: until this commits, a crash posts
	// the message again at the next start.
	err := s.update(ctx, func(tx *bolt.Tx) error {
		ids := tx.Bucket(bucketOutIDs)
		if seq := ids.Get([]byte(ob.ID)); seq != nil {
			if err := tx.Bucket(bucketOutbox).Delete(bytes.Clone(seq)); err != nil {
				return err
			}
			if err := ids.Delete([]byte(ob.ID)); err != nil {
				return err
			}
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
