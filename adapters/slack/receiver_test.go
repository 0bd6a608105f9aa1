package slack_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
)

// TestRoutesOnlyWithASigningSecret: Routes serves the three signed
// endpoints when SLACK_SIGNING_SECRET is set and none without it (Socket
// Mode alone); Run without an app token waits for ctx and returns nil.
func TestRoutesOnlyWithASigningSecret(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	for _, sec := range []string{secret, ""} {
		a, err := slack.New(t.Context(), slack.Config{BotToken: slacktest.Token, SigningSecret: sec, APIURL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		if err := a.Routes(mux, &recorder{}); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/slack/events", "/slack/commands", "/slack/interactivity"} {
			_, pattern := mux.Handler(httptest.NewRequest(http.MethodPost, path, nil))
			if (pattern != "") != (sec != "") {
				t.Errorf("secret %q: POST %s routed to %q", sec, path, pattern)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		err = a.Run(ctx, &recorder{})
		cancel()
		if err != nil {
			t.Errorf("Run without an app token: %v, want nil when ctx ends", err)
		}
	}
}
