package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/inspector"
	"github.com/tidybot/tidybot/store"
	"github.com/tidybot/tidybot/store/postgres"
)

var _ inspector.Source = (*store.Store)(nil)

// settingLinkKey is the setting that keeps the generated signing key
// when TIDYBOT_SECRET_KEY is unset.
const settingLinkKey = "run_link_key"

// linkKey returns the key that signs run links: derived from
// TIDYBOT_SECRET_KEY when set (so the same secret can serve other
// purposes without the link key revealing it), else from a random key
// generated at first start and kept in the database.
func linkKey(ctx context.Context, cfg Config, st bot.Store) ([]byte, error) {
	return deriveLinkKey(ctx, cfg, st, true)
}

// deriveLinkKey is linkKey; without create, a key not yet generated is
// an error (a read-only database).
func deriveLinkKey(ctx context.Context, cfg Config, st linkKeyStore, create bool) ([]byte, error) {
	var base []byte
	if cfg.SecretKey != "" {
		ks, err := secretKeys(cfg.SecretKey) // the first: the current key (a rotation lists new,old)
		if err != nil {
			return nil, err
		}
		base = ks[0]
	} else {
		v, err := st.Setting(ctx, settingLinkKey)
		switch {
		case err == nil:
			if base, err = base64.StdEncoding.DecodeString(v); err != nil || len(base) != 32 {
				return nil, fmt.Errorf("the run link key kept in %s is damaged: set TIDYBOT_SECRET_KEY", cfg.DB)
			}
		case errors.Is(err, bot.ErrNotFound) && !create:
			return nil, errors.New("no run link key yet: start tidybot serve once, or set TIDYBOT_SECRET_KEY")
		case errors.Is(err, bot.ErrNotFound):
			base = make([]byte, 32)
			if _, err := rand.Read(base); err != nil {
				return nil, fmt.Errorf("generate the run link key: %w", err)
			}
			if err := st.SetSetting(ctx, settingLinkKey, base64.StdEncoding.EncodeToString(base)); err != nil {
				return nil, fmt.Errorf("keep the run link key: %w", err)
			}
		default:
			return nil, fmt.Errorf("read the run link key: %w", err)
		}
	}
	m := hmac.New(sha256.New, base)
	m.Write([]byte("tidybot run links v1"))
	return m.Sum(nil), nil
}

// linkKeyStore is where a generated link key is kept.
type linkKeyStore interface {
	Setting(ctx context.Context, key string) (string, error)
	SetSetting(ctx context.Context, key, value string) error
}

// pageBase is the address run links start with: TIDYBOT_PUBLIC_URL, else
// serve's own address on this machine (for a tunnel or a local browser).
func pageBase(cfg Config, addr string) string {
	if cfg.PublicURL != "" {
		return cfg.PublicURL
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func linkTTL(cfg Config) time.Duration {
	if cfg.RunLinkTTL == 0 {
		return inspector.DefaultTTL
	}
	return cfg.RunLinkTTL
}

// inspect sets up the run inspector of serve: the signed page on mux and
// the Details links of final messages when TIDYBOT_PUBLIC_URL is set.
func (m *Main) inspect(ctx context.Context, cfg Config, log *slog.Logger, mux *http.ServeMux) error {
	key, err := linkKey(ctx, cfg, m.store)
	if err != nil {
		return err
	}
	signer, err := inspector.NewSigner(key, nil)
	if err != nil {
		return err
	}
	mux.Handle("GET /runs/{id}", inspector.NewHandler(m.store, signer, m.redact, log))
	m.signer = signer
	if cfg.PublicURL == "" {
		log.Info("run pages: no TIDYBOT_PUBLIC_URL, so final messages carry no Details link (tidybot runs shows runs in the terminal; tidybot runs link ID prints a page address here)")
		return nil
	}
	base, ttl := cfg.PublicURL, linkTTL(cfg)
	m.link = func(r *bot.Run) string { return signer.Link(base, r.ID, ttl) }
	return nil
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

// serveSocket answers `tidybot runs` on the socket beside the database.
// It returns the server, or nil when the socket cannot be made (logged:
// runs then says so).
func (m *Main) serveSocket(cfg Config, addr string, log *slog.Logger, errc chan<- error) *http.Server {
	path := socketPath(cfg.DB)
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		_ = os.Remove(path) // left by a serve that was killed; we hold the database now
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		log.Warn("tidybot runs will not work while serve runs: no socket beside the database", slog.String("path", path), slog.Any("err", err))
		return nil
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		log.Warn("tidybot runs will not work while serve runs: socket permissions", slog.String("path", path), slog.Any("err", err))
		return nil
	}
	base, ttl, signer := pageBase(cfg, addr), linkTTL(cfg), m.signer
	link := func(id string) string { return signer.Link(base, id, ttl) }
	srv := m.newServer(inspector.TextHandler(m.store, m.redact, nil, link), log)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	return srv
}

const runsUsage = `Usage:
  tidybot runs [-n N]     the N latest runs (default 20): id, conversation, status, steps, tokens, age
  tidybot runs show ID    one run: what was asked and answered, a timeline of model, Todoist and waiting time, each step
  tidybot runs link ID    a signed address of the run's page (TIDYBOT_PUBLIC_URL, else serve's TIDYBOT_HTTP_ADDR)
`

// runs prints recent runs or one run's timeline. It reads the database
// itself, or, while serve holds it, asks serve on the socket beside it.
// PostgreSQL (TIDYBOT_DATABASE_URL) is read beside serve.
func (m *Main) runs(ctx context.Context, cfg Config, args []string) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "help") {
		_, err := io.WriteString(m.Stdout, runsUsage)
		return err
	}
	path, err := runsRequest(args)
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
	rec := &textRecorder{w: m.Stdout}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	var link func(string) string
	if key, err := deriveLinkKey(ctx, cfg, st, false); err == nil {
		signer, err := inspector.NewSigner(key, nil)
		if err != nil {
			return err
		}
		base, ttl := pageBase(cfg, cfg.HTTPAddr), linkTTL(cfg)
		link = func(id string) string { return signer.Link(base, id, ttl) }
	} else if len(args) > 0 && args[0] == "link" {
		return fmt.Errorf("runs: %w", err)
	}
	inspector.TextHandler(st, m.redact, nil, link).ServeHTTP(rec, req)
	if rec.code != 0 && rec.code != http.StatusOK {
		return fmt.Errorf("runs: %s", rec.body)
	}
	return nil
}

// runsRequest is the inspector's path for the arguments of tidybot runs.
func runsRequest(args []string) (string, error) {
	path := "/runs?n=20"
	switch {
	case len(args) == 0:
	case len(args) == 2 && args[0] == "-n":
		n, err := strconv.Atoi(args[1])
		if err != nil || n <= 0 {
			return "", fmt.Errorf("runs: -n takes a positive number, not %q", args[1])
		}
		path = "/runs?n=" + strconv.Itoa(n)
	case len(args) == 2 && args[0] == "show":
		path = "/runs/" + url.PathEscape(args[1])
	case len(args) == 2 && args[0] == "link":
		path = "/runs/" + url.PathEscape(args[1]) + "/link"
	default:
		return "", fmt.Errorf("runs: unexpected %q\n%s", args, runsUsage)
	}
	return path, nil
}

// runsFromServe asks the running serve over its socket.
func (m *Main) runsFromServe(ctx context.Context, cfg Config, path string) error {
	sock := socketPath(cfg.DB)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://tidybot"+path, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("runs: %s is in use and the serve holding it does not answer on %s: %w", cfg.DB, sock, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("runs: %s", string(body))
	}
	_, err = io.Copy(m.Stdout, resp.Body)
	return err
}

// textRecorder is a ResponseWriter that passes a 200's body to w and
// keeps an error's.
type textRecorder struct {
	w    io.Writer
	code int
	body []byte
	h    http.Header
}

func (r *textRecorder) Header() http.Header {
	if r.h == nil {
		r.h = http.Header{}
	}
	return r.h
}

func (r *textRecorder) WriteHeader(code int) { r.code = code }

func (r *textRecorder) Write(p []byte) (int, error) {
	if r.code != 0 && r.code != http.StatusOK {
		r.body = append(r.body, p...)
		return len(p), nil
	}
	return r.w.Write(p)
}

// runsStore opens the store for reading: PostgreSQL at
// TIDYBOT_DATABASE_URL (of this tidybot's schema, not migrated), else the
// bbolt file, failing with store.ErrInUse while serve holds it.
func (m *Main) runsStore(ctx context.Context, cfg Config) (appStore, error) {
	if cfg.DatabaseURL != "" {
		if err := checkDatabaseURL(cfg.DatabaseURL); err != nil {
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
	sopts, err := storeOptions(cfg, store.ReadOnly(), store.WithLockTimeout(300*time.Millisecond))
	if err != nil {
		return nil, err
	}
	st, err := store.Open(cfg.DB, sopts...)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return st, nil
}
