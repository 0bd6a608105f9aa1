// Command tidybot is a chat bot for Slack, Telegram and the terminal that
// manages a person's Todoist through an LLM agent.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tidybot/tidybot/accounts"
	"github.com/tidybot/tidybot/adapters/console"
	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/inspector"
	"github.com/tidybot/tidybot/internal/checkup"
	"github.com/tidybot/tidybot/internal/config"
	"github.com/tidybot/tidybot/store"
	"github.com/tidybot/tidybot/web"
)

// version is stamped by the Makefile with -ldflags.
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := NewMain()
	m.Args = os.Args[1:]
	if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		m.Interactive = true
	}
	err := m.Run(ctx)
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tidybot:", err)
		os.Exit(1)
	}
}

// Main is the program, wired from its configuration; end-to-end tests
// run it with in-memory pipes and fake servers.
type Main struct {
	Args   []string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Interactive says stdin is a terminal (chat reads lines at once).
	Interactive bool
	// Config, when set, is used instead of the environment.
	Config *Config
	// HTTPClient reaches the model and Todoist (default: 90 s timeout).
	HTTPClient *http.Client
	// Ready, when set, is called with the bot once it has started.
	Ready func(*bot.Bot)

	// timeouts bound slow clients of the HTTP servers (default
	// web.DefaultTimeouts); tests shorten them.
	timeouts *web.Timeouts

	closers []func() error
	// poolOnce makes transport, the outgoing connection pool (see pool).
	poolOnce  sync.Once
	transport *http.Transport
	metrics   *web.Metrics
	redact    *agent.Redactor
	store     appStore
	// link makes a run's Details address (nil: no links); see inspect.
	link   func(*bot.Run) string
	signer *inspector.Signer
	// team is team mode's accounts (nil in personal mode).
	team *accounts.Team
	// teamClock, when set, is team mode's clock (tests: an expired state).
	teamClock func() time.Time
	// clock, when set, is the bot's clock (tests: the digest's hour).
	clock func() time.Time
	// backoff, when set, is the model's and Todoist's wait between
	// retries (tests: a millisecond, not the default half second).
	backoff time.Duration
}

// runGrace is how long runs get at shutdown, once the HTTP servers have
// stopped (web.ShutdownWait), to reach a checkpoint. deploy/compose.yaml
// and deploy/tidybot.service allow more than the sum before a SIGKILL.
const runGrace = 10 * time.Second

// NewMain returns a Main on the process's stdio.
func NewMain() *Main {
	return &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
}

const usageText = `tidybot manages your Todoist through an LLM agent, from Slack, Telegram or the terminal.

Usage:
  tidybot chat      talk to the bot in this terminal (one message per line; reads stdin)
  tidybot serve     run every platform whose token is set, plus the HTTP server
  tidybot eval      measure the configured model on a suite of tasks against a fake Todoist
                    (-k 3, -run REGEXP, -json, -parallel N; -sim: a scripted model; -from-feedback: 👎 runs as tasks)
  tidybot runs      recent runs (beside a running serve too); runs show ID: a run's steps; runs link ID: its page's address
  tidybot health    exit 0 when the local serve answers /healthz on TIDYBOT_HTTP_ADDR (for container health checks)
  tidybot check     check each configured part (model, Todoist, Slack, Telegram, database, team mode): one line each
  tidybot slack-manifest [--http URL]
                    the Slack app manifest for this build (Socket Mode; --http URL: the Events API)
  tidybot migrate [--from FILE]
                    bring the PostgreSQL schema at TIDYBOT_DATABASE_URL to this version
                    (--from: copy a bbolt database into it)
  tidybot version   print the version (also tidybot --version)

tidybot COMMAND -h explains COMMAND.

Settings (environment variables, with defaults):
`

// Run runs the subcommand in m.Args. Its error holds no secret.
func (m *Main) Run(ctx context.Context) (err error) {
	cmd := "help"
	if len(m.Args) > 0 {
		cmd = m.Args[0]
	}
	switch cmd {
	case "help", "-h", "-help", "--help":
		if len(m.Args) > 1 && cmd == "help" && !helpArg(m.Args[1:2]) {
			return m.help(m.Args[1]) // tidybot help serve
		}
		return m.help("")
	case "--version", "-version":
		cmd = "version"
	}
	if _, ok := subcommands[cmd]; !ok {
		return fmt.Errorf("unknown command %q (try tidybot -h)", cmd)
	}
	// Help comes before any setting is read: a bad or missing one must
	// not hide it.
	if helpArg(m.Args[1:]) || (cmd == "runs" && len(m.Args) == 2 && m.Args[1] == "help") {
		return m.help(cmd)
	}
	switch cmd {
	case "version":
		_, err := fmt.Fprintln(m.Stdout, "tidybot", version)
		return err
	case "slack-manifest":
		return m.slackManifest(m.Args[1:])
	}
	if err := checkArgs(cmd, m.Args[1:]); err != nil {
		return err
	}
	cfg := m.Config
	if cfg == nil {
		c, err := config.Load()
		if err != nil {
			return err
		}
		cfg = &c
	}
	m.redact = agent.NewRedactor(cfg.Secrets()...)
	defer func() { err = m.redact.Error(err) }()
	if err := m.profile(*cfg); err != nil {
		return err
	}
	if cmd == "health" {
		return m.health(ctx, *cfg)
	}
	if cmd == "eval" {
		return m.eval(ctx, *cfg, m.Args[1:])
	}
	if cmd == "runs" {
		return m.runs(ctx, *cfg, m.Args[1:])
	}
	if cmd == "check" {
		return m.check(ctx, *cfg)
	}
	if cmd == "migrate" {
		return m.migrate(ctx, *cfg, m.Args[1:])
	}
	if err := validate(*cfg, cmd == "serve"); err != nil {
		return err
	}
	if cmd == "chat" {
		return m.chat(ctx, *cfg)
	}
	return m.serve(ctx, *cfg)
}

// Close releases what Run opened.
func (m *Main) Close() error {
	var errs []error
	for i := len(m.closers) - 1; i >= 0; i-- {
		errs = append(errs, m.closers[i]())
	}
	m.closers = nil
	return errors.Join(errs...)
}

// logger logs to m.Stderr as cfg says, every record redacted of every
// configured secret (the adapters' records included).
func (m *Main) logger(cfg Config, chat bool) *slog.Logger {
	log := cfg.Logger(m.Stderr, chat, m.redact.Handler)
	log.Debug("settings", slog.Any("config", cfg))
	return log
}

// build wires the store, the clients, the agent and the bot, once the
// model has passed its start-up check.
func (m *Main) build(ctx context.Context, cfg Config, log *slog.Logger) (*bot.Bot, error) {
	hc := m.httpClient()
	mc := cfg.Model(log)
	if m.backoff > 0 {
		mc.BackoffBase, mc.BackoffMax = m.backoff, m.backoff
	}
	model := openai.New(mc, hc)
	notice, err := checkup.StartModel(ctx, model, cfg, log)
	if err != nil {
		return nil, err
	}
	st, err := openStore(ctx, cfg, storeLog(log))
	if err != nil {
		return nil, err
	}
	m.closers = append(m.closers, st.Close)
	m.store = st
	// Each account's last snapshot is kept in the store, so reads are
	// incremental, across restarts too.
	tasks := todoist.New(cfg.TodoistToken, cfg.TodoistURL, hc, todoist.WithSnapshotStore(st), m.todoistBackoff())
	if !cfg.TeamMode() {
		if err := checkup.StartTodoist(ctx, tasks, log); err != nil {
			return nil, err
		}
	}
	// Each run's model calls are reserved against TIDYBOT_USER_DAILY_TOKENS.
	metered := bot.Metered(model)
	eng := agent.New(metered, tasks, m.engineConfig(cfg))
	m.metrics = web.NewMetrics()
	if sc, ok := st.(interface{ Syncs() int64 }); ok {
		m.metrics.StoreSyncs(sc.Syncs)
	}
	bc := bot.Config{Workers: cfg.Workers, History: cfg.History, AllowedUsers: cfg.Allowlist(rules()), Logger: log, Metrics: m.metrics,
		Redact: m.redact, ShutdownGrace: runGrace, Retention: cfg.Retention, Notice: notice, RunLink: m.runLink, VoiceMax: cfg.VoiceMax, Vision: cfg.Vision,
		UserDailyTokens: cfg.DailyTokens, Now: m.clock, AutopilotEvery: cfg.AutopilotInterval, AutopilotTokensPerHour: cfg.AutopilotTokensPerHour(), ModelTiers: cfg.ModelTiers()}
	if tc := cfg.Transcribe(log); tc.Model != "" {
		bc.Transcriber = openai.NewTranscriber(tc, hc)
	}
	if cfg.TeamMode() {
		// Team mode: every person's runs use an engine on their own
		// token; the engine above (no token) is never used.
		keys, err := config.SecretKeys(cfg.SecretKey)
		if err != nil {
			return nil, err
		}
		o := &todoist.OAuth{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, AuthURL: cfg.TodoistAuth, APIURL: cfg.TodoistURL, HTTP: hc}
		ecfg := m.engineConfig(cfg)
		m.team, err = accounts.New(accounts.Config{Secrets: keys, Store: st, OAuth: o, Redact: m.redact, Logger: log, Now: m.teamClock, PublicURL: cfg.PublicURL, Snapshots: st,
			NewAgent: func(token string) bot.Agent {
				// Snapshots are kept per account (keyed by a hash of the token).
				return agent.New(metered, todoist.New(token, cfg.TodoistURL, hc, todoist.WithSnapshotStore(st), m.todoistBackoff()), ecfg)
			},
			WhoAmI: func(ctx context.Context, token string) (string, error) {
				u, err := todoist.New(token, cfg.TodoistURL, hc).User(ctx)
				if err != nil {
					return "", err
				}
				return fmt.Sprintf("%s (%s)", u.FullName, u.Email), nil
			}})
		if err != nil {
			return nil, err
		}
		bc.Accounts = m.team
	}
	b := bot.New(st, eng, bc)
	if m.team != nil {
		m.team.OnConnected(b.Connected)
		m.team.OnItemAdded(b.AutopilotWebhook)
	}
	return b, nil
}

// openBolt opens the bbolt file at path with more options;
// TIDYBOT_SECRET_KEY, when set, seals the data keys that seal what people
// wrote.
func openBolt(cfg Config, path string, more ...store.Option) (*store.Store, error) {
	if cfg.SecretKey != "" {
		keys, err := config.SecretKeys(cfg.SecretKey)
		if err != nil {
			return nil, err
		}
		more = append(more, store.WithSecretKeys(keys))
	}
	return store.Open(path, more...)
}

// httpClient reaches the model and Todoist.
func (m *Main) httpClient() *http.Client {
	if m.HTTPClient != nil {
		return m.HTTPClient
	}
	return &http.Client{Timeout: 90 * time.Second, Transport: m.pool()}
}

// pool is the connection pool of every outgoing client. A worker or a
// send lane that finds no idle connection to its host dials a new one,
// and http.DefaultTransport keeps only 2 idle connections per host: with
// TIDYBOT_WORKERS runs calling the model and 8 send lanes posting to a
// platform at once, most connections were closed after one request and
// dialled again (1,567 dials for 2,000 Slack messages in
// BenchmarkSlackThroughput, since replaced by BenchmarkServe).
func (m *Main) pool() *http.Transport {
	m.poolOnce.Do(func() {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 32
		m.transport = t
	})
	return m.transport
}

// newModel is the model eval uses (chat and serve check theirs first).
func newModel(cfg Config, hc *http.Client) agent.Model {
	return openai.New(cfg.Model(nil), hc)
}

// engineConfig is the agent's configuration chat, serve and eval use.
func (m *Main) engineConfig(cfg Config) agent.Config {
	return agent.Config{
		Protocol:    agent.Protocol(cfg.Protocol),
		MaxSteps:    cfg.MaxSteps,
		MaxTokens:   cfg.MaxTokens,
		TokenBudget: cfg.TokenBudget,
		CountTokens: openai.EstimatePromptTokens,
		Temperature: cfg.Temperature,
		Timeout:     cfg.RunTimeout,
		Confirm:     agent.ConfirmPolicy(cfg.Confirm),
		Redact:      m.redact,
	}
}

// chat runs the bot in the terminal.
func (m *Main) chat(ctx context.Context, cfg Config) error {
	log := m.logger(cfg, true)
	b, err := m.build(ctx, cfg, log)
	if err != nil {
		return err
	}
	if m.Interactive {
		if _, err := fmt.Fprintln(m.Stdout, console.Greeting(cfg.OpenAIModel)); err != nil {
			return err
		}
	}
	con := console.New(m.Stdout)
	b.AddPlatform(con)
	if err := b.Start(ctx); err != nil {
		return err
	}
	if m.Ready != nil {
		m.Ready(b)
	}
	started := time.Now()
	err = con.Run(ctx, m.Stdin, b, m.Interactive)
	b.Stop()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil // interrupted: runs resume at next start
	}
	if err == nil && !m.Interactive {
		// A script or cron job learns from the exit status.
		return m.failedRuns(ctx, started)
	}
	return err
}

// serve runs the platforms and the HTTP server until ctx ends.
func (m *Main) serve(ctx context.Context, cfg Config) error {
	log := m.logger(cfg, false)
	b, err := m.build(ctx, cfg, log)
	if err != nil {
		return err
	}
	srv, err := m.httpSurface(ctx, cfg, log)
	if err != nil {
		return err
	}
	mux := srv.Mux()
	errc := make(chan error, 5+len(platforms)) // one per goroutine below: none blocks
	adapters, err := m.openAdapters(ctx, cfg, log, b, mux, srv.Waiting(errc))
	if err != nil {
		srv.Shutdown(ctx) // started if a platform was unreachable
		if ctx.Err() != nil {
			// Stopped (SIGTERM, Ctrl-C) while waiting for a platform:
			// a stop, not a failure.
			log.Info("stopped while waiting for a platform to be reachable", slog.Any("last_error", err))
			return nil
		}
		return err
	}
	if len(adapters) == 0 {
		log.Warn("TIDYBOT_HTTP_ONLY=true and no platform token: serving only the HTTP routes (run pages, /healthz; /metrics on TIDYBOT_METRICS_ADDR)")
	}
	if err := b.Start(ctx); err != nil {
		return err
	}
	if m.Ready != nil {
		m.Ready(b)
	}
	for _, a := range adapters {
		go func() {
			if err := a.Run(ctx, b); err != nil {
				errc <- err
			}
		}()
	}
	if err := srv.Start(errc); err != nil {
		b.Stop()
		return err
	}
	srv.Ready()
	srv.ServeSocket(socketPath(cfg.DB), m.runsText(cfg, srv.Addr()), errc)
	return m.wait(ctx, log, errc, srv, b)
}

// httpSurface is serve's HTTP surface with every route but the
// platforms' webhooks: run pages, /healthz, team mode's OAuth pages, and
// /metrics on its own address.
func (m *Main) httpSurface(ctx context.Context, cfg Config, log *slog.Logger) (*web.Server, error) {
	pages, err := m.inspect(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	srv := web.New(web.Config{Addr: cfg.HTTPAddr, MetricsAddr: cfg.MetricsAddr, Metrics: m.metrics.Handler(), RunPages: pages, Timeouts: m.timeouts, Logger: log})
	if m.team != nil {
		m.team.Routes(srv.Mux())
		log.Info("team mode: register this OAuth redirect URL for your app in Todoist's App Management Console",
			slog.String("redirect_url", strings.TrimRight(cfg.PublicURL, "/")+accounts.CallbackPath))
	}
	return srv, nil
}

// wait serves until ctx ends or a server or platform stops (its error
// is returned), then shuts down.
func (m *Main) wait(ctx context.Context, log *slog.Logger, errc <-chan error, srv *web.Server, b *bot.Bot) error {
	var err error
	select {
	case <-ctx.Done():
		log.Info("shutting down: signal received")
	case err = <-errc:
		log.Error("shutting down: a server stopped", slog.Any("err", err))
	}
	m.shutdown(ctx, log, srv, b)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// shutdown stops intake, then waits for requests in flight and for runs
// to reach a checkpoint, logging what it waited for and how long.
func (m *Main) shutdown(ctx context.Context, log *slog.Logger, srv *web.Server, b *bot.Bot) {
	srv.Shutdown(ctx)
	start := time.Now()
	b.Stop()
	log.Info("shutdown: runs stopped or checkpointed; interrupted runs resume at next start",
		slog.String("waited", time.Since(start).Round(time.Millisecond).String()), slog.String("grace", runGrace.String()))
}

// health asks the local serve for /healthz on TIDYBOT_HTTP_ADDR and
// prints ok, or returns a one-line reason.
func (m *Main) health(ctx context.Context, cfg Config) error {
	if err := web.CheckHealth(ctx, cfg.HTTPAddr); err != nil {
		return err
	}
	_, err := fmt.Fprintln(m.Stdout, "ok")
	return err
}
