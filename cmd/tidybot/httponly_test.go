package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestServeRefusesToStartWithNoPlatform: serve with no platform token
// used to stay up "healthy", serving only /healthz, while no chat was
// served. It now stops at once naming the settings, unless
// TIDYBOT_HTTP_ONLY=true asks for the HTTP routes alone (the run
// inspector); a platform token needs no such setting.
func TestServeRefusesToStartWithNoPlatform(t *testing.T) {
	e := newEnv(t)
	e.cfg.HTTPOnly = false
	e.cfg.HTTPAddr = freeAddr(t)
	start := time.Now()
	err := (&Main{Args: []string{"serve"}, Config: &e.cfg, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}).Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "TELEGRAM_BOT_TOKEN") || !strings.Contains(err.Error(), "SLACK_BOT_TOKEN") || !strings.Contains(err.Error(), "TIDYBOT_HTTP_ONLY=true") {
		t.Fatalf("serve with no platform: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusal took %v", d)
	}

	cfg := validConfig()
	cfg.HTTPOnly = false
	if err := validate(cfg, true); err == nil {
		t.Error("Validate(serve) accepts no platform without TIDYBOT_HTTP_ONLY")
	}
	if err := validate(cfg, false); err != nil {
		t.Errorf("chat needs no platform: %v", err)
	}
	cfg.TelegramToken = "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11"
	if err := validate(cfg, true); err != nil {
		t.Errorf("a Telegram token is a platform: %v", err)
	}
	cfg.TelegramToken, cfg.SlackBotToken, cfg.SlackAppToken = "", "xoxb-1", "xapp-1"
	if err := validate(cfg, true); err != nil {
		t.Errorf("a Slack token is a platform: %v", err)
	}
}
