package slack_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/agent"
)

// TestNewSaysWhyItCannotConnect: a network failure at start is said as
// one (unreachable, with the reason, worth waiting for), never blamed
// on the token; a token Slack refuses (invalid_auth) is said as the
// token's fault.
func TestNewSaysWhyItCannotConnect(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: refused
	for _, tt := range []struct {
		name, token, url string
		unreachable      bool
		want             string
	}{
		{name: "refused", token: slacktest.Token, url: "http://" + addr + "/api/", unreachable: true,
			want: "slack: auth.test: could not reach Slack at " + addr + " (connection refused): check the network connection and SLACK_API_URL"},
		{name: "DNS", token: slacktest.Token, url: "http://nonexistent.invalid/api/", unreachable: true,
			want: "slack: auth.test: could not reach Slack at nonexistent.invalid (host not found)"},
		{name: "token refused", token: "xoxb-wrong", url: srv.URL,
			want: "slack: auth.test: Slack refused the token (invalid_auth): check SLACK_BOT_TOKEN"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := slack.New(t.Context(), slack.Config{BotToken: tt.token, AppToken: slacktest.AppToken, APIURL: tt.url})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("New: %v; want %q…", err, tt.want)
			}
			var ae *agent.Error
			if got := errors.As(err, &ae) && ae.Code == agent.ErrUnreachable; got != tt.unreachable {
				t.Errorf("unreachable = %v, want %v", got, tt.unreachable)
			}
			if tt.unreachable && strings.Contains(err.Error(), "check SLACK_BOT_TOKEN") {
				t.Errorf("a network failure blames the token: %v", err)
			}
			if strings.Contains(err.Error(), tt.token) {
				t.Errorf("the error holds the token: %v", err)
			}
		})
	}
}
