package slack_test

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

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

// command delivers a slash command in channel to a.
func command(t *testing.T, a *slack.Adapter, srv *slacktest.Server, channel string) {
	t.Helper()
	form := srv.SlashCommand(channel, "U1", "/tidy-inbox", "")
	rec := &recorder{}
	w := httptest.NewRecorder()
	a.CommandsHandler(rec).ServeHTTP(w, signed(t, "/slack/commands", "application/x-www-form-urlencoded", []byte(form.Encode()), secret, time.Now()))
	if w.Code != 200 || len(rec.got()) != 1 {
		t.Fatalf("command: %d %+v", w.Code, rec.got())
	}
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
	a, b := replica(t, srv, stores[0]), replica(t, srv, stores[1])
	ctx := t.Context()

	command(t, a, srv, "G9") // a receives the command …
	out := bot.Outgoing{ChatID: "G9", Text: "🤔 Working on it…"}
	status, err := b.Send(ctx, out) // … b runs it
	if err != nil {
		t.Fatalf("status message from the other replica: %v", err)
	}
	for i := range 6 { // more progress than a response_url takes, from both
		out.Text = "🤔 Working on it…\n🔎 step " + strconv.Itoa(i)
		if err := []*slack.Adapter{a, b}[i%2].Edit(ctx, status, out); err != nil {
			t.Errorf("progress edit %d: %v", i, err)
		}
	}
	out.Text = "Tidied your inbox: 9 tasks into 3 projects."
	if _, err := b.Send(ctx, out); err != nil {
		t.Fatalf("final answer from the other replica: %v", err)
	}
	ps := srv.Posts("G9")
	var shown []string
	for _, p := range ps {
		if !p.ResponseURL || !p.Ephemeral {
			t.Errorf("post %+v: want an ephemeral answer through the response_url", p)
		}
		shown = append(shown, p.Shown())
	}
	all := strings.Join(shown, "\n")
	if len(ps) > 5 || !strings.HasPrefix(all, "🤔 Working on it…") || !strings.Contains(all, "step") || !strings.HasSuffix(all, "Tidied your inbox: 9 tasks into 3 projects.") {
		t.Errorf("the user saw %d posts:\n%s\nwant the status, progress and the final answer within 5 posts", len(ps), all)
	}
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
	if _, err := b.Send(t.Context(), bot.Outgoing{ChatID: "G9", Text: "answer"}); err == nil || !strings.Contains(err.Error(), "not_in_channel") {
		t.Fatalf("another process answered without the response_url: %v", err)
	}
	if _, err := a.Send(t.Context(), bot.Outgoing{ChatID: "G9", Text: "answer"}); err != nil {
		t.Fatalf("the process that received the command: %v", err)
	}
}
