package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store"
	"github.com/tidybot/tidybot/store/postgres"
)

// appStore is what the wiring needs of a store: bot's contract, the
// Todoist snapshots per account, and closing.
type appStore interface {
	bot.Store
	todoist.SnapshotStore
	snapshotDeleter
	Close() error
}

var (
	_ appStore = (*store.Store)(nil)
	_ appStore = (*postgres.Store)(nil)
)

// openStore opens the store cfg names: PostgreSQL at TIDYBOT_DATABASE_URL
// when set (migrated to this tidybot's schema), else bbolt at TIDYBOT_DB.
func openStore(ctx context.Context, cfg Config) (appStore, error) {
	if cfg.DatabaseURL == "" {
		sopts, err := storeOptions(cfg)
		if err != nil {
			return nil, err
		}
		st, err := store.Open(cfg.DB, sopts...)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return st, nil
	}
	st, err := openPostgres(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// openPostgres opens TIDYBOT_DATABASE_URL with TIDYBOT_SECRET_KEY.
func openPostgres(ctx context.Context, cfg Config, more ...postgres.Option) (*postgres.Store, error) {
	if cfg.SecretKey != "" {
		keys, err := secretKeys(cfg.SecretKey)
		if err != nil {
			return nil, err
		}
		more = append(more, postgres.WithSecretKeys(keys))
	}
	return postgres.Open(ctx, cfg.DatabaseURL, more...)
}

// databaseSecrets are the parts of TIDYBOT_DATABASE_URL to redact besides
// the whole: its password, which a driver's message may quote alone.
func databaseSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return nil
	}
	if p, ok := u.User.Password(); ok && p != "" {
		return []string{p}
	}
	return nil
}

// checkDatabaseURL says what is wrong with TIDYBOT_DATABASE_URL, never
// quoting it (it may hold a password).
func checkDatabaseURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return errors.New("TIDYBOT_DATABASE_URL must be a PostgreSQL URL, postgres://user:password@host:5432/database (unset: bbolt at TIDYBOT_DB)")
	}
	return nil
}

const migrateUsage = `Usage: tidybot migrate

Brings the PostgreSQL schema at TIDYBOT_DATABASE_URL to this tidybot's
version (the migrations are built in) and prints what it applied. serve
and chat migrate at start too; run this before starting several replicas
of a new version, or to check a database. A schema newer than this
tidybot is refused: upgrade tidybot. With TIDYBOT_DATABASE_URL unset
(bbolt), serve and chat migrate the file at TIDYBOT_DB themselves.
`

// migrate runs `tidybot migrate`.
func (m *Main) migrate(ctx context.Context, cfg Config) error {
	if cfg.DatabaseURL == "" {
		return errors.New("migrate: TIDYBOT_DATABASE_URL is not set (bbolt at TIDYBOT_DB is migrated by serve and chat at start)")
	}
	if err := checkDatabaseURL(cfg.DatabaseURL); err != nil {
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
	_, err = fmt.Fprintf(m.Stdout, "schema version %d\n", postgres.SchemaVersion())
	return err
}
