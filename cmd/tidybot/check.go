package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/tidybot/tidybot/accounts"
	"github.com/tidybot/tidybot/internal/config"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/telegram"
	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/store"
)

// checkTimeout bounds the check of each part.
const checkTimeout = 15 * time.Second

// verdict is how one part of the configuration fared.
type verdict int

const (
	passed verdict = iota
	warned         // works, with something worth knowing
	failed         // will not work until fixed
)

func (v verdict) String() string {
	return [...]string{"ok", "warn", "FAIL"}[v]
}

// finding is one line of tidybot check: a part, its verdict, and what was
// found or what to do.
type finding struct {
	part    string
	verdict verdict
	text    string
}

// check checks every configured part (settings, model, Todoist, Slack,
// Telegram, database, team mode), one line each, and fails unless all
// pass (a warning passes).
func (m *Main) check(ctx context.Context, cfg Config) error {
	hc := m.httpClient()
	findings := []finding{checkSettings(cfg), m.checkModelPart(ctx, cfg, hc), m.checkTodoistPart(ctx, cfg, hc)}
	if cfg.SlackBotToken != "" {
		findings = append(findings, checkSlack(ctx, cfg, hc))
	}
	if cfg.TelegramToken != "" {
		findings = append(findings, checkTelegram(cfg, hc))
	}
	findings = append(findings, checkDatabase(cfg))
	if cfg.TeamMode() {
		findings = append(findings, checkTeam(cfg))
	}
	bad := 0
	for _, f := range findings {
		if f.verdict == failed {
			bad++
		}
		text := strings.ReplaceAll(m.redact.String(f.text), "\n", "\n               ")
		if _, err := fmt.Fprintf(m.Stdout, "%-4s %-9s %s\n", f.verdict, f.part, text); err != nil {
			return err
		}
	}
	if bad > 0 {
		return fmt.Errorf("check: %d of %d parts failed", bad, len(findings))
	}
	return nil
}

func checkSettings(cfg Config) finding {
	serve := cfg.TeamMode() || cfg.TelegramToken != "" || cfg.SlackBotToken != ""
	if err := validate(cfg, serve); err != nil {
		return finding{"settings", failed, err.Error()}
	}
	return finding{"settings", passed, "every setting is valid"}
}

// checkModelPart: the model API answers, knows OPENAI_MODEL, and has
// announced no shutdown date for it.
func (m *Main) checkModelPart(ctx context.Context, cfg Config, hc *http.Client) finding {
	const part = "model"
	mc := modelConfig(cfg, slog.New(slog.DiscardHandler))
	model := openai.New(mc, hc)
	if err := model.Check(cfg.Protocol == "tools"); err != nil {
		return finding{part, failed, err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	info, err := model.LookUp(ctx)
	where := fmt.Sprintf("%s at %s", cfg.OpenAIModel, hostOfURL(cfg.OpenAIBaseURL))
	switch {
	case errors.Is(err, openai.ErrUnknownModel):
		return finding{part, failed, unknownModel(cfg).Error()}
	case err != nil:
		return finding{part, failed, agent.ErrorMessageOf(err)}
	case !info.Known:
		return finding{part, warned, where + ": the server did not confirm that it serves this model (it may not list its models); the first message will tell"}
	case !info.ShutdownDate.IsZero():
		text := fmt.Sprintf("%s: served, but shuts down on %s", where, info.ShutdownDate.Format("2 January 2006"))
		if info.Replacement != "" {
			text += "; OpenAI recommends " + info.Replacement
		}
		return finding{part, warned, text + ": set OPENAI_MODEL to a model that will still be served"}
	}
	return finding{part, passed, where + ": served (" + model.API() + " API), no shutdown date announced"}
}

// checkTodoistPart: Todoist accepts TODOIST_TOKEN (GET /user); team mode
// has no token to check.
func (m *Main) checkTodoistPart(ctx context.Context, cfg Config, hc *http.Client) finding {
	const part = "Todoist"
	if cfg.TodoistToken == "" && cfg.TeamMode() {
		return finding{part, passed, "team mode: each person connects their own account (/connect)"}
	}
	if cfg.TodoistToken == "" {
		return finding{part, failed, "TODOIST_TOKEN is not set: create a token in Todoist under Settings → Integrations → Developer"}
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	u, err := todoist.New(cfg.TodoistToken, cfg.TodoistURL, hc, m.todoistBackoff()).User(ctx)
	if err != nil {
		text := agent.ErrorMessageOf(err)
		if agent.ErrorCodeOf(err) == agent.ErrUnauthorized {
			text += " (Todoist → Settings → Integrations → Developer)"
		}
		return finding{part, failed, text}
	}
	tz := u.Timezone
	if tz == "" {
		tz = "not set (UTC)"
	}
	return finding{part, passed, fmt.Sprintf("token valid: the account of %s, time zone %s", u.FullName, tz)}
}

// checkSlack: the bot token works (auth.test) and holds the scopes the
// app needs (the manifest's, slack.BotScopes); Socket Mode connects
// (apps.connections.open) when SLACK_APP_TOKEN is set.
func checkSlack(ctx context.Context, cfg Config, hc *http.Client) finding {
	const part = "Slack"
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	c, err := slack.Check(ctx, slack.Config{BotToken: cfg.SlackBotToken, AppToken: cfg.SlackAppToken, SigningSecret: cfg.SlackSigningSecret, APIURL: cfg.SlackURL, HTTPClient: hc})
	if err != nil {
		return finding{part, failed, err.Error() + ": check SLACK_BOT_TOKEN (xoxb-…, under OAuth & Permissions) and SLACK_API_URL"}
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
		return finding{part, failed, text + "; but " + strings.Join(problems, "; ")}
	}
	verdict := passed
	if c.Granted == nil {
		verdict = warned
	}
	return finding{part, verdict, text}
}

// checkTelegram: the bot token works (getMe), the webhook is what the
// configuration expects and delivers (getWebhookInfo), and privacy mode
// is reported.
func checkTelegram(cfg Config, hc *http.Client) finding {
	const part = "Telegram"
	c, err := telegram.Check(telegram.Config{Token: cfg.TelegramToken, APIURL: cfg.TelegramURL, HTTPClient: &http.Client{Timeout: checkTimeout, Transport: hc.Transport}})
	if err != nil {
		return finding{part, failed, err.Error() + ": check TELEGRAM_BOT_TOKEN (from BotFather) and TELEGRAM_API_URL"}
	}
	text := "bot @" + c.UserName
	v := passed
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
			v = failed
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
	return finding{part, v, text}
}

// checkDatabase: TIDYBOT_DB can be opened, or created; its size and
// schema version.
func checkDatabase(cfg Config) finding {
	const part = "database"
	fi, err := os.Stat(cfg.DB)
	if errors.Is(err, fs.ErrNotExist) {
		dir := filepath.Dir(cfg.DB)
		if di, err := os.Stat(dir); err != nil || !di.IsDir() {
			return finding{part, failed, fmt.Sprintf("%s: its folder %s does not exist: create it, or set TIDYBOT_DB", cfg.DB, dir)}
		}
		return finding{part, passed, cfg.DB + ": no database yet; the first start creates it"}
	}
	if err != nil {
		return finding{part, failed, fmt.Sprintf("%s: %v: check TIDYBOT_DB", cfg.DB, err)}
	}
	where := fmt.Sprintf("%s (%s)", cfg.DB, byteSize(fi.Size()))
	st, err := store.Open(cfg.DB, store.ReadOnly(), store.WithLockTimeout(300*time.Millisecond))
	switch {
	case errors.Is(err, store.ErrInUse):
		return finding{part, passed, where + ": in use by a running tidybot"}
	case err != nil:
		return finding{part, failed, err.Error()}
	}
	if err := st.Close(); err != nil {
		return finding{part, failed, err.Error()}
	}
	return finding{part, passed, fmt.Sprintf("%s: schema version %d", where, store.SchemaVersion)}
}

// checkTeam: the redirect URL to register in Todoist's App Management
// Console, and the secret key that seals the tokens.
func checkTeam(cfg Config) finding {
	const part = "team mode"
	if err := config.CheckPublicURL(cfg.PublicURL); err != nil {
		return finding{part, failed, err.Error()}
	}
	if _, err := config.SecretKeys(cfg.SecretKey); err != nil {
		return finding{part, failed, err.Error()}
	}
	return finding{part, passed, "register " + strings.TrimRight(cfg.PublicURL, "/") + accounts.CallbackPath +
		" as the OAuth redirect URL of the Todoist app (developer.todoist.com/appconsole.html)"}
}

// hostOfURL is the host of a base URL, for messages (never its user info).
func hostOfURL(raw string) string {
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
