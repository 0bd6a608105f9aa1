package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SaveHook implements adapters/slack.Hooks: url becomes channel's
// response_url until expires, sealed, with no use counted. The expired
// ones of every channel go in the same transaction.
func (s *Store) SaveHook(ctx context.Context, channel, url string, expires time.Time) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM slack_hooks WHERE expires <= $1`, ns(s.keys.now())); err != nil {
			return err
		}
		v, kid, err := s.keys.seal(ctx, tx, "", []byte(url))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO slack_hooks (channel, url, key_id, expires, used) VALUES ($1, $2, $3, $4, 0)
			ON CONFLICT (channel) DO UPDATE SET url = excluded.url, key_id = excluded.key_id, expires = excluded.expires, used = 0`,
			channel, v, kid, ns(expires))
		return err
	})
	if err != nil {
		return fmt.Errorf("store: save the response_url of %s: %w", channel, err)
	}
	return nil
}

// TakeHook implements adapters/slack.Hooks: one UPDATE counts the use
// only while fewer than within are taken, so replicas taking uses at
// once never take more than within between them.
func (s *Store) TakeHook(ctx context.Context, channel string, within int, now time.Time) (string, bool, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `UPDATE slack_hooks SET used = used + 1
		WHERE channel = $1 AND expires > $2 AND used < $3 RETURNING url`, channel, ns(now), within).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("store: take the response_url of %s: %w", channel, err)
	}
	pt, err := s.keys.open(ctx, s.pool, raw)
	if err != nil {
		return "", false, fmt.Errorf("store: open the response_url of %s: %w", channel, err)
	}
	return string(pt), true, nil
}
