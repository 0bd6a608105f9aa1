package telegram_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/telegram"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
)

// TestRunSetsUpThenReceives: Routes serves POST /telegram/webhook only in
// webhook mode; Run registers the commands and the webhook, then waits
// for ctx (webhook) or polls and hands updates over (long polling).
func TestRunSetsUpThenReceives(t *testing.T) {
	srv := telegramtest.New()
	t.Cleanup(srv.Close)
	for _, hook := range []string{"https://bot.example.com/telegram/webhook", ""} {
		a, err := telegram.New(telegram.Config{Token: srv.Token, APIURL: srv.URL, WebhookURL: hook, WebhookSecret: "s3cret", PollTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		if err := a.Routes(mux, &recorder{}); err != nil {
			t.Fatal(err)
		}
		if _, pattern := mux.Handler(httptest.NewRequest(http.MethodPost, "/telegram/webhook", nil)); (pattern != "") != (hook != "") {
			t.Errorf("webhook %q: POST /telegram/webhook routed to %q", hook, pattern)
		}
		rec := &recorder{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx, rec) }()
		if hook == "" {
			srv.PushText(42, 42, "hello")
			deadline := time.Now().Add(5 * time.Second)
			for len(rec.got()) == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if got := rec.got(); len(got) != 1 || got[0].Text != "hello" {
				t.Errorf("polling handed over %+v", got)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook %q: Run = %v, want nil when ctx ends", hook, err)
		}
		if !strings.Contains(srv.Commands(), `"tidy_inbox"`) {
			t.Errorf("webhook %q: Run registered no commands: %s", hook, srv.Commands())
		}
		if hook != "" && srv.Webhook()["url"] != hook {
			t.Errorf("Run set no webhook: %v", srv.Webhook())
		}
	}
}
