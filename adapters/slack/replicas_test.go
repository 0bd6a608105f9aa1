package slack_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/postgres"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// replica is one serve process's Slack adapter, with hooks as its
// response_url store (nil: its memory).
func replica(t *testing.T, srv *slacktest.Server, hooks slack.Hooks) *slack.Adapter {
	t.Helper()
	a, err := slack.New(t.Context(), slack.Config{BotToken: slacktest.Token, SigningSecret: secret, APIURL: srv.URL, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestResponseURLSharedByReplicas: a slash command received by one
// replica in a private channel the bot is not in is answered by others
// through its response_url, found in the shared PostgreSQL store; the
// replicas together keep within its 5 uses, the final answer's use kept.
func TestResponseURLSharedByReplicas(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	srv.NotMember("G9")
	u := pgtest.URL(t)
	stores := make([]*postgres.Store, 2)
	for i := range stores {
		st, err := postgres.Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		stores[i] = st
	}
	answerThroughResponseURL(t, srv, replica(t, srv, stores[0]), replica(t, srv, stores[1]))
}

// TestResponseURLInMemoryIsPerProcess: without a shared store (bbolt,
// one process), another adapter does not know the response_url — why
// replicas need Hooks.
func TestResponseURLInMemoryIsPerProcess(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	srv.NotMember("G9")
	a, b := replica(t, srv, nil), replica(t, srv, nil)
	command(t, a, srv, "G9")
	if _, err := b.Send(t.Context(), bot.Outgoing{ChatID: "G9", UserID: "U1", Text: "answer"}); err == nil || !strings.Contains(err.Error(), "not_in_channel") {
		t.Fatalf("another process answered without the response_url: %v", err)
	}
	if _, err := a.Send(t.Context(), bot.Outgoing{ChatID: "G9", UserID: "U1", Text: "answer"}); err != nil {
		t.Fatalf("the process that received the command: %v", err)
	}
}
