package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/inspector"
	"github.com/tidybot/tidybot/internal/config"
	"github.com/tidybot/tidybot/store"
	"github.com/tidybot/tidybot/store/postgres"
	"github.com/tidybot/tidybot/web"
)

var _ inspector.Source = (*store.Store)(nil)

// linkKey returns the key that signs run links (see inspector.LinkKey):
// from TIDYBOT_SECRET_KEY's current key when set, else generated and
// kept in the database; without create, a key not yet generated is an
// error (a read-only database).
func linkKey(ctx context.Context, cfg Config, st inspector.KeyStore, create bool) ([]byte, error) {
	var secret []byte
	if cfg.SecretKey != "" {
		ks, err := config.SecretKeys(cfg.SecretKey) // the first: the current key (a rotation lists new,old)
		if err != nil {
			return nil, err
		}
		secret = ks[0]
	}
	key, err := inspector.LinkKey(ctx, secret, st, create)
	if errors.Is(err, inspector.ErrDamagedLinkKey) {
		return nil, fmt.Errorf("the run link key kept in %s is damaged: set TIDYBOT_SECRET_KEY", cfg.DB)
	}
	return key, err
}

func linkTTL(cfg Config) time.Duration {
	if cfg.RunLinkTTL == 0 {
		return inspector.DefaultTTL
	}
	return cfg.RunLinkTTL
}

// inspect sets up the run inspector of serve: it returns the signed
// run pages' handler, and sets the Details links of final messages when
// TIDYBOT_PUBLIC_URL is set.
func (m *Main) inspect(ctx context.Context, cfg Config, log *slog.Logger) (http.Handler, error) {
	key, err := linkKey(ctx, cfg, m.store, true)
	if err != nil {
		return nil, err
	}
	signer, err := inspector.NewSigner(key, nil)
	if err != nil {
		return nil, err
	}
	m.signer = signer
	pages := inspector.NewHandler(m.store, signer, m.redact, log)
	if cfg.PublicURL == "" {
		log.Info("run pages: no TIDYBOT_PUBLIC_URL, so final messages carry no Details link (tidybot runs shows runs in the terminal; tidybot runs link ID prints a page address here)")
		return pages, nil
	}
	base, ttl := cfg.PublicURL, linkTTL(cfg)
	m.link = func(r *bot.Run) string { return signer.Link(base, r.ID, ttl) }
	return pages, nil
}

// runLink is the bot's RunLink: set by inspect before the bot starts.
func (m *Main) runLink(r *bot.Run) string {
	if m.link == nil {
		return ""
	}
	return m.link(r)
}

// socketPath is where serve answers `tidybot runs` while it holds the
// database: a unix socket beside it, reachable by those who may read it.
func socketPath(db string) string { return db + ".sock" }

// runsText is what serve answers `tidybot runs` with on the socket
// beside the database; run links point at serve's addr.
func (m *Main) runsText(cfg Config, addr string) http.Handler {
	base, ttl, signer := cfg.PageBase(addr), linkTTL(cfg), m.signer
	link := func(id string) string { return signer.Link(base, id, ttl) }
	return inspector.TextHandler(m.store, m.redact, nil, link)
}

// runs prints recent runs or one run's timeline. It reads the database
// itself, or, while serve holds it, asks serve on the socket beside it.
// PostgreSQL (TIDYBOT_DATABASE_URL) is read beside serve.
func (m *Main) runs(ctx context.Context, cfg Config, args []string) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "help") {
		_, err := io.WriteString(m.Stdout, inspector.TextUsage)
		return err
	}
	path, err := inspector.TextPath(args)
	if err != nil {
		return err
	}
	st, err := m.runsStore(ctx, cfg)
	if errors.Is(err, store.ErrInUse) {
		return m.runsFromServe(ctx, cfg, path)
	}
	if err != nil {
		return err
	}
	m.closers = append(m.closers, st.Close)
	// The same handler serve answers with, called in process.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	var link func(string) string
	if key, err := linkKey(ctx, cfg, st, false); err == nil {
		signer, err := inspector.NewSigner(key, nil)
		if err != nil {
			return err
		}
		base, ttl := cfg.PageBase(cfg.HTTPAddr), linkTTL(cfg)
		link = func(id string) string { return signer.Link(base, id, ttl) }
	} else if len(args) > 0 && args[0] == "link" {
		return fmt.Errorf("runs: %w", err)
	}
	if err := web.Call(inspector.TextHandler(st, m.redact, nil, link), req, m.Stdout); err != nil {
		return fmt.Errorf("runs: %w", err)
	}
	return nil
}

// runsFromServe asks the running serve over its socket.
func (m *Main) runsFromServe(ctx context.Context, cfg Config, path string) error {
	sock := socketPath(cfg.DB)
	err := web.GetSocket(ctx, sock, path, m.Stdout)
	var no *web.NoAnswerError
	if errors.As(err, &no) {
		return fmt.Errorf("runs: %s is in use and the serve holding it does not answer on %s: %w", cfg.DB, sock, no.Err)
	}
	var bad *web.StatusError
	if errors.As(err, &bad) {
		return fmt.Errorf("runs: %s", bad.Body)
	}
	return err
}

// runsStore opens the store for reading: PostgreSQL at
// TIDYBOT_DATABASE_URL (of this tidybot's schema, not migrated), else the
// bbolt file, failing with store.ErrInUse while serve holds it.
func (m *Main) runsStore(ctx context.Context, cfg Config) (appStore, error) {
	if cfg.DatabaseURL != "" {
		if err := config.CheckDatabaseURL(cfg.DatabaseURL); err != nil {
			return nil, err
		}
		st, err := openPostgres(ctx, cfg, postgres.WithoutMigrate())
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	if _, err := os.Stat(cfg.DB); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("runs: no database at %s (TIDYBOT_DB): no run yet, or set TIDYBOT_DB to serve's", cfg.DB)
	}
	st, err := openBolt(cfg, cfg.DB, store.ReadOnly(), store.WithLockTimeout(300*time.Millisecond))
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return st, nil
}
