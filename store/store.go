// Package store keeps tidybot's state in a bbolt file: threads, messages,
// runs (status and agent transcript), jobs, dedupe keys, settings and the
// audit journal of writes. It implements bot.Store.
package store

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
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
	// bucketTimers holds the durable timers (bot.Timer): kind NUL key →
	// timerRecord.
	bucketTimers = []byte("timers")
	// bucketTimersDue indexes the timers by due time (dueKey → ""), so
	// that a claim reads only what is due.
	bucketTimersDue = []byte("timers_due")
	allBuckets      = [][]byte{bucketTimers, bucketTimersDue, bucketMeta, bucketThreads, bucketMessages, bucketRuns, bucketThreadRn, bucketOpenRuns, bucketJobs, bucketJobIDs, bucketEvents, bucketSettings, bucketAudit, bucketOutbox, bucketOutIDs, bucketThreadOpen, bucketSnapshots, bucketTranscripts, bucketWaitKeys, bucketRunWaitKey, bucketDataKeys, bucketScopeKeys, bucketCurrentKeys, bucketSnapshotUsed}
	keySchema       = []byte("schema_version")
	keyRunIndex     = []byte("runs_indexed")
	keyThreadOpen   = []byte("thread_open_runs_indexed")
	keyWaitKeys     = []byte("wait_keys_indexed")
	// keyCompact marks a file to copy without its free pages (compact).
	keyCompact = []byte("compact_pending")
	// keyFileID names the file for good (FileID), written at its first
	// read-write open.
	keyFileID = []byte("file_id")
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

	// committed counts the write transactions committed (see Syncs).
	committed atomic.Int64
}

// Syncs is how many fdatasyncs the store's committed write transactions
// made since it was opened: two each, as bbolt syncs the pages it wrote
// and then the meta page (go.etcd.io/bbolt tx.go, Commit: write, then
// writeMeta, each followed by fdatasync unless NoSync). The sync of the
// file's growth (at most one per doubling, up to 1 GiB) is not counted.
// /metrics shows it as tidybot_store_fsyncs_total.
func (s *Store) Syncs() int64 {
	if s.db.NoSync {
		return 0
	}
	return 2 * s.committed.Load()
}

// updateTx is bbolt's Update, counted for Syncs.
func (s *Store) updateTx(fn func(*bolt.Tx) error) error {
	err := s.db.Update(fn)
	if err == nil {
		s.committed.Add(1)
	}
	return err
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
