package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

const migrateUsage = `Usage: tidybot migrate [--from FILE [--merge]]

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
again. The file is known by an id written in it, so once done, running
it again copies nothing, whatever path (or copy of the file) is given.
A database that holds conversations already is refused; --merge copies
into it all the same: where both hold a value the database's stays (a
run or a snapshot only if it is the newer), and each conversation's
messages are put in the order of their time.
`

// migrateArgs are migrate's arguments: the bbolt file of --from ("":
// none) and --merge.
type migrateArgs struct {
	from  string
	merge bool
}

// migrateFrom parses migrate's arguments.
func migrateFrom(args []string) (migrateArgs, error) {
	var a migrateArgs
	bad := fmt.Errorf("migrate: unexpected arguments %q (try tidybot migrate -h)", args)
	for i := 0; i < len(args); i++ {
		switch arg := args[i]; {
		case arg == "--merge" || arg == "-merge":
			a.merge = true
		case strings.HasPrefix(arg, "--from=") && len(arg) > len("--from=") && a.from == "":
			a.from = strings.TrimPrefix(arg, "--from=")
		case arg == "--from" && i+1 < len(args) && args[i+1] != "" && a.from == "":
			a.from = args[i+1]
			i++
		default:
			return migrateArgs{}, bad
		}
	}
	if a.merge && a.from == "" {
		return migrateArgs{}, errors.New("migrate: --merge goes with --from FILE")
	}
	return a, nil
}

// migrate runs `tidybot migrate [--from FILE [--merge]]`.
func (m *Main) migrate(ctx context.Context, cfg Config, args []string) error {
	a, err := migrateFrom(args)
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
	if _, err := fmt.Fprintf(m.Stdout, "schema version %d\n", postgres.SchemaVersion()); err != nil || a.from == "" {
		return err
	}
	return m.importBolt(ctx, cfg, st, a)
}

var _ store.Sink = (*postgres.Importer)(nil)

// importBolt copies the bbolt file of a.from into st.
func (m *Main) importBolt(ctx context.Context, cfg Config, st *postgres.Store, a migrateArgs) error {
	path := a.from
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("migrate --from: %w", err)
	}
	id, err := boltFileID(ctx, cfg, path)
	if err != nil {
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
	n, done, err := st.Import(ctx, postgres.Source{ID: id, Path: abs, Merge: a.merge}, func(ctx context.Context, imp *postgres.Importer) error { return src.Export(ctx, imp) })
	if errors.Is(err, postgres.ErrNotEmpty) {
		return fmt.Errorf("migrate --from: the database at TIDYBOT_DATABASE_URL holds conversations already; to copy %s into it all the same, add --merge (where both hold a value the database's stays, and messages are put in time order)", abs)
	}
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

// boltFileID returns the id written in the bbolt file at path. A file
// no tidybot has written one in (all before issue 35) is opened for
// writing once, which writes it.
func boltFileID(ctx context.Context, cfg Config, path string) (string, error) {
	for range 2 {
		src, err := openBolt(cfg, path, store.ReadOnly(), store.WithLockTimeout(time.Second))
		if err != nil {
			return "", fmt.Errorf("%w (stop the tidybot using it first)", err)
		}
		id, err := src.FileID(ctx)
		if cerr := src.Close(); err == nil {
			err = cerr
		}
		if err != nil || id != "" {
			return id, err
		}
		w, err := openBolt(cfg, path, store.WithLockTimeout(time.Second))
		if err != nil {
			return "", fmt.Errorf("write an id in %s: %w (stop the tidybot using it first)", path, err)
		}
		if err := w.Close(); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("%s has no id after a write: is it read-only?", path)
}
