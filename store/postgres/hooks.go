package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SaveHook implements adapters/slack.Hooks and adapters/discord.Hooks:
// url becomes a response_url (or a Discord interaction's token, its
// channel key starting with "discord:") of person in channel until
// expires, sealed, bound to no run, with no use counted. The expired ones of every channel go in the same
// transaction.
func (s *Store) SaveHook(ctx context.Context, channel, person, url string, expires time.Time) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM slack_hooks WHERE expires <= $1`, ns(s.keys.now())); err != nil {
			return err
		}
		v, kid, err := s.keys.seal(ctx, tx, "", []byte(url))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO slack_hooks (channel, person, url, key_id, expires) VALUES ($1, $2, $3, $4, $5)`,
			channel, person, v, kid, ns(expires))
		return err
	})
	if err != nil {
		return fmt.Errorf("store: save a response_url of %s in %s: %w", person, channel, err)
	}
	return nil
}

// TakeHook implements adapters/slack.Hooks and adapters/discord.Hooks. The row is picked and
// locked, then counted only while fewer than within uses are taken (the
// UPDATE checks again after any wait for the lock), so replicas taking
// uses at once never take more than within between them, and two runs
// never bind the same one.
func (s *Store) TakeHook(ctx context.Context, channel, person, run string, within int, now time.Time) (string, bool, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `WITH pick AS (
			SELECT seq FROM slack_hooks
			WHERE channel = $1 AND person = $2 AND (run_id = $3::text OR run_id = '') AND expires > $4 AND used < $5
			ORDER BY run_id = $3::text DESC, seq DESC LIMIT 1 FOR UPDATE)
		UPDATE slack_hooks h SET used = h.used + 1, run_id = CASE WHEN $3::text = '' THEN h.run_id ELSE $3::text END
		FROM pick WHERE h.seq = pick.seq AND h.used < $5 AND (h.run_id = $3::text OR h.run_id = '')
		RETURNING h.url`, channel, person, run, ns(now), within).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("store: take a response_url of %s in %s: %w", person, channel, err)
	}
	pt, err := s.keys.open(ctx, s.pool, raw)
	if err != nil {
		return "", false, fmt.Errorf("store: open a response_url of %s in %s: %w", person, channel, err)
	}
	return string(pt), true, nil
}
