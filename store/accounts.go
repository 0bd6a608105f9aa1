package store

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/bot"
)

// Setting implements bot.Store.
func (s *Store) Setting(ctx context.Context, key string) (string, error) {
	var v string
	err := s.view(ctx, func(tx *bolt.Tx) error {
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

var _ bot.SettingLister = (*Store)(nil)

// SettingsWithPrefix implements bot.SettingLister.
func (s *Store) SettingsWithPrefix(ctx context.Context, prefix string) (map[string]string, error) {
	out := map[string]string{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketSettings).Cursor()
		for k, raw := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, raw = c.Next() {
			if raw == nil {
				continue // a nested bucket
			}
			var v string
			if err := s.decodeSealed(tx, raw, &v); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			out[string(k)] = v
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: settings %s*: %w", prefix, err)
	}
	return out, nil
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
		if value == "" { // "" deletes: a cleared record leaves no row
			return tx.Bucket(bucketSettings).Delete([]byte(key))
		}
		return put(tx.Bucket(bucketSettings), []byte(key), value)
	})
	if err != nil {
		return fmt.Errorf("store: set %s: %w", key, err)
	}
	return nil
}

// SettingOrSet implements inspector.KeyStore: the read and the write
// are one update, and bbolt runs one update at a time.
func (s *Store) SettingOrSet(ctx context.Context, key, value string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if isPending(key) || value == "" {
		return "", fmt.Errorf("store: keep %s: not for a pending request or an empty value", key)
	}
	v := value
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSettings)
		if raw := b.Get([]byte(key)); raw != nil {
			return s.decodeSealed(tx, raw, &v)
		}
		return put(b, []byte(key), value)
	})
	if err != nil {
		return "", fmt.Errorf("store: keep %s: %w", key, err)
	}
	return v, nil
}

// setPending stores a pending request sealed with a key of its own,
// destroying the key of the one it replaces; "" deletes it.
func (s *Store) setPending(tx *bolt.Tx, key, value string) error {
	if err := s.deletePending(tx, key); err != nil || value == "" {
		return err
	}
	return s.putSealed(tx, tx.Bucket(bucketSettings), []byte(key), key, value)
}

// deletePending deletes a pending request and destroys its keys.
func (s *Store) deletePending(tx *bolt.Tx, key string) error {
	if err := tx.Bucket(bucketSettings).Delete([]byte(key)); err != nil {
		return err
	}
	return s.keys.destroyScope(tx, key)
}

func isPending(key string) bool { return strings.HasPrefix(key, scopePending) }

// LoadSnapshot implements todoist.SnapshotStore.
func (s *Store) LoadSnapshot(ctx context.Context, key string) ([]byte, error) {
	var out []byte
	err := s.view(ctx, func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketSnapshots).Get([]byte(key))
		if raw == nil {
			return nil
		}
		pt, err := s.keys.open(tx, raw)
		out = bytes.Clone(pt)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: load snapshot: %w", err)
	}
	return out, nil
}

// SaveSnapshot implements todoist.SnapshotStore: the snapshot is sealed
// with its account's key, and the time is kept for retention (Prune
// deletes a snapshot not saved for that long).
func (s *Store) SaveSnapshot(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		sealed, err := s.keys.seal(tx, scopeSnapshot+key, data)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketSnapshots).Put([]byte(key), sealed); err != nil {
			return err
		}
		return tx.Bucket(bucketSnapshotUsed).Put([]byte(key), u64(uint64(s.keys.now().UnixNano())))
	})
	if err != nil {
		return fmt.Errorf("store: save snapshot: %w", err)
	}
	return nil
}

// DeleteSnapshot deletes an account's snapshot and destroys its keys
// (team mode's /disconnect).
func (s *Store) DeleteSnapshot(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.update(ctx, func(tx *bolt.Tx) error { return s.deleteSnapshot(tx, []byte(key)) })
	if err != nil {
		return fmt.Errorf("store: delete snapshot: %w", err)
	}
	return nil
}

func (s *Store) deleteSnapshot(tx *bolt.Tx, key []byte) error {
	if err := tx.Bucket(bucketSnapshots).Delete(key); err != nil {
		return err
	}
	if err := tx.Bucket(bucketSnapshotUsed).Delete(key); err != nil {
		return err
	}
	return s.keys.destroyScope(tx, scopeSnapshot+string(key))
}
