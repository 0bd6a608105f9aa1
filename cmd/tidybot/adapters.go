package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/telegram"
	"github.com/tidybot/tidybot/bot"
)

// platform is a chat platform tidybot serve can run: its name (as in
// TIDYBOT_ALLOWED_USERS entries), its allowlist id rule, and how it is
// built from the configuration. Adding a platform is an adapter package
// and one row in platforms (docs/adapters.md).
type platform struct {
	name  string
	allow bot.AllowRule
	// on reports whether the configuration enables it (its token is set).
	on func(cfg Config) bool
	// open connects it; b is the bot it will hand events to.
	open func(ctx context.Context, m *Main, cfg Config, log *slog.Logger, b *bot.Bot) (bot.Adapter, error)
}

// platforms are the platforms serve knows, in the order it starts them.
var platforms = []platform{
	{name: telegram.Platform, allow: telegram.AllowedID, on: func(cfg Config) bool { return cfg.TelegramToken != "" }, open: openTelegram},
	{name: slack.Platform, allow: slack.AllowedID, on: func(cfg Config) bool { return cfg.SlackBotToken != "" }, open: openSlack},
}

func openTelegram(_ context.Context, m *Main, cfg Config, log *slog.Logger, _ *bot.Bot) (bot.Adapter, error) {
	return telegram.New(telegram.Config{Token: cfg.TelegramToken, APIURL: cfg.TelegramURL, WebhookURL: cfg.TelegramHook,
		WebhookSecret: cfg.TelegramWebhookSecret, Logger: log, Team: cfg.TeamMode(), Events: m.metrics, HTTPClient: &http.Client{Timeout: 60 * time.Second, Transport: m.pool()}})
}

func openSlack(ctx context.Context, m *Main, cfg Config, log *slog.Logger, b *bot.Bot) (bot.Adapter, error) {
	return slack.New(ctx, slack.Config{BotToken: cfg.SlackBotToken, SigningSecret: cfg.SlackSigningSecret, AppToken: cfg.SlackAppToken, APIURL: cfg.SlackURL, Logger: log,
		Threads: b, Events: m.metrics, HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: m.pool()}})
}

// openAdapters connects every platform the configuration enables, adds
// each to b and registers its HTTP routes on mux.
func (m *Main) openAdapters(ctx context.Context, cfg Config, log *slog.Logger, b *bot.Bot, mux *http.ServeMux) ([]bot.Adapter, error) {
	var out []bot.Adapter
	for _, p := range platforms {
		if !p.on(cfg) {
			continue
		}
		a, err := p.open(ctx, m, cfg, log, b)
		if err != nil {
			return nil, err
		}
		b.AddPlatform(a)
		if r, ok := a.(bot.Router); ok {
			if err := r.Routes(mux, b); err != nil {
				return nil, err
			}
		}
		out = append(out, a)
	}
	return out, nil
}
