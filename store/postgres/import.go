package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/bot"
)

// Importer writes another store's contents into this one, sealing each
// value with this database's keys (see Import). Its methods match
// package store's Sink.
type Importer struct {
	s  *Store
	tx pgx.Tx
	// N counts what was written, by kind.
	N map[string]int
}

// Import runs export, which hands the contents of the database named
// source to an Importer, in one transaction: a failure or a crash writes
// nothing, and running it again starts over. Once committed, source is
// recorded and a second Import of it does nothing (done is false), so
// that it can be run again safely. Data already in this database stays.
func (s *Store) Import(ctx context.Context, source string, export func(ctx context.Context, imp *Importer) error) (n map[string]int, done bool, err error) {
	mark := "imported:" + source
	imp := &Importer{s: s, N: map[string]int{}}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		// Two imports of one source at once: the second waits, then
		// finds the mark.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLock+1); err != nil {
			return err
		}
		var at []byte
		err := tx.QueryRow(ctx, `SELECT value FROM meta WHERE key = $1`, mark).Scan(&at)
		if err == nil {
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		imp.tx = tx
		if err := export(ctx, imp); err != nil {
			return err
		}
		done = true
		_, err = tx.Exec(ctx, `INSERT INTO meta (key, value) VALUES ($1, $2)`, mark, []byte(s.keys.now().UTC().Format(time.RFC3339)))
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: import %s: %w", source, err)
	}
	return imp.N, done, nil
}

func (i *Importer) count(kind string, err error) error {
	if err == nil {
		i.N[kind]++
	}
	return err
}

// Thread imports a thread; one already here is kept.
func (i *Importer) Thread(ctx context.Context, t bot.Thread) error {
	return i.count("threads", saveThread(ctx, i.tx, t, false))
}

// Message appends a message to its thread.
func (i *Importer) Message(ctx context.Context, m bot.Message) error {
	return i.count("messages", i.s.appendMessage(ctx, i.tx, m))
}

// Run imports a run with its transcript.
func (i *Importer) Run(ctx context.Context, r *bot.Run) error {
	return i.count("runs", i.s.saveRun(ctx, i.tx, r))
}

// Audit appends a journal entry.
func (i *Importer) Audit(ctx context.Context, e bot.AuditEntry) error {
	return i.count("audit", i.s.apply(ctx, i.tx, bot.Change{Audit: []bot.AuditEntry{e}}))
}

// Job queues a job.
func (i *Importer) Job(ctx context.Context, j bot.Job) error {
	return i.count("jobs", i.s.putJob(ctx, i.tx, j))
}

// Outbound queues a message to send.
func (i *Importer) Outbound(ctx context.Context, ob bot.Outbound) error {
	return i.count("outbox", i.s.apply(ctx, i.tx, bot.Change{Send: []bot.Outbound{ob}}))
}

// Setting imports a setting (a pending request sealed with its own key).
func (i *Importer) Setting(ctx context.Context, key, value string) error {
	if !isPending(key) {
		raw, err := json.Marshal(value)
		if err != nil {
			return err
		}
		return i.count("settings", putSetting(ctx, i.tx, key, raw, nil))
	}
	v, id, err := i.s.sealJSON(ctx, i.tx, key, value)
	if err != nil {
		return err
	}
	return i.count("settings", putSetting(ctx, i.tx, key, v, id))
}

// Snapshot imports an account's snapshot with the time of its last save.
func (i *Importer) Snapshot(ctx context.Context, key string, data []byte, used time.Time) error {
	return i.count("snapshots", i.s.putSnapshot(ctx, i.tx, key, data, used))
}

// Event imports a dedupe key.
func (i *Importer) Event(ctx context.Context, key string, at time.Time) error {
	_, err := markEvent(ctx, i.tx, key, at)
	return i.count("events", err)
}

// Timer imports a timer, unclaimed; one already here (set by a tidybot
// running on this database) is kept.
func (i *Importer) Timer(ctx context.Context, t bot.Timer) error {
	_, err := i.tx.Exec(ctx, `INSERT INTO timers (kind, key, due, data) VALUES ($1, $2, $3, $4) ON CONFLICT (kind, key) DO NOTHING`,
		t.Kind, t.Key, t.Due.UnixNano(), t.Data)
	return i.count("timers", err)
}
