package slack

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// Checked is what Slack says about the configured app (tidybot check).
type Checked struct {
	// Team and User are the workspace and the bot user (auth.test).
	Team, User string
	// Granted are the bot token's scopes, from the X-OAuth-Scopes header
	// of auth.test's answer; nil when Slack did not send it.
	Granted []string
	// Missing are the scopes of BotScopes that Granted lacks.
	Missing []string
	// SocketMode is apps.connections.open's error, with SLACK_APP_TOKEN
	// (nil: Slack gave a Socket Mode address, or no app token is set).
	SocketMode error
}

// Check asks Slack about cfg's tokens without starting the adapter:
// auth.test with the bot token, and, when cfg.AppToken is set,
// apps.connections.open, the first step of a Socket Mode connection
// (docs.slack.dev/reference/methods/apps.connections.open), without
// opening the WebSocket. Its error is auth.test's; every error is
// redacted of the tokens.
func Check(ctx context.Context, cfg Config) (Checked, error) {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	a := &Adapter{cfg: cfg, log: slog.New(slog.DiscardHandler)}
	api := slack.New(cfg.BotToken, slack.OptionAPIURL(cfg.APIURL), slack.OptionHTTPClient(cfg.HTTPClient), slack.OptionAppLevelToken(cfg.AppToken),
		slack.OptionLog(libLog{a}))
	auth, err := api.AuthTestContext(ctx)
	if err != nil {
		return Checked{}, fmt.Errorf("slack: auth.test: %w", a.redact(err))
	}
	c := Checked{Team: auth.Team, User: auth.User}
	// Every Web API answer lists the token's scopes in X-OAuth-Scopes,
	// comma-separated (slack-go: AuthTestResponse.Header and
	// OptionOnResponseHeaders, "headers like X-OAuth-Scopes").
	if h := auth.Header.Get("X-OAuth-Scopes"); h != "" {
		for _, s := range strings.Split(h, ",") {
			if s = strings.TrimSpace(s); s != "" {
				c.Granted = append(c.Granted, s)
			}
		}
		for _, s := range BotScopes() {
			if !slices.Contains(c.Granted, s) {
				c.Missing = append(c.Missing, s)
			}
		}
	}
	if cfg.AppToken != "" {
		if _, _, err := api.StartSocketModeContext(ctx); err != nil {
			c.SocketMode = fmt.Errorf("slack: apps.connections.open: %w", a.redact(err))
		}
	}
	return c, nil
}
