package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/bot"
)

// ns is t in unix nanoseconds; the zero time sorts first.
func ns(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixNano()
}

// sealJSON encodes v and seals it with scope's key.
func (s *Store) sealJSON(ctx context.Context, q querier, scope string, v any) (value, keyID []byte, err error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	return s.keys.seal(ctx, q, scope, raw)
}

// decode opens a stored value and decodes it into v.
func (s *Store) decode(ctx context.Context, q querier, raw []byte, v any) error {
	pt, err := s.keys.open(ctx, q, raw)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(pt, v); err != nil {
		return fmt.Errorf("decode value: %w", err)
	}
	return nil
}

// MarkEvent implements bot.Store.
func (s *Store) MarkEvent(ctx context.Context, key string, at time.Time) (bool, error) {
	fresh, err := markEvent(ctx, s.pool, key, at)
	if err != nil {
		return false, fmt.Errorf("store: mark event %s: %w", key, err)
	}
	return fresh, nil
}

// markEventSQL records an event key ($1) at $2 (ns), once.
const markEventSQL = `INSERT INTO events (key, at) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`

// markEvent records key; a key recorded before (by any replica) is not
// fresh. A concurrent insert of the same key waits for the other's
// transaction, so exactly one of them finds it fresh.
func markEvent(ctx context.Context, q querier, key string, at time.Time) (bool, error) {
	tag, err := q.Exec(ctx, markEventSQL, key, ns(at))
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// PruneEvents implements bot.Store.
func (s *Store) PruneEvents(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM events WHERE at < $1`, ns(before))
	if err != nil {
		return 0, fmt.Errorf("store: prune events: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// threadSQL reads conversation $1.
const threadSQL = `SELECT value FROM threads WHERE key = $1`

// Thread implements bot.Store.
func (s *Store) Thread(ctx context.Context, key string) (bot.Thread, error) {
	var t bot.Thread
	var raw []byte
	err := s.pool.QueryRow(ctx, threadSQL, key).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		err = bot.ErrNotFound
	}
	if err == nil {
		err = json.Unmarshal(raw, &t)
	}
	if err != nil {
		return bot.Thread{}, fmt.Errorf("store: thread %s: %w", key, err)
	}
	return t, nil
}

// SaveThread implements bot.Store, fenced by ctx's lease (fencedTx).
func (s *Store) SaveThread(ctx context.Context, t bot.Thread) error {
	if err := s.fencedTx(ctx, nil, nil, func(p *pipe) error { return saveThread(ctx, p, t, true) }); err != nil {
		return fmt.Errorf("store: save thread %s: %w", t.Key, err)
	}
	return nil
}

// saveThread stores t; without replace, a stored thread is kept.
func saveThread(ctx context.Context, q querier, t bot.Thread, replace bool) error {
	raw, err := json.Marshal(t)
	if err != nil {
		return err
	}
	conflict := `DO NOTHING`
	if replace {
		conflict = `DO UPDATE SET value = excluded.value`
	}
	return execLater(ctx, q, `INSERT INTO threads (key, value) VALUES ($1, $2) ON CONFLICT (key) `+conflict, t.Key, raw)
}

func (s *Store) appendMessage(ctx context.Context, q querier, m bot.Message) error {
	v, id, err := s.sealJSON(ctx, q, m.ThreadKey, m)
	if err != nil {
		return err
	}
	return execLater(ctx, q, `INSERT INTO messages (thread_key, at, key_id, value) VALUES ($1, $2, $3, $4)`, m.ThreadKey, ns(m.At), id, v)
}

// RecentMessages implements bot.Store: the thread's latest n messages
// at or after since, oldest first. Like bbolt's walk backwards, it stops
// at the first message (newest first) before since.
func (s *Store) RecentMessages(ctx context.Context, threadKey string, since time.Time, n int) ([]bot.Message, error) {
	if n <= 0 {
		return nil, nil
	}
	msgs, err := decodeAll[bot.Message](ctx, s, recentMessagesSQL, threadKey, n)
	if err != nil {
		return nil, fmt.Errorf("store: messages of %s: %w", threadKey, err)
	}
	return recentSince(msgs, since), nil
}

// recentMessagesSQL selects the latest $2 messages of conversation $1,
// newest first (recentSince keeps those of RecentMessages).
const recentMessagesSQL = `SELECT value FROM messages WHERE thread_key = $1 ORDER BY seq DESC LIMIT $2`

// recentSince returns those of msgs (recentMessagesSQL's) at or after
// since, oldest first.
func recentSince(msgs []bot.Message, since time.Time) []bot.Message {
	if i := slices.IndexFunc(msgs, func(m bot.Message) bool { return m.At.Before(since) }); i >= 0 {
		msgs = msgs[:i]
	}
	slices.Reverse(msgs)
	return msgs
}

func isPending(key string) bool { return strings.HasPrefix(key, bot.PendingPrefix) }

// settingSQL reads setting $1.
const settingSQL = `SELECT value FROM settings WHERE key = $1`

// Setting implements bot.Store.
func (s *Store) Setting(ctx context.Context, key string) (string, error) {
	var v string
	err := func() error { // no transaction: see decodeAll
		var raw []byte
		err := s.pool.QueryRow(ctx, settingSQL, key).Scan(&raw)
		if errors.Is(err, pgx.ErrNoRows) {
			return bot.ErrNotFound
		}
		if err != nil {
			return err
		}
		return s.decode(ctx, s.pool, raw, &v)
	}()
	if err != nil {
		return "", fmt.Errorf("store: setting %s: %w", key, err)
	}
	return v, nil
}

var _ bot.SettingLister = (*Store)(nil)

// SettingsWithPrefix implements bot.SettingLister.
func (s *Store) SettingsWithPrefix(ctx context.Context, prefix string) (map[string]string, error) {
	out, err := s.settingsUnder(ctx, s.pool, prefix) // no transaction: see decodeAll
	if err != nil {
		return nil, fmt.Errorf("store: settings %s*: %w", prefix, err)
	}
	return out, nil
}

// settingsUnder reads the settings whose keys start with prefix, sealed
// ones opened, with q.
func (s *Store) settingsUnder(ctx context.Context, tx querier, prefix string) (map[string]string, error) {
	recs, err := s.settingRowsUnder(ctx, tx, prefix)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(recs))
	for _, r := range recs {
		out[r.Key] = r.Value
	}
	return out, nil
}

// settingRow is a settings row as stored (Raw, sealed or not) and opened
// (Value).
type settingRow struct {
	Key   string
	Raw   []byte
	Value string
}

// settingRowsUnder reads the settings rows whose keys start with
// prefix, with q.
func (s *Store) settingRowsUnder(ctx context.Context, tx querier, prefix string) ([]settingRow, error) {
	rows, err := tx.Query(ctx, `SELECT key, value FROM settings WHERE starts_with(key, $1)`, prefix)
	if err != nil {
		return nil, err
	}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (settingRow, error) {
		var r settingRow
		return r, row.Scan(&r.Key, &r.Raw)
	})
	if err != nil {
		return nil, err
	}
	for i, r := range recs {
		if err := s.decode(ctx, tx, r.Raw, &recs[i].Value); err != nil {
			return nil, fmt.Errorf("%s: %w", r.Key, err)
		}
	}
	return recs, nil
}

// SetSetting implements bot.Store. A pending request (bot.PendingPrefix)
// is sealed with a key of its own, destroyed with the request it
// replaces; "" deletes it.
func (s *Store) SetSetting(ctx context.Context, key, value string) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if !isPending(key) && value == "" { // "" deletes: a cleared record leaves no row
			_, err := tx.Exec(ctx, `DELETE FROM settings WHERE key = $1`, key)
			return err
		}
		if !isPending(key) {
			raw, err := json.Marshal(value)
			if err != nil {
				return err
			}
			return putSetting(ctx, tx, key, raw, nil)
		}
		if err := s.deletePending(ctx, tx, key); err != nil || value == "" {
			return err
		}
		v, id, err := s.sealJSON(ctx, tx, key, value)
		if err != nil {
			return err
		}
		return putSetting(ctx, tx, key, v, id)
	})
	if err != nil {
		return fmt.Errorf("store: set %s: %w", key, err)
	}
	return nil
}

// SettingOrSet implements inspector.KeyStore. INSERT … ON CONFLICT DO
// NOTHING waits for a replica inserting the same key to commit; the
// read after it, a statement of its own (READ COMMITTED), then sees the
// row that replica kept.
func (s *Store) SettingOrSet(ctx context.Context, key, value string) (string, error) {
	if isPending(key) || value == "" {
		return "", fmt.Errorf("store: keep %s: not for a pending request or an empty value", key)
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return "", fmt.Errorf("store: keep %s: %w", key, err)
	}
	var v string
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, key, raw); err != nil {
			return err
		}
		var kept []byte
		if err := tx.QueryRow(ctx, `SELECT value FROM settings WHERE key = $1`, key).Scan(&kept); err != nil {
			return err
		}
		return s.decode(ctx, tx, kept, &v)
	})
	if err != nil {
		return "", fmt.Errorf("store: keep %s: %w", key, err)
	}
	return v, nil
}

func putSetting(ctx context.Context, q querier, key string, value, keyID []byte) error {
	return execLater(ctx, q, `INSERT INTO settings (key, key_id, value) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET key_id = excluded.key_id, value = excluded.value`, key, keyID, value)
}

// deletePending deletes a pending request and destroys its keys, the
// keys locked first (see lockKeys): a request being sealed with one
// commits before the DELETE, which then sees it.
func (s *Store) deletePending(ctx context.Context, q querier, key string) error {
	return s.deleteScoped(ctx, q, `DELETE FROM settings WHERE key = $1`, key, key)
}

// deleteScoped runs del (with arg as $1) and destroys the keys of scope,
// locked before del runs: a transaction sealing with one of them (FOR
// SHARE) commits first, and del, a statement after, deletes what it
// wrote. Deleted first, a value not committed yet would be missed and
// left sealed with the destroyed key, or its upsert would wait for the
// deleted row while the destroy waits for its key: a deadlock.
func (s *Store) deleteScoped(ctx context.Context, q querier, del string, arg any, scope string) error {
	ids, err := lockKeys(ctx, q, `scope = $1`, scope)
	if err != nil {
		return err
	}
	if _, err := q.Exec(ctx, del, arg); err != nil {
		return err
	}
	return s.keys.destroy(ctx, q, ids)
}

// fieldsInitial is the value of a setting of fields' row made to be
// locked: none.
const fieldsInitial = `""`

// addCountSQL adds $2 to numeric setting $1 (a JSON string of digits,
// as strconv.Itoa writes them); an absent or unreadable one counts from
// 0. The row is locked for the addition (ON CONFLICT DO UPDATE), so
// replicas adding at once lose no count.
const addCountSQL = `INSERT INTO settings AS s (key, value) VALUES ($1, convert_to(to_json($2::bigint::text)::text, 'UTF8'))
	ON CONFLICT (key) DO UPDATE SET key_id = NULL, value = convert_to(to_json((
		CASE WHEN encode(s.value, 'escape') ~ '^"[+-]?[0-9]{1,18}"$' THEN btrim(encode(s.value, 'escape'), '"')::bigint ELSE 0 END
		+ $2::bigint)::text)::text, 'UTF8')`

// addCounts adds to numeric settings (bot.Change.Count; see
// addCountSQL), in key order.
func addCounts(ctx context.Context, q querier, counts map[string]int) error {
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		if err := execLater(ctx, q, addCountSQL, k, counts[k]); err != nil {
			return err
		}
	}
	return nil
}

// setFields sets fields of settings holding a JSON object
// (bot.Change.Fields). The row is locked while it is merged, so
// replicas changing other fields at once lose none.
func setFields(ctx context.Context, q querier, fields map[string]map[string]json.RawMessage) error {
	for _, k := range fieldKeys(fields) {
		f := fields[k]
		// A row to lock, also for a setting not there yet ("" is none).
		raw, err := lockedSetting(ctx, q, k, fieldsInitial)
		if err != nil {
			return err
		}
		var old string
		if err := json.Unmarshal(raw, &old); err != nil {
			continue // unreadable: left as it is (bot.MergeFields)
		}
		v, changed, err := bot.MergeFields(old, f)
		if err != nil {
			return err
		}
		if !changed {
			continue
		}
		next, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := putSetting(ctx, q, k, next, nil); err != nil {
			return err
		}
		if p, ok := q.(*pipe); ok && p.rows != nil {
			// What a later merge in the same transaction (a Change of
			// the same group) starts from.
			p.rows[k] = next
		}
	}
	return nil
}

// fieldKeys are the keys of fields with a field to set, in order.
func fieldKeys(fields map[string]map[string]json.RawMessage) []string {
	var out []string
	for k, f := range fields {
		if len(f) > 0 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// LoadSnapshot implements todoist.SnapshotStore.
func (s *Store) LoadSnapshot(ctx context.Context, key string) ([]byte, error) {
	var out []byte
	err := func() error { // no transaction: see decodeAll
		var raw []byte
		err := s.pool.QueryRow(ctx, `SELECT value FROM snapshots WHERE key = $1`, key).Scan(&raw)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		out, err = s.keys.open(ctx, s.pool, raw)
		return err
	}()
	if err != nil {
		return nil, fmt.Errorf("store: load snapshot: %w", err)
	}
	return out, nil
}

// SaveSnapshot implements todoist.SnapshotStore: sealed with its
// account's key, and dated for retention.
func (s *Store) SaveSnapshot(ctx context.Context, key string, data []byte) error {
	err := s.tx(ctx, func(tx pgx.Tx) error { return s.putSnapshot(ctx, tx, key, data, s.keys.now()) })
	if err != nil {
		return fmt.Errorf("store: save snapshot: %w", err)
	}
	return nil
}

// putSnapshot stores an account's snapshot sealed with its key, dated
// used.
func (s *Store) putSnapshot(ctx context.Context, q querier, key string, data []byte, used time.Time) error {
	v, id, err := s.keys.seal(ctx, q, scopeSnapshot+key, data)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO snapshots (key, used, key_id, value) VALUES ($1, $2, $3, $4)
		ON CONFLICT (key) DO UPDATE SET used = excluded.used, key_id = excluded.key_id, value = excluded.value`, key, ns(used), id, v)
	return err
}

// DeleteSnapshot deletes an account's snapshot and destroys its keys
// (team mode's /disconnect).
func (s *Store) DeleteSnapshot(ctx context.Context, key string) error {
	if err := s.tx(ctx, func(tx pgx.Tx) error { return s.deleteSnapshot(ctx, tx, key) }); err != nil {
		return fmt.Errorf("store: delete snapshot: %w", err)
	}
	return nil
}

func (s *Store) deleteSnapshot(ctx context.Context, q querier, key string) error {
	return s.deleteScoped(ctx, q, `DELETE FROM snapshots WHERE key = $1`, key, scopeSnapshot+key)
}
