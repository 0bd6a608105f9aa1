// Package checkup is the logic of tidybot check: one function per
// configured part (settings, model, Todoist, Slack, Telegram, database,
// team mode), each returning one finding with what to do about a failure.
package checkup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tidybot/tidybot/accounts"
	"github.com/tidybot/tidybot/adapters/discord"
	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/telegram"
	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/internal/config"
	"github.com/tidybot/tidybot/store"
	"github.com/tidybot/tidybot/store/postgres"
)

// Timeout bounds the check of each part.
const Timeout = 15 * time.Second

// Verdict is how one part of the configuration fared.
type Verdict int

const (
	Passed Verdict = iota
	Warned         // works, with something worth knowing
	Failed         // will not work until fixed
)

func (v Verdict) String() string {
	return [...]string{"ok", "warn", "FAIL"}[v]
}

// Finding is one line of tidybot check: a part, its verdict, and what was
// found or what to do.
type Finding struct {
	Part    string
	Verdict Verdict
	Text    string
}

// Settings: every setting is valid (for serve when a platform or team
// mode is configured); validate is the configuration's check.
func Settings(cfg config.Config, validate func(cfg config.Config, serve bool) error) Finding {
	serve := cfg.TeamMode() || cfg.TelegramToken != "" || cfg.SlackBotToken != ""
	if err := validate(cfg, serve); err != nil {
		return Finding{"settings", Failed, err.Error()}
	}
	return Finding{"settings", Passed, "every setting is valid"}
}

// Model: the model API answers, knows OPENAI_MODEL, and has announced no
// shutdown date for it.
func Model(ctx context.Context, cfg config.Config, model *openai.Client) Finding {
	const part = "model"
	if err := model.Check(cfg.Protocol == "tools"); err != nil {
		return Finding{part, Failed, err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	info, err := model.LookUp(ctx)
	where := fmt.Sprintf("%s at %s", cfg.OpenAIModel, HostOfURL(cfg.OpenAIBaseURL))
	switch {
	case errors.Is(err, openai.ErrUnknownModel):
		return Finding{part, Failed, unknownModel(cfg).Error()}
	case err != nil:
		return Finding{part, Failed, agent.ErrorMessageOf(err)}
	case !info.Known:
		return Finding{part, Warned, where + ": the server did not confirm that it serves this model (it may not list its models); the first message will tell"}
	case !info.ShutdownDate.IsZero():
		text := fmt.Sprintf("%s: served, but shuts down on %s", where, info.ShutdownDate.Format("2 January 2006"))
		switch {
		case info.Chosen:
			text += "; the nearest current model is " + info.Replacement + " (OpenAI names no replacement tidybot could confirm)"
		case info.Replacement != "":
			text += "; OpenAI recommends " + info.Replacement
		}
		return Finding{part, Warned, text + ": set OPENAI_MODEL to a model that will still be served"}
	}
	return Finding{part, Passed, where + ": served (" + model.API() + " API), no shutdown date announced"}
}

// Todoist: Todoist accepts TODOIST_TOKEN (GET /user) through client; team
// mode has no token to check.
func Todoist(ctx context.Context, cfg config.Config, client *todoist.Client) Finding {
	const part = "Todoist"
	if cfg.TodoistToken == "" && cfg.TeamMode() {
		return Finding{part, Passed, "team mode: each person connects their own account (/connect)"}
	}
	if cfg.TodoistToken == "" {
		return Finding{part, Failed, "TODOIST_TOKEN is not set: create a token in Todoist under Settings → Integrations → Developer"}
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	u, err := client.User(ctx)
	if err != nil {
		text := agent.ErrorMessageOf(err)
		if agent.ErrorCodeOf(err) == agent.ErrUnauthorized {
			text += " (Todoist → Settings → Integrations → Developer)"
		}
		return Finding{part, Failed, text}
	}
	tz := u.Timezone
	if tz == "" {
		tz = "not set (UTC)"
	}
	return Finding{part, Passed, fmt.Sprintf("token valid: the account of %s, time zone %s", u.FullName, tz)}
}

// Slack: the bot token works (auth.test) and holds the scopes the
// app needs (the manifest's, slack.BotScopes); Socket Mode connects
// (apps.connections.open) when SLACK_APP_TOKEN is set.
func Slack(ctx context.Context, cfg config.Config, hc *http.Client) Finding {
	const part = "Slack"
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	c, err := slack.Check(ctx, slack.Config{BotToken: cfg.SlackBotToken, AppToken: cfg.SlackAppToken, SigningSecret: cfg.SlackSigningSecret, APIURL: cfg.SlackURL, HTTPClient: hc})
	if err != nil {
		return Finding{part, Failed, err.Error() + ": check SLACK_BOT_TOKEN (xoxb-…, under OAuth & Permissions) and SLACK_API_URL"}
	}
	text := fmt.Sprintf("bot @%s in %s", c.User, c.Team)
	var problems []string
	switch {
	case c.Granted == nil:
		text += "; Slack did not list the token's scopes"
	case len(c.Missing) > 0:
		problems = append(problems, "the bot token lacks the scopes "+strings.Join(c.Missing, ", ")+
			": add them under OAuth & Permissions (tidybot slack-manifest prints them all) and reinstall the app")
	default:
		text += fmt.Sprintf("; all %d scopes granted", len(slack.BotScopes()))
	}
	switch {
	case cfg.SlackAppToken != "" && c.SocketMode != nil:
		problems = append(problems, "Socket Mode does not connect ("+c.SocketMode.Error()+
			"): check SLACK_APP_TOKEN (xapp-…, an app-level token with connections:write) and that Socket Mode is on in the app's settings")
	case cfg.SlackAppToken != "":
		text += "; Socket Mode connects"
	default:
		text += "; Events API: Slack sends events to /slack/events"
	}
	if len(problems) > 0 {
		return Finding{part, Failed, text + "; but " + strings.Join(problems, "; ")}
	}
	verdict := Passed
	if c.Granted == nil {
		verdict = Warned
	}
	return Finding{part, verdict, text}
}

// Telegram: the bot token works (getMe), the webhook is what the
// configuration expects and delivers (getWebhookInfo), and privacy mode
// is reported.
func Telegram(cfg config.Config, hc *http.Client) Finding {
	const part = "Telegram"
	c, err := telegram.Check(telegram.Config{Token: cfg.TelegramToken, APIURL: cfg.TelegramURL, HTTPClient: &http.Client{Timeout: Timeout, Transport: hc.Transport}})
	if err != nil {
		return Finding{part, Failed, err.Error() + ": check TELEGRAM_BOT_TOKEN (from BotFather) and TELEGRAM_API_URL"}
	}
	text := "bot @" + c.UserName
	v := Passed
	switch {
	case cfg.TelegramHook == "" && c.Webhook != "":
		text += "; long polling, but a webhook is set (" + c.Webhook + "): serve removes it at start"
	case cfg.TelegramHook == "":
		text += "; long polling"
	case c.Webhook != cfg.TelegramHook:
		text += "; webhook not set to TELEGRAM_WEBHOOK_URL yet: serve sets it at start"
	default:
		text += "; webhook " + c.Webhook
		if c.LastError != "" {
			v = Failed
			text += "; Telegram's last delivery failed (" + c.LastError +
				"): check that TELEGRAM_WEBHOOK_URL reaches serve's /telegram/webhook and that TELEGRAM_WEBHOOK_SECRET is the one serve was started with"
		}
	}
	if c.Pending > 0 {
		text += fmt.Sprintf("; %d updates waiting", c.Pending)
	}
	if c.PrivacyOff {
		text += "; privacy mode off: groups' messages reach the bot"
	} else {
		text += "; privacy mode on: in groups only /command@" + c.UserName + " and replies to the bot reach it (BotFather's /setprivacy lets @mentions in)"
	}
	return Finding{part, v, text}
}

// Discord: the bot token (GET /users/@me) and the gateway (GET
// /gateway/bot), and how interactions arrive.
func Discord(ctx context.Context, cfg config.Config, hc *http.Client) Finding {
	const part = "Discord"
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	c, err := discord.Check(ctx, discord.Config{Token: cfg.DiscordToken, APIURL: cfg.DiscordURL, HTTPClient: &http.Client{Timeout: Timeout, Transport: hc.Transport}})
	if err != nil {
		return Finding{part, Failed, err.Error() + ": check DISCORD_BOT_TOKEN (developer portal → Bot → Reset Token) and DISCORD_API_URL"}
	}
	text := "bot " + c.UserName + " (" + c.ID + "); gateway " + c.Gateway
	if cfg.DiscordPublicKey != "" {
		text += "; interactions over HTTP: set the portal's Interactions Endpoint URL to <TIDYBOT_PUBLIC_URL>/discord/interactions"
	} else {
		text += "; interactions over the gateway"
	}
	if cfg.DiscordMessageContent {
		text += "; Message Content intent asked for (the portal must allow it, or the gateway refuses the bot)"
	} else {
		text += "; without the Message Content intent: in servers only mentions and slash commands reach the bot"
	}
	return Finding{part, Passed, text}
}

// Database: the PostgreSQL at TIDYBOT_DATABASE_URL when it is set (see
// sharedDatabase); else TIDYBOT_DB can be opened, or created; its size
// and schema version.
func Database(ctx context.Context, cfg config.Config) Finding {
	const part = "database"
	if cfg.DatabaseURL != "" {
		return sharedDatabase(ctx, cfg)
	}
	fi, err := os.Stat(cfg.DB)
	if errors.Is(err, fs.ErrNotExist) {
		dir := filepath.Dir(cfg.DB)
		if di, err := os.Stat(dir); err != nil || !di.IsDir() {
			return Finding{part, Failed, fmt.Sprintf("%s: its folder %s does not exist: create it, or set TIDYBOT_DB", cfg.DB, dir)}
		}
		return Finding{part, Passed, cfg.DB + ": no database yet; the first start creates it"}
	}
	if err != nil {
		return Finding{part, Failed, fmt.Sprintf("%s: %v: check TIDYBOT_DB", cfg.DB, err)}
	}
	where := fmt.Sprintf("%s (%s)", cfg.DB, byteSize(fi.Size()))
	st, err := store.Open(cfg.DB, store.ReadOnly(), store.WithLockTimeout(300*time.Millisecond))
	switch {
	case errors.Is(err, store.ErrInUse):
		return Finding{part, Passed, where + ": in use by a running tidybot"}
	case err != nil:
		return Finding{part, Failed, err.Error()}
	}
	if err := st.Close(); err != nil {
		return Finding{part, Failed, err.Error()}
	}
	return Finding{part, Passed, fmt.Sprintf("%s: schema version %d", where, store.SchemaVersion)}
}

// sharedDatabase: the PostgreSQL at TIDYBOT_DATABASE_URL answers, and
// its schema is this tidybot's or older (serve migrates it at start).
func sharedDatabase(ctx context.Context, cfg config.Config) Finding {
	const part = "database"
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	st, err := postgres.Probe(ctx, cfg.DatabaseURL)
	if err != nil {
		return Finding{part, Failed, err.Error() + ": check TIDYBOT_DATABASE_URL"}
	}
	where := "PostgreSQL " + st.Server + " at " + st.Where
	switch n := st.Pending(); {
	case n < 0:
		return Finding{part, Failed, fmt.Sprintf("%s: schema version %d, newer than this tidybot (%d): upgrade tidybot", where, st.Version, postgres.SchemaVersion())}
	case st.Version == 0:
		return Finding{part, Passed, where + ": no tidybot schema yet; tidybot migrate (or the first serve) creates it; " + noPooler}
	case n > 0:
		pending := fmt.Sprintf("%d migrations", n)
		if n == 1 {
			pending = "1 migration"
		}
		return Finding{part, Warned, fmt.Sprintf("%s: schema version %d, this tidybot %d: %s pending; run tidybot migrate before starting several replicas (serve migrates at start)", where, st.Version, postgres.SchemaVersion(), pending)}
	}
	return Finding{part, Passed, fmt.Sprintf("%s: schema version %d; %s", where, st.Version, noPooler)}
}

// noPooler says what Probe found of pooling when it passed.
const noPooler = "a direct connection or session pooling (no transaction pooler)"

// Team: the redirect URL to register in Todoist's App Management
// Console, and the secret key that seals the tokens.
func Team(cfg config.Config) Finding {
	const part = "team mode"
	if err := config.CheckPublicURL(cfg.PublicURL); err != nil {
		return Finding{part, Failed, err.Error()}
	}
	if _, err := config.SecretKeys(cfg.SecretKey); err != nil {
		return Finding{part, Failed, err.Error()}
	}
	return Finding{part, Passed, "register " + strings.TrimRight(cfg.PublicURL, "/") + accounts.CallbackPath +
		" as the OAuth redirect URL of the Todoist app (developer.todoist.com/appconsole.html)"}
}

// HostOfURL is the host of a base URL, for messages (never its user info).
func HostOfURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return raw
	}
	return u.Host
}

// byteSize writes n bytes for people: 812 B, 64 KB, 1.5 MB.
func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%d KB", n>>10)
	case n < 1<<30:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
}
