package main

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// teamEnv is `tidybot serve` in team mode with the fake Telegram and a
// fake Todoist with OAuth (issue 21's hostile inputs).
type teamEnv struct {
	*env
	svc  *todoisttest.Service
	tg   *telegramtest.Server
	base string
	logs *syncBuffer
}

func serveTeamTelegram(t *testing.T) *teamEnv {
	t.Helper()
	e := newEnv(t)
	svc := todoisttest.NewService(t)
	addr := freeAddr(t)
	base := "http://" + addr
	svc.RegisterApp(todoisttest.App{ClientID: "tidy-client", ClientSecret: "tidy-client-secret-0123", RedirectURL: base + callbackPath})
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	e.cfg.TelegramToken, e.cfg.TelegramURL = tg.Token, tg.URL
	e.cfg.TodoistToken, e.cfg.TodoistURL, e.cfg.TodoistAuth = "", svc.URL, svc.AuthURL
	e.cfg.ClientID, e.cfg.ClientSecret = "tidy-client", "tidy-client-secret-0123"
	e.cfg.PublicURL, e.cfg.SecretKey = base, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, 32))
	e.cfg.AllowedUsers, e.cfg.HTTPAddr = []string{"telegram:*"}, addr
	logs := &syncBuffer{}
	serveTeam(t, e, logs)
	return &teamEnv{env: e, svc: svc, tg: tg, base: base, logs: logs}
}

// TestOAuthCallbackSaysOnlyOurWords: an error on the callback is
// described in our own fixed words per code; whatever text the query
// carries is not on the page (issue 21, item 11).
func TestOAuthCallbackSaysOnlyOurWords(t *testing.T) {
	te := serveTeamTelegram(t)
	evil := "Your account is suspended, call +1 555 0100 at once"
	tests := []struct {
		code, want string
	}{
		{"access_denied", "Access was not granted"},
		{"invalid_scope", "did not accept the permissions"},
		{evil, "Todoist did not connect your account."},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			q := url.Values{"error": {tt.code}, "error_description": {evil}, "state": {"x"}}
			code, body := get(t, te.base+callbackPath+"?"+q.Encode())
			if code != http.StatusBadRequest || !strings.Contains(body, tt.want) {
				t.Errorf("HTTP %d %q, want 400 saying %q", code, body, tt.want)
			}
			if strings.Contains(body, "suspended") || strings.Contains(body, "555") {
				t.Errorf("the page repeats the query's words: %q", body)
			}
		})
	}
	if strings.Contains(te.logs.String(), "suspended") {
		t.Error("the log repeats the query's words")
	}
}

// TestChatGoesOnAfterAHugeLine: a line over 1 MB is cut like any long
// message, said so with its true length, and the lines after it are
// still read (issue 21, item 5).
func TestChatGoesOnAfterAHugeLine(t *testing.T) {
	e := newEnv(t)
	huge := strings.Repeat("é", 1_500_000) // 3 MB
	out := e.chat(t, "hello\n"+huge+"\nsecond\n", nil)
	mustContain(t, out, "You said: hello", "Your message is 1500000 characters long; I only read the first 8000.", "You said: second")
}
