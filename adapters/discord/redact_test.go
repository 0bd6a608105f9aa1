package discord

import (
	"errors"
	"strings"
	"testing"
)

// Errors never show the bot token nor an interaction's token (the
// library's errors carry request URLs; Discord's answer may echo the
// token).
func TestNoTokenInLogsOrErrors(t *testing.T) {
	const token, hook = "bot-secret-token-123", "aW50ZXJhY3Rpb246secret"
	err := errors.New(`Patch "https://discord.com/api/v9/webhooks/1234/` + hook + `/messages/@original": dial tcp: refused; HTTP 401, {"message": "bad token ` + token + `"}`)
	got := redact(err, token).Error()
	if strings.Contains(got, token) || strings.Contains(got, hook) {
		t.Fatalf("redact kept a token: %s", got)
	}
	if !strings.Contains(got, "/webhooks/1234/<token>/messages") || !strings.Contains(got, "<DISCORD_BOT_TOKEN>") {
		t.Fatalf("redact = %s", got)
	}
	if redact(nil, token) != nil {
		t.Fatal("redact(nil) is not nil")
	}
}
