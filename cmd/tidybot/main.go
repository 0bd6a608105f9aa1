// Command tidybot is a chat bot for Slack, Telegram and the terminal that
// manages a person's Todoist through an LLM agent.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tidybot/tidybot/adapters/console"
	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/telegram"
	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store"
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

	closers  []func() error
	registry *prometheus.Registry
}

// NewMain returns a Main on the process's stdio.
func NewMain() *Main {
	return &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
}

const usageText = `tidybot manages your Todoist through an LLM agent, from Slack, Telegram or the terminal.

Usage:
  tidybot chat      talk to the bot in this terminal (one message per line; reads stdin)
  tidybot serve     run every platform whose token is set, plus the HTTP server
  tidybot version   print the version

Settings (environment variables, with defaults):
`

// Run runs the subcommand in m.Args.
func (m *Main) Run(ctx context.Context) error {
	cmd := "help"
	if len(m.Args) > 0 {
		cmd = m.Args[0]
	}
	switch cmd {
	case "version":
		_, err := fmt.Fprintln(m.Stdout, "tidybot", version)
		return err
	case "help", "-h", "-help", "--help":
		if _, err := io.WriteString(m.Stdout, usageText); err != nil {
			return err
		}
		return Usage(m.Stdout)
	case "chat", "serve":
	default:
		return fmt.Errorf("unknown command %q (try tidybot -h)", cmd)
	}
	cfg := m.Config
	if cfg == nil {
		c, err := LoadConfig()
		if err != nil {
			return err
		}
		cfg = &c
	}
	if err := cfg.Validate(cmd == "serve"); err != nil {
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

func (m *Main) logger(cfg Config, chat bool) *slog.Logger {
	level := slog.LevelInfo
	switch strings.ToLower(cfg.LogLevel) {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	if chat && os.Getenv("TIDYBOT_LOG_LEVEL") == "" && strings.EqualFold(cfg.LogLevel, "info") {
		level = slog.LevelWarn // keep the terminal for the conversation
	}
	return slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: level}))
}

// build wires the store, the clients, the agent and the bot.
func (m *Main) build(cfg Config, log *slog.Logger) (*bot.Bot, error) {
	st, err := store.Open(cfg.DB)
	if err != nil {
		return nil, err
	}
	m.closers = append(m.closers, st.Close)
	hc := m.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 90 * time.Second}
	}
	tasks := todoist.New(cfg.TodoistToken, cfg.TodoistURL, hc)
	model := openai.New(openai.Config{APIKey: cfg.OpenAIKey, BaseURL: cfg.OpenAIBaseURL, Model: cfg.OpenAIModel}, hc)
	eng := agent.New(model, tasks, agent.Config{
		Protocol:    agent.Protocol(cfg.Protocol),
		MaxSteps:    cfg.MaxSteps,
		MaxTokens:   cfg.MaxTokens,
		TokenBudget: cfg.TokenBudget,
		Temperature: cfg.Temperature,
		Timeout:     cfg.RunTimeout,
		Confirm:     agent.ConfirmPolicy(cfg.Confirm),
	})
	m.registry = prometheus.NewRegistry()
	m.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return bot.New(st, eng, bot.Config{Workers: cfg.Workers, History: cfg.History, AllowedUsers: cfg.AllowedUsers, Logger: log, Metrics: newMetrics(m.registry)}), nil
}

// chat runs the bot in the terminal.
func (m *Main) chat(ctx context.Context, cfg Config) error {
	log := m.logger(cfg, true)
	b, err := m.build(cfg, log)
	if err != nil {
		return err
	}
	con := console.New(m.Stdout)
	b.AddPlatform(con)
	if err := b.Start(ctx); err != nil {
		return err
	}
	if m.Ready != nil {
		m.Ready(b)
	}
	err = con.Run(ctx, m.Stdin, b, m.Interactive)
	b.Stop()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil // interrupted: runs resume at next start
	}
	return err
}

// serve runs the platforms and the HTTP server until ctx ends.
func (m *Main) serve(ctx context.Context, cfg Config) error {
	log := m.logger(cfg, false)
	b, err := m.build(cfg, log)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	errc := make(chan error, 2)
	var tg *telegram.Adapter
	var sl *slack.Adapter
	if cfg.TelegramToken != "" {
		tg, err = telegram.New(telegram.Config{Token: cfg.TelegramToken, APIURL: cfg.TelegramURL, WebhookURL: cfg.TelegramHook,
			WebhookSecret: cfg.TelegramHookS, Logger: log})
		if err != nil {
			return err
		}
		if err := tg.Setup(ctx); err != nil {
			return err
		}
		b.AddPlatform(tg)
		if cfg.TelegramHook != "" {
			mux.Handle("POST /telegram/webhook", tg.WebhookHandler(b))
		}
		log.Info("telegram ready", slog.Bool("webhook", cfg.TelegramHook != ""))
	}
	if cfg.SlackBotToken != "" {
		sl, err = slack.New(ctx, slack.Config{BotToken: cfg.SlackBotToken, SigningSecret: cfg.SlackSigning, AppToken: cfg.SlackAppToken, APIURL: cfg.SlackURL, Logger: log,
			Threads: b})
		if err != nil {
			return err
		}
		b.AddPlatform(sl)
		if cfg.SlackSigning != "" {
			if err := sl.Routes(mux, b); err != nil {
				return err
			}
			log.Info("slack Events API ready: /slack/events, /slack/commands, /slack/interactivity")
		}
	}
	if cfg.TelegramToken == "" && cfg.SlackBotToken == "" {
		log.Warn("no platform token set: serving only /healthz and /metrics")
	}
	if err := b.Start(ctx); err != nil {
		return err
	}
	if m.Ready != nil {
		m.Ready(b)
	}
	if sl != nil && cfg.SlackAppToken != "" {
		go func() {
			if err := sl.RunSocketMode(ctx, b); err != nil {
				errc <- err
			}
		}()
		log.Info("slack Socket Mode started")
	}
	if tg != nil && cfg.TelegramHook == "" {
		go func() {
			if err := tg.Poll(ctx, b); err != nil {
				errc <- err
			}
		}()
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: cfg.HTTPAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		b.Stop()
		return fmt.Errorf("listen on TIDYBOT_HTTP_ADDR %s: %w", cfg.HTTPAddr, err)
	}
	log.Info("serving", slog.String("addr", ln.Addr().String()))
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	b.Stop()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
