package main

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/accounts"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// TestTeamModeLogsTheRedirectURLToRegister: the start-up line names the
// callback for what it is, the OAuth redirect URL to register with
// Todoist, not "where people connect" (people connect through the
// Connect link the bot sends).
func TestTeamModeLogsTheRedirectURLToRegister(t *testing.T) {
	e := newEnv(t)
	svc := todoisttest.NewService(t)
	e.cfg.HTTPAddr = freeAddr(t)
	base := "http://" + e.cfg.HTTPAddr
	e.cfg.TodoistToken, e.cfg.TodoistURL, e.cfg.TodoistAuth = "", svc.URL, svc.AuthURL
	e.cfg.ClientID, e.cfg.ClientSecret = "tidy-client", "tidy-client-secret-0123"
	e.cfg.PublicURL, e.cfg.SecretKey = base, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	e.cfg.LogLevel = "info"
	logs := &syncBuffer{}
	stop := serveTeam(t, e, logs)
	stop()
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, accounts.CallbackPath) {
			line = l
		}
	}
	if !strings.Contains(line, "OAuth redirect URL") || !strings.Contains(line, "register") || !strings.Contains(line, base+accounts.CallbackPath) || strings.Contains(line, "people connect") {
		t.Errorf("team mode's start-up line: %q\nlogs:\n%s", line, logs.String())
	}
}
