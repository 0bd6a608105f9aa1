package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/tidybot/tidybot/accounts"
	"github.com/tidybot/tidybot/adapters/telegram"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/inspector"
	"github.com/tidybot/tidybot/internal/config"
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
// when set (migrated to this tidybot's schema), else bbolt at TIDYBOT_DB.
func openStore(ctx context.Context, cfg Config) (appStore, error) {
	if cfg.DatabaseURL == "" {
		st, err := openBolt(cfg, cfg.DB)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return st, nil
	}
	// Several serve replicas share it (bot.Shared: a lease per conversation).
	st, err := openPostgres(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return st, nil
}

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

const migrateUsage = `Usage: tidybot migrate [--from FILE]

Brings the PostgreSQL schema at TIDYBOT_DATABASE_URL to this tidybot's
version (the migrations are built in) and prints what it applied. serve
and chat migrate at start too; run this before starting several replicas
of a new version, or to check a database. A schema newer than this
tidybot is refused: upgrade tidybot. With TIDYBOT_DATABASE_URL unset
(bbolt), serve and chat migrate the file at TIDYBOT_DB themselves.

--from FILE copies a bbolt database (TIDYBOT_DB of a tidybot that ran
without PostgreSQL) into TIDYBOT_DATABASE_URL: threads, messages, runs
with their transcripts and journals, jobs, the outbox, settings (team
mode's sealed tokens included: keep TIDYBOT_SECRET_KEY), Todoist
snapshots, dedupe keys and timers (digests, autopilot). Stop the tidybot using FILE first. The copy is
one transaction: if it fails, nothing is written and it can be run
again; once done, running it again copies nothing.
`

// migrateFrom parses migrate's arguments: the bbolt file of --from, or "".
func migrateFrom(args []string) (string, error) {
	switch {
	case len(args) == 0:
		return "", nil
	case len(args) == 1 && strings.HasPrefix(args[0], "--from=") && len(args[0]) > len("--from="):
		return strings.TrimPrefix(args[0], "--from="), nil
	case len(args) == 2 && args[0] == "--from" && args[1] != "":
		return args[1], nil
	}
	return "", fmt.Errorf("migrate: unexpected arguments %q (try tidybot migrate -h)", args)
}

// migrate runs `tidybot migrate [--from FILE]`.
func (m *Main) migrate(ctx context.Context, cfg Config, args []string) error {
	from, err := migrateFrom(args)
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
	if _, err := fmt.Fprintf(m.Stdout, "schema version %d\n", postgres.SchemaVersion()); err != nil || from == "" {
		return err
	}
	return m.importBolt(ctx, cfg, st, from)
}

var _ store.Sink = (*postgres.Importer)(nil)

// importBolt copies the bbolt file at path into st.
func (m *Main) importBolt(ctx context.Context, cfg Config, st *postgres.Store, path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("migrate --from: %w", err)
	}
	src, err := openBolt(cfg, path, store.ReadOnly(), store.WithLockTimeout(time.Second))
	if err != nil {
		return fmt.Errorf("migrate --from: %w (stop the tidybot using it first)", err)
	}
	defer src.Close()
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	n, done, err := st.Import(ctx, abs, func(ctx context.Context, imp *postgres.Importer) error { return src.Export(ctx, imp) })
	if err != nil {
		return fmt.Errorf("migrate --from: %w", err)
	}
	if !done {
		_, err = fmt.Fprintf(m.Stdout, "%s was copied before: nothing to do\n", abs)
		return err
	}
	kinds := make([]string, 0, len(n))
	for k, v := range n {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(kinds)
	_, err = fmt.Fprintf(m.Stdout, "copied %s: %s\n", abs, strings.Join(kinds, ", "))
	return err
}
