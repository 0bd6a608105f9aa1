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
	s     *Store
	tx    pgx.Tx
	merge bool
	// threads are the conversations a merge added messages to;
	// skipped, the runs it left as the database had them.
	threads map[string]bool
	skipped map[string]bool
	// N counts what was written, by kind.
	N map[string]int
}

// Source names what Import copies.
type Source struct {
	// ID names the source for good (a bbolt file's FileID): once
	// copied, it is not copied again, by whatever path it is reached.
	ID string
	// Path is where it is read from: an Import before issue 35 recorded
	// the source by it.
	Path string
	// Merge copies into a database that holds conversations already.
	// Where both hold a value, the database's stays (it is the newer:
	// the source was stopped before), a run or a snapshot only if it
	// is the newer of the two, and each conversation's messages are put
	// in the order of their time. Without Merge such a database is
	// refused with ErrNotEmpty.
	Merge bool
}

// ErrNotEmpty is Import's refusal of a database that holds
// conversations already, without Source.Merge.
var ErrNotEmpty = errors.New("the database holds conversations already")

// Import runs export, which hands the contents of src to an Importer, in
// one transaction: a failure or a crash writes nothing, and running it
// again starts over. Once committed, src is recorded by its ID and a
// second Import of it does nothing (done is false), so that it can be
// run again safely. A database that holds conversations already is
// refused (ErrNotEmpty) unless src.Merge.
func (s *Store) Import(ctx context.Context, src Source, export func(ctx context.Context, imp *Importer) error) (n map[string]int, done bool, err error) {
	if src.ID == "" {
		return nil, false, errors.New("store: import: the source has no id")
	}
	marks := []string{"imported:id:" + src.ID}
	if src.Path != "" {
		marks = append(marks, "imported:"+src.Path)
	}
	imp := &Importer{s: s, merge: src.Merge, threads: map[string]bool{}, skipped: map[string]bool{}, N: map[string]int{}}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		// Two imports of one source at once: the second waits, then
		// finds the mark.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLock+1); err != nil {
			return err
		}
		var seen bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM meta WHERE key = ANY($1))`, marks).Scan(&seen); err != nil {
			return err
		}
		if seen {
			return nil
		}
		if !src.Merge {
			var used bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM threads) OR EXISTS (SELECT 1 FROM messages)
				OR EXISTS (SELECT 1 FROM runs) OR EXISTS (SELECT 1 FROM jobs) OR EXISTS (SELECT 1 FROM outbox)
				OR EXISTS (SELECT 1 FROM settings WHERE starts_with(key, $1))`, bot.PersonSettingPrefix).Scan(&used); err != nil {
				return err
			}
			if used {
				return ErrNotEmpty
			}
		}
		imp.tx = tx
		if err := export(ctx, imp); err != nil {
			return err
		}
		if err := imp.orderMessages(ctx); err != nil {
			return err
		}
		done = true
		_, err := tx.Exec(ctx, `INSERT INTO meta (key, value) VALUES ($1, $2)`, marks[0], []byte(s.keys.now().UTC().Format(time.RFC3339)))
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: import %s: %w", src.Path, err)
	}
	return imp.N, done, nil
}

// orderMessages puts the messages of each conversation a merge added to
// in the order of their time (ties in the order stored): messages are
// read in seq order, so they are stored again in that order.
func (i *Importer) orderMessages(ctx context.Context) error {
	for key := range i.threads {
		if _, err := i.tx.Exec(ctx, `WITH old AS (DELETE FROM messages WHERE thread_key = $1 RETURNING at, key_id, value, seq)
			INSERT INTO messages (thread_key, at, key_id, value) SELECT $1, at, key_id, value FROM old ORDER BY at, seq`, key); err != nil {
			return fmt.Errorf("order the messages of %s: %w", key, err)
		}
	}
	return nil
}

// newer reports, for a merge, whether the row of table (key column, its
// key) is missing or its time column is before at.
func (i *Importer) newer(ctx context.Context, table, keyCol, timeCol, key string, at time.Time) (bool, error) {
	if !i.merge {
		return true, nil
	}
	var have int64
	err := i.tx.QueryRow(ctx, `SELECT `+timeCol+` FROM `+table+` WHERE `+keyCol+` = $1`, key).Scan(&have)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", table, key, err)
	}
	return have < ns(at), nil
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

// Message appends a message to its thread (a merge orders the thread's
// messages by their time at the end).
func (i *Importer) Message(ctx context.Context, m bot.Message) error {
	if i.merge {
		i.threads[m.ThreadKey] = true
	}
	return i.count("messages", i.s.appendMessage(ctx, i.tx, m))
}

// Run imports a run with its transcript; a merge keeps the database's
// when it was updated later.
func (i *Importer) Run(ctx context.Context, r *bot.Run) error {
	ok, err := i.newer(ctx, "runs", "id", "updated", r.ID, r.Updated)
	if err != nil || !ok {
		i.skipped[r.ID] = true
		return err
	}
	return i.count("runs", i.s.saveRun(ctx, i.tx, r))
}

// Audit appends a journal entry, unless its run was kept as the
// database had it.
func (i *Importer) Audit(ctx context.Context, e bot.AuditEntry) error {
	if i.skipped[e.RunID] {
		return nil
	}
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

// Setting imports a setting (a pending request sealed with its own
// key); a merge keeps the database's.
func (i *Importer) Setting(ctx context.Context, key, value string) error {
	if i.merge {
		var have bool
		if err := i.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM settings WHERE key = $1)`, key).Scan(&have); err != nil || have {
			return err
		}
	}
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

// Snapshot imports an account's snapshot with the time of its last
// save; a merge keeps the database's when it was saved later.
func (i *Importer) Snapshot(ctx context.Context, key string, data []byte, used time.Time) error {
	if ok, err := i.newer(ctx, "snapshots", "key", "used", key, used); err != nil || !ok {
		return err
	}
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
