package slack_test

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
)

// TestManifestEventsAreHandled: every event the manifest subscribes to
// reaches the bot as a message, so the list names no event the adapter
// would drop. (Adding one, such as message.mpim, is a line in BotEvents
// and a failing test here until incoming handles it.)
func TestManifestEventsAreHandled(t *testing.T) {
	channelType := map[string]string{"message.im": "im", "message.channels": "channel", "message.groups": "group", "message.mpim": "mpim"}
	channel := map[string]string{"im": "D1", "channel": "C1", "group": "G1", "mpim": "G2"}
	for _, sub := range slack.BotEvents {
		t.Run(sub.Event, func(t *testing.T) {
			a, srv := newAdapter(t)
			rec := &recorder{}
			var body []byte
			if typ, ok := channelType[sub.Event]; ok {
				// The message event alone (its app_mention twin is the
				// next case), addressed to the bot.
				body = srv.Events(slacktest.Message{Channel: channel[typ], ChannelType: typ, User: "U1", Text: slacktest.Mention + " what's due?", TS: "1.1"})[0]
			} else if sub.Event == "app_mention" {
				evs := srv.Events(slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U1", Text: slacktest.Mention + " what's due?", TS: "1.1"})
				body = evs[len(evs)-1]
				if !strings.Contains(string(body), `"app_mention"`) {
					t.Fatalf("no app_mention event: %s", body)
				}
			} else if sub.Event == "app_home_opened" {
				homeOpenedHandled(t, a, srv)
				return
			} else if strings.HasPrefix(sub.Event, "assistant_thread_") {
				paneEventHandled(t, a, srv, sub.Event)
				return
			} else {
				t.Fatalf("the manifest subscribes to %s, which this test does not know how to send", sub.Event)
			}
			w := httptest.NewRecorder()
			a.EventsHandler(rec).ServeHTTP(w, signed(t, "/slack/events", "application/json", body, secret, time.Now()))
			if got := rec.got(); w.Code != 200 || len(got) != 1 || got[0].Text != "what's due?" {
				t.Errorf("%s: status %d, handled %+v", sub.Event, w.Code, got)
			}
		})
	}
}

// TestManifestCommandsAreRead: each registered slash command, and each
// word its usage hint offers after /tidy, reaches the bot as a command.
func TestManifestCommandsAreRead(t *testing.T) {
	a, srv := newAdapter(t)
	var typed []string
	for _, c := range slack.SlashCommands() {
		typed = append(typed, c.Command)
		if c.UsageHint != "" {
			for _, w := range strings.Split(c.UsageHint, " | ") {
				typed = append(typed, c.Command+" "+w)
			}
		}
	}
	for _, s := range typed {
		cmd, text, _ := strings.Cut(s, " ")
		rec := &recorder{}
		form := srv.SlashCommand("C1", "U1", cmd, text)
		w := httptest.NewRecorder()
		a.CommandsHandler(rec).ServeHTTP(w, signed(t, "/slack/commands", "application/x-www-form-urlencoded", []byte(form.Encode()), secret, time.Now()))
		got := rec.got()
		if w.Code != 200 || len(got) != 1 || got[0].Command == "" || got[0].Command == "tidy" {
			t.Errorf("%q: status %d, handled %+v; want a command the bot knows", s, w.Code, got)
		}
	}
}

// TestManifestModes: Socket Mode names no URL; the HTTP manifest names
// the three routes the adapter serves, under the given address.
func TestManifestModes(t *testing.T) {
	var sock, web bytes.Buffer
	if err := slack.Manifest(&sock, ""); err != nil {
		t.Fatal(err)
	}
	if err := slack.Manifest(&web, "https://bot.example.org/"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sock.String(), "socket_mode_enabled: true\n") || strings.Contains(sock.String(), "url:") || strings.Contains(sock.String(), "http") {
		t.Errorf("the Socket Mode manifest:\n%s", sock.String())
	}
	for _, want := range []string{"socket_mode_enabled: false\n", `url: "https://bot.example.org/slack/commands"`,
		`request_url: "https://bot.example.org/slack/events"`, `request_url: "https://bot.example.org/slack/interactivity"`} {
		if !strings.Contains(web.String(), want) {
			t.Errorf("the HTTP manifest lacks %s:\n%s", want, web.String())
		}
	}
	for _, s := range slack.BotScopes() {
		if !strings.Contains(sock.String(), "      - "+s+"\n") {
			t.Errorf("scope %s missing", s)
		}
	}
}

// paneEventHandled: the assistant pane's events are answered 200 and
// reach the bot as no message; a started thread gets its suggested
// prompts.
func paneEventHandled(t *testing.T, a *slack.Adapter, srv *slacktest.Server, event string) {
	t.Helper()
	srv.Subscribe("message.im", "assistant_thread_started", "assistant_thread_context_changed")
	ts, body := srv.StartAssistantThread("U1", "C1")
	if event == "assistant_thread_context_changed" {
		body = srv.ChangeAssistantContext(srv.IM("U1"), ts, "C2")
	}
	rec := &recorder{}
	w := httptest.NewRecorder()
	a.EventsHandler(rec).ServeHTTP(w, signed(t, "/slack/events", "application/json", body, secret, time.Now()))
	if w.Code != 200 || len(rec.got()) != 0 {
		t.Errorf("%s: status %d, handled %+v", event, w.Code, rec.got())
	}
	if event != "assistant_thread_started" {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if p, _ := srv.AssistantThread(srv.IM("U1"), ts); len(p.Prompts) == len(slack.Prompts) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%s: no suggested prompts", event)
}
