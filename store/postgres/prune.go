package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/seal"
)

// busy is the SQL condition of a run in progress, which Prune and
// DeleteConversation keep (a worker owns it).
const busy = `status IN ('working', 'queued')`

// sealedColumn is a column of sealed values with the column naming their
// key.
type sealedColumn struct{ table, pk, value, keyID string }

// sealedColumns lists every column that may hold a sealed value.
var sealedColumns = []sealedColumn{
	{"messages", "seq", "value", "key_id"},
	{"runs", "id", "value", "key_id"},
	{"runs", "id", "transcript", "transcript_key_id"},
	{"jobs", "seq", "value", "key_id"},
	{"audit", "seq", "value", "key_id"},
	{"settings", "key", "value", "key_id"},
	{"outbox", "seq", "value", "key_id"},
	{"snapshots", "key", "value", "key_id"},
	{"slack_hooks", "seq", "url", "key_id"},
}

// resealAndDestroy seals again, with their scope's current key, the
// values the keys ids still seal, then destroys those keys.
func (s *Store) resealAndDestroy(ctx context.Context, tx querier, ids [][]byte) error {
	ids, err := lockKeys(ctx, tx, `id = ANY($1)`, ids)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT id, scope FROM data_keys WHERE id = ANY($1)`, ids)
	if err != nil {
		return err
	}
	scopes := map[string]string{}
	var id []byte
	var scope string
	if _, err := pgx.ForEachRow(rows, []any{&id, &scope}, func() error { scopes[string(id)] = scope; return nil }); err != nil {
		return err
	}
	// A scope's next value must not take a key about to go.
	if _, err := tx.Exec(ctx, `DELETE FROM current_keys WHERE id = ANY($1)`, ids); err != nil {
		return err
	}
	for _, c := range sealedColumns {
		rows, err := tx.Query(ctx, fmt.Sprintf(`SELECT %s::text, %s FROM %s WHERE %s = ANY($1) FOR UPDATE`, c.pk, c.value, c.table, c.keyID), ids)
		if err != nil {
			return fmt.Errorf("%s: %w", c.table, err)
		}
		type rec struct {
			PK  string
			Raw []byte
		}
		recs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rec])
		if err != nil {
			return fmt.Errorf("%s: %w", c.table, err)
		}
		for _, r := range recs {
			pt, err := s.keys.open(ctx, tx, r.Raw)
			if err != nil {
				return fmt.Errorf("%s %s: %w", c.table, r.PK, err)
			}
			v, kid, err := s.keys.seal(ctx, tx, scopes[string(seal.KeyID(r.Raw))], pt)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf(`UPDATE %s SET %s = $2, %s = $3 WHERE %s::text = $1`, c.table, c.value, c.keyID, c.pk), r.PK, v, kid); err != nil {
				return fmt.Errorf("%s %s: %w", c.table, r.PK, err)
			}
		}
	}
	return s.keys.destroy(ctx, tx, ids)
}

// DeleteConversation implements bot.Store, in one transaction: the
// thread's messages and its runs (with transcripts and journals) except
// those working or queued go, and the conversation's data keys are
// destroyed, the values kept (those runs, the thread's jobs) being
// sealed again with a new key first. It is fenced by ctx's lease
// (fencedTx), as every write of a /reset.
func (s *Store) DeleteConversation(ctx context.Context, threadKey string) error {
	err := s.fencedTx(ctx, nil, nil, func(tx *pipe) error {
		scope := scopeOf(threadKey)
		// The keys first (see lockKeys): a message being stored with
		// one commits before what follows reads the conversation.
		ids, err := lockKeys(ctx, tx, `scope = $1`, scope)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM messages WHERE thread_key = $1`, threadKey); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM audit WHERE run_id IN (SELECT id FROM runs WHERE thread_key = $1 AND NOT `+busy+`)`, threadKey); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM runs WHERE thread_key = $1 AND NOT `+busy, threadKey); err != nil {
			return err
		}
		return s.resealAndDestroy(ctx, tx, ids)
	})
	if err != nil {
		return fmt.Errorf("store: delete conversation %s: %w", threadKey, err)
	}
	return nil
}

// Prune implements bot.Store. It also deletes the expired Slack
// response_urls, the pending requests made
// before t, the Todoist snapshots last saved before t, and the data keys
// of periods that ended before t (sealing again with a current key the
// few values still sealed with one). A message whose key is gone is
// unreadable already: it goes too.
func (s *Store) Prune(ctx context.Context, before time.Time) (bot.Pruned, error) {
	var n bot.Pruned
	err := s.tx(ctx, func(tx pgx.Tx) error {
		n = bot.Pruned{}
		tag, err := tx.Exec(ctx, `DELETE FROM messages WHERE at < $1
			OR (key_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM data_keys WHERE data_keys.id = messages.key_id))`, ns(before))
		if err != nil {
			return fmt.Errorf("messages: %w", err)
		}
		n.Messages = int(tag.RowsAffected())
		old := `SELECT id FROM runs WHERE NOT ` + busy + ` AND updated < $1`
		if tag, err = tx.Exec(ctx, `DELETE FROM audit WHERE run_id IN (`+old+`)`, ns(before)); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		n.Audit = int(tag.RowsAffected())
		if tag, err = tx.Exec(ctx, `DELETE FROM runs WHERE NOT `+busy+` AND updated < $1`, ns(before)); err != nil {
			return fmt.Errorf("runs: %w", err)
		}
		n.Runs = int(tag.RowsAffected())
		if _, err := tx.Exec(ctx, `DELETE FROM slack_hooks WHERE expires <= $1`, ns(s.keys.now())); err != nil {
			return fmt.Errorf("response_urls: %w", err)
		}
		if err := s.prunePending(ctx, tx, before); err != nil {
			return fmt.Errorf("pending requests: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT key FROM snapshots WHERE used < $1`, ns(before))
		if err != nil {
			return fmt.Errorf("snapshots: %w", err)
		}
		snaps, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("snapshots: %w", err)
		}
		for _, k := range snaps {
			if err := s.deleteSnapshot(ctx, tx, k); err != nil {
				return fmt.Errorf("snapshots: %w", err)
			}
		}
		now := seal.PeriodOf(s.keys.now())
		rows, err = tx.Query(ctx, `SELECT id FROM data_keys WHERE period <> $1 AND period + $2 <= $3`,
			now, int64(seal.KeyPeriod/time.Second), before.Unix())
		if err != nil {
			return fmt.Errorf("data keys: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
		if err != nil {
			return fmt.Errorf("data keys: %w", err)
		}
		return s.resealAndDestroy(ctx, tx, ids)
	})
	if err != nil {
		return bot.Pruned{}, fmt.Errorf("store: prune: %w", err)
	}
	return n, nil
}

// prunePending deletes the pending requests made before t; one that
// does not say when it was made is as old as can be. They are read
// without a lock: a request replaced meanwhile (the person asked again,
// its SetSetting committed between the read and the delete) is not the
// one read, and stays, with its key; only the row as read is deleted,
// its keys locked first as deletePending does.
func (s *Store) prunePending(ctx context.Context, tx pgx.Tx, before time.Time) error {
	pending, err := s.settingRowsUnder(ctx, tx, bot.PendingPrefix)
	if err != nil {
		return err
	}
	for _, r := range pending {
		var p struct {
			At time.Time `json:"at"`
		}
		if r.Value != "" && json.Unmarshal([]byte(r.Value), &p) == nil && !p.At.Before(before) {
			continue
		}
		ids, err := lockKeys(ctx, tx, `scope = $1`, scopeOf(r.Key))
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM settings WHERE key = $1 AND value = $2`, r.Key, r.Raw)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			continue // replaced or taken meanwhile: its keys are the new request's, or gone
		}
		if err := s.keys.destroy(ctx, tx, ids); err != nil {
			return err
		}
	}
	return nil
}
