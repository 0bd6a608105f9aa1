package main

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/discord/discordtest"
	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/internal/checkup"
	"github.com/tidybot/tidybot/store"
)

// checkEnv is env with a fake Slack (Socket Mode, every scope granted),
// a fake Telegram (long polling) and a fake Discord configured too.
type checkEnv struct {
	*env
	slack *slacktest.Server
	tg    *telegramtest.Server
	dc    *discordtest.Server
}

func newCheckEnv(t *testing.T) *checkEnv {
	t.Helper()
	e := &checkEnv{env: newEnv(t), slack: slacktest.New(), tg: telegramtest.New(), dc: discordtest.New(t)}
	t.Cleanup(e.slack.Close)
	t.Cleanup(e.tg.Close)
	e.slack.Grant(slack.BotScopes()...)
	e.cfg.SlackBotToken, e.cfg.SlackAppToken, e.cfg.SlackURL = slacktest.Token, slacktest.AppToken, e.slack.URL
	e.cfg.TelegramToken, e.cfg.TelegramURL = e.tg.Token, e.tg.URL
	e.cfg.DiscordToken, e.cfg.DiscordURL = discordtest.Token, e.dc.URL()
	return e
}

// check runs `tidybot check` and returns its lines by part, and its error.
func (e *checkEnv) check(t *testing.T) (map[string]string, string, error) {
	t.Helper()
	var out, logs bytes.Buffer
	m := &Main{Args: []string{"check"}, Stdout: &out, Stderr: &logs, Config: &e.cfg, backoff: time.Millisecond}
	defer m.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := m.Run(ctx)
	lines := map[string]string{}
	line := regexp.MustCompile(`^(ok|warn|FAIL) +(settings|model|Todoist|Slack|Telegram|Discord|database|team mode) +(.*)$`)
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			if !strings.HasPrefix(l, "               ") { // a continuation
				t.Errorf("line %q is not VERDICT PART TEXT", l)
			}
			continue
		}
		lines[m[2]] = m[1] + " " + m[3]
	}
	return lines, out.String(), err
}

// TestCheckAllPass: with every part configured and working, check prints
// one ok line per part and exits 0.
func TestCheckAllPass(t *testing.T) {
	e := newCheckEnv(t)
	e.cfg.DatabaseURL = "" // bbolt: TestCheckDatabaseURL checks PostgreSQL
	lines, out, err := e.check(t)
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	want := map[string]string{
		"settings": "ok every setting is valid",
		"model":    "ok scripted at " + checkup.HostOfURL(e.cfg.OpenAIBaseURL) + ": served (chat API), no shutdown date announced",
		"Todoist":  "ok token valid: the account of Test User, time zone ",
		"Slack":    "ok bot @tidybot in Tidy Team; all ",
		"Telegram": "ok bot @tidybot; long polling; privacy mode on: in groups only /command@tidybot and replies to the bot reach it",
		"Discord":  "ok bot tidybot (" + e.dc.BotID() + "); gateway ws://",
		"database": "ok " + e.cfg.DB + ": no database yet; the first start creates it",
	}
	for part, w := range want {
		if !strings.HasPrefix(lines[part], w) {
			t.Errorf("%s: %q; want it to start %q", part, lines[part], w)
		}
	}
	if !strings.HasSuffix(lines["Slack"], "scopes granted; Socket Mode connects") {
		t.Errorf("Slack: %q", lines["Slack"])
	}
	if len(lines) != len(want) {
		t.Errorf("%d lines; want %d (no team mode):\n%s", len(lines), len(want), out)
	}
}

// TestCheckFailures: each broken part is one FAIL line saying what to do,
// the other parts still pass, and check exits non-zero; a warning alone
// passes.
func TestCheckFailures(t *testing.T) {
	refused := "http://" + refusedAddr(t)
	tests := []struct {
		name     string
		setup    func(t *testing.T, e *checkEnv)
		part     string
		want     string // the part's line (verdict and text) contains this
		wantFail bool
		secret   string // must not appear
	}{
		{name: "a bad setting", part: "settings", wantFail: true,
			setup: func(t *testing.T, e *checkEnv) { e.cfg.Confirm = "sometimes" },
			want:  "FAIL TIDYBOT_CONFIRM must be destructive, writes or never, not \"sometimes\""},
		{name: "model unreachable", part: "model", wantFail: true,
			setup: func(t *testing.T, e *checkEnv) { e.cfg.OpenAIBaseURL = refused + "/v1" },
			want:  "FAIL could not reach the model API at " + strings.TrimPrefix(refused, "http://") + " (connection refused): check OPENAI_BASE_URL"},
		{name: "model key rejected", part: "model", wantFail: true, secret: "sk-test",
			setup: func(t *testing.T, e *checkEnv) { e.withModel(t, "scripted", openaitest.WithAPIKey("sk-other")) },
			want:  "FAIL the model API at 127.0.0.1:"},
		{name: "model unknown", part: "model", wantFail: true,
			setup: func(t *testing.T, e *checkEnv) {
				e.withModel(t, "gpt-7", openaitest.WithModels(openaitest.Model{ID: "gpt-6-luna"}))
			},
			want: "FAIL OPENAI_MODEL=gpt-7 does not exist at"},
		{name: "model shutting down", part: "model",
			setup: func(t *testing.T, e *checkEnv) {
				e.withModel(t, "gpt-4.1-mini", openaitest.WithModels(openaitest.Model{ID: "gpt-4.1-mini", ShutdownDate: "2027-01-14"}))
			},
			want: ": served, but shuts down on 14 January 2027; OpenAI recommends gpt-6-luna: set OPENAI_MODEL to a model that will still be served"},
		{name: "model shutting down, replacement chosen", part: "model",
			setup: func(t *testing.T, e *checkEnv) {
				e.withModel(t, "gpt-5.4-nano", openaitest.WithModels(openaitest.Model{ID: "gpt-5.4-nano", ShutdownDate: "2027-04-01"}))
			},
			want: ": served, but shuts down on 1 April 2027; the nearest current model is gpt-6-luna (OpenAI names no replacement tidybot could confirm): set OPENAI_MODEL to a model that will still be served"},
		{name: "todoist token rejected", part: "Todoist", wantFail: true, secret: "not-the-token",
			setup: func(t *testing.T, e *checkEnv) { e.cfg.TodoistToken = "not-the-token" },
			want:  "FAIL Todoist rejected the token: check TODOIST_TOKEN (Todoist → Settings → Integrations → Developer)"},
		{name: "todoist unreachable", part: "Todoist", wantFail: true,
			setup: func(t *testing.T, e *checkEnv) { e.cfg.TodoistURL = "http://nonexistent.invalid/api/v1" },
			want:  "FAIL could not reach Todoist at nonexistent.invalid (host not found): check the network connection and TODOIST_API_URL"},
		{name: "slack bot token rejected", part: "Slack", wantFail: true, secret: "xoxb-wrong",
			setup: func(t *testing.T, e *checkEnv) { e.cfg.SlackBotToken = "xoxb-wrong" },
			want:  "invalid_auth: check SLACK_BOT_TOKEN"},
		{name: "slack scope missing", part: "Slack", wantFail: true,
			setup: func(t *testing.T, e *checkEnv) {
				e.slack.Grant(slices.DeleteFunc(slack.BotScopes(), func(s string) bool { return s == "im:write" })...)
			},
			want: "the bot token lacks the scopes im:write: add them under OAuth & Permissions"},
		{name: "slack app token rejected", part: "Slack", wantFail: true, secret: "xapp-wrong",
			setup: func(t *testing.T, e *checkEnv) { e.cfg.SlackAppToken = "xapp-wrong" },
			want:  "Socket Mode does not connect (slack: apps.connections.open: invalid_auth): check SLACK_APP_TOKEN"},
		{name: "telegram token rejected", part: "Telegram", wantFail: true, secret: "999:wrong",
			setup: func(t *testing.T, e *checkEnv) { e.cfg.TelegramToken = "999:wrong" },
			want:  "FAIL telegram: getMe: Unauthorized: check TELEGRAM_BOT_TOKEN"},
		{name: "discord token rejected", part: "Discord", wantFail: true, secret: "wrong-discord-token",
			setup: func(t *testing.T, e *checkEnv) { e.cfg.DiscordToken = "wrong-discord-token" },
			want:  "Discord refused the token (401 Unauthorized): check DISCORD_BOT_TOKEN"},
		{name: "telegram privacy off", part: "Telegram",
			setup: func(t *testing.T, e *checkEnv) { e.tg.PrivacyOff() },
			want:  "ok bot @tidybot; long polling; privacy mode off"},
		{name: "telegram webhook not set yet", part: "Telegram",
			setup: func(t *testing.T, e *checkEnv) {
				e.cfg.TelegramHook, e.cfg.TelegramWebhookSecret = "https://bot.example.com/telegram/webhook", "s3cret"
			},
			want: "ok bot @tidybot; webhook not set to TELEGRAM_WEBHOOK_URL yet: serve sets it at start"},
		{name: "telegram webhook failing", part: "Telegram", wantFail: true,
			setup: func(t *testing.T, e *checkEnv) {
				e.cfg.TelegramHook, e.cfg.TelegramWebhookSecret = "https://bot.example.com/telegram/webhook", "s3cret"
				resp, err := http.PostForm(e.tg.URL+"/bot"+e.tg.Token+"/setWebhook", url.Values{"url": {e.cfg.TelegramHook}})
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				e.tg.WebhookFails("Wrong response from the webhook: 401 Unauthorized")
			},
			want: "FAIL bot @tidybot; webhook https://bot.example.com/telegram/webhook; Telegram's last delivery failed (Wrong response from the webhook: 401 Unauthorized): check"},
		{name: "database", part: "database",
			setup: func(t *testing.T, e *checkEnv) {
				st, err := store.Open(e.cfg.DB)
				if err != nil {
					t.Fatal(err)
				}
				st.Close()
			},
			want: ": schema version 3"},
		{name: "database folder missing", part: "database", wantFail: true,
			setup: func(t *testing.T, e *checkEnv) { e.cfg.DB = filepath.Join(t.TempDir(), "gone", "tidybot.db") },
			want:  "/gone does not exist: create it, or set TIDYBOT_DB"},
		{name: "team mode", part: "team mode",
			setup: func(t *testing.T, e *checkEnv) {
				e.cfg.ClientID, e.cfg.ClientSecret = "client", "client-secret"
				e.cfg.PublicURL, e.cfg.SecretKey = "https://bot.example.com", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
			},
			want: "ok register https://bot.example.com/oauth/todoist/callback as the OAuth redirect URL of the Todoist app"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCheckEnv(t)
			e.cfg.DatabaseURL = "" // the database cases are bbolt's
			tt.setup(t, e)
			lines, out, err := e.check(t)
			if !strings.Contains(lines[tt.part], tt.want) || tt.name == "model key rejected" && !strings.HasSuffix(lines[tt.part], "rejected the key: check OPENAI_API_KEY") {
				t.Errorf("%s: %q; want it to contain %q\n%s", tt.part, lines[tt.part], tt.want, out)
			}
			for part, l := range lines {
				if part != tt.part && part != "settings" && !strings.HasPrefix(l, "ok ") {
					t.Errorf("%s: %q; want ok", part, l)
				}
			}
			switch {
			case tt.wantFail && (err == nil || !strings.Contains(err.Error(), "1 of ")):
				t.Errorf("err = %v; want 1 part failed", err)
			case !tt.wantFail && err != nil:
				t.Errorf("err = %v; want nil\n%s", err, out)
			}
			if tt.secret != "" && strings.Contains(out, tt.secret) {
				t.Errorf("the output holds %q:\n%s", tt.secret, out)
			}
		})
	}
}
