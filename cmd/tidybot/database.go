package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/tidybot/tidybot/accounts"
	"github.com/tidybot/tidybot/adapters/telegram"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/inspector"
	"github.com/tidybot/tidybot/internal/config"
	"github.com/tidybot/tidybot/internal/migratecmd"
	"github.com/tidybot/tidybot/store"
	"github.com/tidybot/tidybot/store/postgres"
)

// appStore is what the wiring needs of a store: bot's contract, the
// Todoist snapshots per account, Telegram's polling lead and offset,
// the run link key, and closing.
type appStore interface {
	bot.Store
	inspector.KeyStore
	todoist.SnapshotStore
	accounts.SnapshotDeleter
	telegram.Leader
	telegram.Offsets
	Close() error
}

var (
	_ appStore = (*store.Store)(nil)
	_ appStore = (*postgres.Store)(nil)
)

// openStore opens the store cfg names: PostgreSQL at TIDYBOT_DATABASE_URL
// when set (migrated to this tidybot's schema, with the options more),
// else bbolt at TIDYBOT_DB.
func openStore(ctx context.Context, cfg Config, more ...postgres.Option) (appStore, error) {
	if cfg.DatabaseURL == "" {
		st, err := openBolt(cfg, cfg.DB)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return st, nil
	}
	// Several serve replicas share it (bot.Shared: a lease per conversation).
	st, err := openPostgres(ctx, cfg, more...)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// storeLog makes PostgreSQL log to log what it repairs on its own (a job
// dropped, data keys sealed again during a rotation).
func storeLog(log *slog.Logger) postgres.Option { return postgres.WithLogger(log) }

// openPostgres opens TIDYBOT_DATABASE_URL with TIDYBOT_SECRET_KEY.
func openPostgres(ctx context.Context, cfg Config, more ...postgres.Option) (*postgres.Store, error) {
	if cfg.SecretKey != "" {
		keys, err := config.SecretKeys(cfg.SecretKey)
		if err != nil {
			return nil, err
		}
		more = append(more, postgres.WithSecretKeys(keys))
	}
	return postgres.Open(ctx, cfg.DatabaseURL, more...)
}

// migrate runs `tidybot migrate [--from FILE [--merge]]`.
func (m *Main) migrate(ctx context.Context, cfg Config, args []string) error {
	a, err := migratecmd.Parse(args)
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		return errors.New("migrate: TIDYBOT_DATABASE_URL is not set (bbolt at TIDYBOT_DB is migrated by serve and chat at start)")
	}
	if err := config.CheckDatabaseURL(cfg.DatabaseURL); err != nil {
		return err
	}
	st, err := openPostgres(ctx, cfg)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer st.Close()
	// Open migrated it; say what it did.
	if applied := st.Applied(); len(applied) > 0 {
		fmt.Fprintf(m.Stdout, "applied migrations %v\n", applied)
	}
	if _, err := fmt.Fprintf(m.Stdout, "schema version %d\n", postgres.SchemaVersion()); err != nil || a.From == "" {
		return err
	}
	return migratecmd.Import(ctx, m.Stdout, st, a, func(path string, more ...store.Option) (*store.Store, error) {
		return openBolt(cfg, path, more...)
	})
}
