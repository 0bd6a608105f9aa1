package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/tidybot/tidybot/adapters/discord"
	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/telegram"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/config"
	"github.com/tidybot/tidybot/internal/retry"
)

// platform is a chat platform tidybot serve can run: what validation
// knows of it (its name as in TIDYBOT_ALLOWED_USERS entries, its allowlist
// id rule, whether the configuration enables it) and how it is built from
// the configuration. Adding a platform is an adapter package and one row
// in platforms (docs/adapters.md).
type platform struct {
	config.Platform
	// open connects it; b is the bot it will hand events to.
	open func(ctx context.Context, m *Main, cfg Config, log *slog.Logger, b *bot.Bot) (bot.Adapter, error)
}

// platforms are the platforms serve knows, in the order it starts them.
var platforms = []platform{
	{config.Platform{Name: telegram.Platform, Allow: telegram.AllowedID, On: func(cfg Config) bool { return cfg.TelegramToken != "" }}, openTelegram},
	{config.Platform{Name: slack.Platform, Workspace: slack.Workspace, Allow: slack.AllowedID, On: func(cfg Config) bool { return cfg.SlackBotToken != "" }}, openSlack},
	{config.Platform{Name: discord.Platform, Workspace: discord.Workspace, Allow: discord.AllowedID, On: func(cfg Config) bool { return cfg.DiscordToken != "" }}, openDiscord},
}

type Config = config.Config // every setting (package config)

// rules is what validation knows of the platforms serve knows.
func rules() []config.Platform {
	out := make([]config.Platform, len(platforms))
	for i, p := range platforms {
		out[i] = p.Platform
	}
	return out
}

// validate checks cfg against the platforms serve knows.
func validate(cfg Config, serve bool) error {
	return cfg.Validate(serve, rules())
}

func openTelegram(_ context.Context, m *Main, cfg Config, log *slog.Logger, _ *bot.Bot) (bot.Adapter, error) {
	return telegram.New(telegram.Config{Token: cfg.TelegramToken, APIURL: cfg.TelegramURL, WebhookURL: cfg.TelegramHook,
		WebhookSecret: cfg.TelegramWebhookSecret, Logger: log, Team: cfg.TeamMode(), Events: m.metrics, Leader: m.store, Offsets: m.store, HTTPClient: &http.Client{Timeout: 60 * time.Second, Transport: m.pool()}})
}

func openSlack(ctx context.Context, m *Main, cfg Config, log *slog.Logger, b *bot.Bot) (bot.Adapter, error) {
	hooks, _ := m.store.(slack.Hooks) // PostgreSQL's, shared by replicas; none with bbolt (one process: memory)
	return slack.New(ctx, slack.Config{BotToken: cfg.SlackBotToken, SigningSecret: cfg.SlackSigningSecret, AppToken: cfg.SlackAppToken, APIURL: cfg.SlackURL, Logger: log,
		Threads: b, Events: m.metrics, Hooks: hooks, HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: m.pool()}})
}

func openDiscord(_ context.Context, m *Main, cfg Config, log *slog.Logger, _ *bot.Bot) (bot.Adapter, error) {
	hooks, _ := m.store.(discord.Hooks) // PostgreSQL's, shared by replicas; none with bbolt (one process: memory)
	return discord.New(discord.Config{Token: cfg.DiscordToken, APIURL: cfg.DiscordURL, PublicKey: cfg.DiscordPublicKey, AppID: cfg.DiscordAppID,
		GuildID: cfg.DiscordGuildID, MessageContent: cfg.DiscordMessageContent, Logger: log, Team: cfg.TeamMode(), Events: m.metrics, Hooks: hooks,
		HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: m.pool()}})
}

// openAdapters connects every platform the configuration enables (an
// unreachable one again after waiting), adds each to b and routes mux.
func (m *Main) openAdapters(ctx context.Context, cfg Config, log *slog.Logger, b *bot.Bot, mux *http.ServeMux, waiting func(error, time.Duration)) ([]bot.Adapter, error) {
	var out []bot.Adapter
	for _, p := range platforms {
		if !p.On(cfg) {
			continue
		}
		var a bot.Adapter
		err := retry.Connect(ctx, m.backoff, func() (err error) { a, err = p.open(ctx, m, cfg, log, b); return err }, waiting)
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
