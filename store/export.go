package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/bot"
)

// Sink receives a database's contents from Export (another store
// importing them: tidybot migrate --from).
type Sink interface {
	Thread(ctx context.Context, t bot.Thread) error
	// Message is called with each thread's messages in their order.
	Message(ctx context.Context, m bot.Message) error
	// Run is called with each run and its transcript, if kept.
	Run(ctx context.Context, r *bot.Run) error
	// Audit is called with each run's journal in its order.
	Audit(ctx context.Context, e bot.AuditEntry) error
	// Job and Outbound are called in queue order.
	Job(ctx context.Context, j bot.Job) error
	Outbound(ctx context.Context, ob bot.Outbound) error
	Setting(ctx context.Context, key, value string) error
	Snapshot(ctx context.Context, key string, data []byte, used time.Time) error
	Event(ctx context.Context, key string, at time.Time) error
	// Timer is called with each timer, without its claim.
	Timer(ctx context.Context, t bot.Timer) error
}

// Export hands every value of the database to sink, opened, in one read
// transaction. A value whose data key was destroyed is unreadable: it is
// an error, as Check reports it.
func (s *Store) Export(ctx context.Context, sink Sink) error {
	err := s.view(ctx, func(tx *bolt.Tx) error {
		for _, part := range []func(context.Context, *bolt.Tx, Sink) error{s.exportThreads, s.exportRuns, s.exportQueues, s.exportSettings, s.exportTimers} {
			if err := part(ctx, tx, sink); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: export %s: %w", s.path, err)
	}
	return nil
}

// each decodes every value of b (nil: none) into a new T for fn.
func each[T any](s *Store, tx *bolt.Tx, b *bolt.Bucket, fn func(k []byte, v *T) error) error {
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, raw []byte) error {
		if raw == nil {
			return nil // a nested bucket
		}
		v := new(T)
		if err := s.decodeSealed(tx, raw, v); err != nil {
			return fmt.Errorf("%x: %w", k, err)
		}
		return fn(k, v)
	})
}

func (s *Store) exportThreads(ctx context.Context, tx *bolt.Tx, sink Sink) error {
	if err := each(s, tx, tx.Bucket(bucketThreads), func(_ []byte, t *bot.Thread) error { return sink.Thread(ctx, *t) }); err != nil {
		return fmt.Errorf("threads: %w", err)
	}
	msgs := tx.Bucket(bucketMessages)
	for _, th := range keys(msgs) {
		if err := each(s, tx, msgs.Bucket(th), func(_ []byte, m *bot.Message) error { return sink.Message(ctx, *m) }); err != nil {
			return fmt.Errorf("messages of %s: %w", th, err)
		}
	}
	return nil
}

func (s *Store) exportRuns(ctx context.Context, tx *bolt.Tx, sink Sink) error {
	trs := tx.Bucket(bucketTranscripts)
	err := each(s, tx, tx.Bucket(bucketRuns), func(id []byte, r *bot.Run) error {
		if raw := trs.Get(id); raw != nil {
			pt, err := s.keys.open(tx, raw)
			if err != nil {
				return fmt.Errorf("transcript: %w", err)
			}
			r.Transcript = bytes.Clone(pt)
		}
		return sink.Run(ctx, r)
	})
	if err != nil {
		return fmt.Errorf("runs: %w", err)
	}
	audit := tx.Bucket(bucketAudit)
	for _, run := range keys(audit) {
		if err := each(s, tx, audit.Bucket(run), func(_ []byte, e *bot.AuditEntry) error { return sink.Audit(ctx, *e) }); err != nil {
			return fmt.Errorf("journal of %s: %w", run, err)
		}
	}
	return nil
}

func (s *Store) exportQueues(ctx context.Context, tx *bolt.Tx, sink Sink) error {
	if err := each(s, tx, tx.Bucket(bucketJobs), func(_ []byte, j *bot.Job) error { return sink.Job(ctx, *j) }); err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	if err := each(s, tx, tx.Bucket(bucketOutbox), func(_ []byte, ob *bot.Outbound) error { return sink.Outbound(ctx, *ob) }); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return tx.Bucket(bucketEvents).ForEach(func(k, v []byte) error {
		if len(v) != 8 {
			return nil
		}
		return sink.Event(ctx, string(k), time.Unix(0, int64(binary.BigEndian.Uint64(v))))
	})
}

func (s *Store) exportSettings(ctx context.Context, tx *bolt.Tx, sink Sink) error {
	if err := each(s, tx, tx.Bucket(bucketSettings), func(k []byte, v *string) error { return sink.Setting(ctx, string(k), *v) }); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	used := tx.Bucket(bucketSnapshotUsed)
	return tx.Bucket(bucketSnapshots).ForEach(func(k, raw []byte) error {
		pt, err := s.keys.open(tx, raw)
		if err != nil {
			return fmt.Errorf("snapshot %s: %w", k, err)
		}
		at := s.keys.now()
		if v := used.Get(k); len(v) == 8 {
			at = time.Unix(0, int64(binary.BigEndian.Uint64(v)))
		}
		return sink.Snapshot(ctx, string(k), bytes.Clone(pt), at)
	})
}

// exportTimers hands over the timers (the digest's, autopilot's), so
// that they keep firing from the copy. A claim is the copied-from
// process's, which no longer runs: it is left behind.
func (s *Store) exportTimers(ctx context.Context, tx *bolt.Tx, sink Sink) error {
	b := tx.Bucket(bucketTimers)
	if b == nil {
		return nil
	}
	err := b.ForEach(func(k, raw []byte) error {
		var rec timerRecord
		if err := decode(raw, &rec); err != nil {
			return fmt.Errorf("%q: %w", k, err)
		}
		rec.Claim = ""
		return sink.Timer(ctx, rec.Timer)
	})
	if err != nil {
		return fmt.Errorf("timers: %w", err)
	}
	return nil
}
