package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.StartReader = (*Store)(nil)

// runStoredSQL reports whether run $1 is stored (Run would find it).
const runStoredSQL = `SELECT EXISTS (SELECT FROM runs WHERE id = $1)`

// ReadStart implements bot.StartReader: the statements of WaitingRun,
// Run (whether it finds the run), Thread, RecentMessages, Setting (twice
// with a Usage key) and CancelMark, sent as one pgx batch (one round trip, no transaction:
// each reads as its own call would), their values opened and filtered
// as those calls do once the batch is read.
func (s *Store) ReadStart(ctx context.Context, q bot.StartQuery) (bot.StartReads, error) {
	var st bot.StartReads
	var waiting, msgs [][]byte
	var thread []byte
	var threadFound bool
	b := &pgx.Batch{}
	b.Queue(waitingRunSQL, q.Key).Query(func(rows pgx.Rows) error {
		var err error
		waiting, err = pgx.CollectRows(rows, pgx.RowTo[[]byte])
		return err
	})
	b.Queue(runStoredSQL, q.JobID).QueryRow(func(row pgx.Row) error {
		return row.Scan(&st.Stored)
	})
	b.Queue(threadSQL, q.Key).QueryRow(func(row pgx.Row) error {
		return scanFound(row, &threadFound, &thread)
	})
	if q.Messages > 0 { // RecentMessages reads none
		b.Queue(recentMessagesSQL, q.Key, q.Messages).Query(func(rows pgx.Rows) error {
			var err error
			msgs, err = pgx.CollectRows(rows, pgx.RowTo[[]byte])
			return err
		})
	}
	settings := []func(context.Context) error{s.settingLater(b, q.Setting, &st.Setting)}
	if q.Usage != "" {
		settings = append(settings, s.settingLater(b, q.Usage, &st.Usage))
	}
	b.Queue(cancelMarkSQL, q.Key, q.JobID, q.JobID).QueryRow(func(row pgx.Row) error {
		return row.Scan(&st.CancelMark)
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return st, fmt.Errorf("store: the reads of job %s as it begins: %w", q.JobID, err)
	}
	err := func() error {
		runs, err := decodeValues[bot.Run](ctx, s, waiting)
		if err != nil {
			return fmt.Errorf("waiting run of %s: %w", q.Key, err)
		}
		st.Waiting = firstWaiting(pointers(runs))
		if threadFound {
			var th bot.Thread
			if err := json.Unmarshal(thread, &th); err != nil {
				return fmt.Errorf("thread %s: %w", q.Key, err)
			}
			st.Thread = &th
			if q.Messages > 0 {
				ms, err := decodeValues[bot.Message](ctx, s, msgs)
				if err != nil {
					return fmt.Errorf("messages of %s: %w", q.Key, err)
				}
				st.Messages = recentSince(ms, th.ResetAt)
			}
		}
		for _, open := range settings {
			if err := open(ctx); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		return bot.StartReads{}, fmt.Errorf("store: %w", err)
	}
	return st, nil
}

// settingLater queues on b the read of setting key (settingSQL, as
// Setting reads it); open, once b is read, opens its value into v, left
// "" when the setting is not stored.
func (s *Store) settingLater(b *pgx.Batch, key string, v *string) (open func(context.Context) error) {
	var raw []byte
	var found bool
	b.Queue(settingSQL, key).QueryRow(func(row pgx.Row) error {
		return scanFound(row, &found, &raw)
	})
	return func(ctx context.Context) error {
		if !found {
			return nil
		}
		if err := s.decode(ctx, s.pool, raw, v); err != nil {
			return fmt.Errorf("setting %s: %w", key, err)
		}
		return nil
	}
}

// scanFound scans row's one column into dest, setting found unless the
// row is not there (no failure of the batch).
func scanFound(row pgx.Row, found *bool, dest any) error {
	err := row.Scan(dest)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	*found = err == nil
	return err
}
