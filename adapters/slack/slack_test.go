package slack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/bot"
)

const secret = "8f742231b10e8888abcd99yyyzzz85a5"

func TestSignatureVectors(t *testing.T) {
	body := "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	if got, want := slack.Sign(secret, "1531420618", []byte(body)), "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"; got != want {
		t.Errorf("Slack's documented example: got %s, want %s", got, want)
	}
	now := time.Unix(1531420618, 0)
	sig := "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
	for _, tt := range []struct {
		name   string
		secret string
		ts     string
		sig    string
		body   string
		at     time.Time
		want   bool
	}{
		{"valid", secret, "1531420618", sig, body, now, true},
		{"tampered body", secret, "1531420618", sig, body + "x", now, false},
		{"wrong secret", "other", "1531420618", sig, body, now, false},
		{"301 s late", secret, "1531420618", sig, body, now.Add(301 * time.Second), false},
		{"301 s early", secret, "1531420618", sig, body, now.Add(-301 * time.Second), false},
		{"empty secret", "", "1531420618", sig, body, now, false},
		{"no signature", secret, "1531420618", "", body, now, false},
		{"no timestamp", secret, "", sig, body, now, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := slack.Verify(tt.secret, tt.ts, tt.sig, []byte(tt.body), tt.at); got != tt.want {
				t.Errorf("Verify = %v, want %v", got, tt.want)
			}
		})
	}
}

type recorder struct {
	mu  sync.Mutex
	ins []bot.Incoming
}

func (r *recorder) Handle(_ context.Context, in bot.Incoming) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ins = append(r.ins, in)
	return nil
}

func (r *recorder) got() []bot.Incoming {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bot.Incoming(nil), r.ins...)
}

func newAdapter(t *testing.T) (*slack.Adapter, *slacktest.Server) {
	t.Helper()
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	a, err := slack.New(t.Context(), slack.Config{BotToken: slacktest.Token, SigningSecret: secret, APIURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return a, srv
}

// deliver posts each Events API callback to h, signed as Slack signs
// it, and fails unless h answers 200.
func deliver(t *testing.T, h http.Handler, evs [][]byte) {
	t.Helper()
	for _, ev := range evs {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, signed(t, "/slack/events", "application/json", ev, secret, time.Now()))
		if w.Code != 200 {
			t.Fatalf("status %d", w.Code)
		}
	}
}

func signed(t *testing.T, path, contentType string, body []byte, sec string, at time.Time) *http.Request {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(string(body)))
	ts := strconv.FormatInt(at.Unix(), 10)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", slacktest.Sign(sec, ts, body))
	return req
}

func TestEvents(t *testing.T) {
	a, _ := newAdapter(t)
	rec := &recorder{}
	h := a.EventsHandler(rec)
	now := time.Now()
	do := func(req *http.Request) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	// URL verification answers the challenge.
	w := do(signed(t, "/slack/events", "application/json", []byte(`{"type":"url_verification","challenge":"abc123","token":"x"}`), secret, now))
	if w.Code != 200 || w.Body.String() != "abc123" {
		t.Errorf("url_verification: %d %q", w.Code, w.Body.String())
	}
	for _, tt := range []struct {
		name string
		req  *http.Request
		code int
	}{
		{"forged", signed(t, "/slack/events", "application/json", slacktest.MessageEvent("Ev0", "D1", "im", "U1", "hi", "1.1", ""), "wrong-secret", now), 401},
		{"stale", signed(t, "/slack/events", "application/json", slacktest.MessageEvent("Ev0", "D1", "im", "U1", "hi", "1.1", ""), secret, now.Add(-10*time.Minute)), 401},
		{"malformed", signed(t, "/slack/events", "application/json", []byte(`{"type":`), secret, now), 400},
		{"dm", signed(t, "/slack/events", "application/json", slacktest.MessageEvent("Ev1", "D1", "im", "U1", "what's due today?", "1.1", ""), secret, now), 200},
		{"channel", signed(t, "/slack/events", "application/json", slacktest.MessageEvent("Ev2", "C1", "channel", "U1", slacktest.Mention+" /tidy-inbox", "2.2", ""), secret, now), 200},
		{"own message", signed(t, "/slack/events", "application/json", slacktest.MessageEvent("Ev3", "D1", "im", slacktest.BotUserID, "Done.", "3.3", ""), secret, now), 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if w := do(tt.req); w.Code != tt.code {
				t.Errorf("status %d, want %d", w.Code, tt.code)
			}
		})
	}
	// A message_changed subtype is ignored too.
	edited, _ := json.Marshal(map[string]any{"type": "event_callback", "event_id": "Ev4", "event": map[string]any{"type": "message", "subtype": "message_changed", "channel": "D1", "channel_type": "im"}})
	if w := do(signed(t, "/slack/events", "application/json", edited, secret, now)); w.Code != 200 {
		t.Errorf("message_changed: %d", w.Code)
	}
	got := rec.got()
	if len(got) != 2 {
		t.Fatalf("handled %+v", got)
	}
	if got[0].EventID != "msg:D1:1.1" || !got[0].DM || got[0].ThreadID != "" || got[0].UserID != "U1" {
		t.Errorf("dm: %+v", got[0])
	}
	if got[1].Command != "tidy-inbox" || got[1].ThreadID != "2.2" || got[1].DM {
		t.Errorf("channel message: %+v (want a command threaded under its message)", got[1])
	}
}

func TestSlashCommandAndButtons(t *testing.T) {
	a, _ := newAdapter(t)
	rec := &recorder{}
	now := time.Now()
	form := url.Values{"command": {"/tidy-inbox"}, "text": {""}, "user_id": {"U1"}, "channel_id": {"C1"}, "trigger_id": {"t1"}, "team_id": {"T1"}}
	w := httptest.NewRecorder()
	a.CommandsHandler(rec).ServeHTTP(w, signed(t, "/slack/commands", "application/x-www-form-urlencoded", []byte(form.Encode()), secret, now))
	if w.Code != 200 {
		t.Fatalf("slash command: %d", w.Code)
	}
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": "t2", "user": map[string]any{"id": "U1"}, "channel": map[string]any{"id": "C1"},
		"container": map[string]any{"type": "message", "message_ts": "5.5", "channel_id": "C1", "thread_ts": "2.2"},
		"actions":   []map[string]any{{"type": "button", "action_id": "choice_0", "block_id": "choices", "value": "w:abcd1234:y"}},
	})
	body := url.Values{"payload": {string(payload)}}.Encode()
	w = httptest.NewRecorder()
	a.InteractivityHandler(rec).ServeHTTP(w, signed(t, "/slack/interactivity", "application/x-www-form-urlencoded", []byte(body), secret, now))
	if w.Code != 200 {
		t.Fatalf("button: %d", w.Code)
	}
	w = httptest.NewRecorder()
	a.InteractivityHandler(rec).ServeHTTP(w, signed(t, "/slack/interactivity", "application/x-www-form-urlencoded", []byte("payload=%7Bnot-json"), secret, now))
	if w.Code != 400 {
		t.Errorf("malformed payload: %d", w.Code)
	}
	got := rec.got()
	if len(got) != 2 || got[0].Command != "tidy-inbox" || got[0].ChatID != "C1" || got[1].Button != "w:abcd1234:y" || got[1].ThreadID != "2.2" {
		t.Errorf("handled %+v", got)
	}
}

func TestPostInThreadWithButtonsAndEdit(t *testing.T) {
	a, srv := newAdapter(t)
	ts, err := a.Send(t.Context(), bot.Outgoing{ChatID: "C1", ThreadID: "2.2", Text: "Delete \"Buy cake\"? <b>", Buttons: []bot.Button{{Label: "Delete 1 task", Data: "w:k:y"}, {Label: "Cancel", Data: "w:k:n"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Edit(t.Context(), ts, bot.Outgoing{ChatID: "C1", ThreadID: "2.2", Text: "Delete \"Buy cake\"?\n→ yes"}); err != nil {
		t.Fatal(err)
	}
	ps := srv.Posts("C1")
	if len(ps) != 1 || ps[0].ThreadTS != "2.2" || ps[0].Updates != 1 || len(ps[0].Buttons) != 0 || !strings.Contains(ps[0].Text, "→ yes") {
		t.Errorf("posts: %+v", ps)
	}
}

// A 429 on a call the bot's send queue makes is not waited out here: the
// error carries Retry-After (bot.RateLimited) so the queue pauses.
func TestRateLimitGoesToTheQueue(t *testing.T) {
	a, srv := newAdapter(t)
	srv.RateLimit("chat.postMessage", 1)
	_, err := a.Send(t.Context(), bot.Outgoing{ChatID: "C1", Text: "after a 429"})
	var rl bot.RateLimited
	if !errors.As(err, &rl) || rl.RetryAfter() != time.Second {
		t.Fatalf("err = %v, want a bot.RateLimited with retry after 1s", err)
	}
	if n := srv.Calls("chat.postMessage"); n != 1 {
		t.Errorf("chat.postMessage called %d times: the adapter retried by itself", n)
	}
	ts, err := a.Send(t.Context(), bot.Outgoing{ChatID: "C1", Text: "now"})
	if err != nil {
		t.Fatal(err)
	}
	srv.RateLimit("chat.update", 1)
	if err := a.Edit(t.Context(), ts, bot.Outgoing{ChatID: "C1", Text: "edited"}); !errors.As(err, &rl) {
		t.Errorf("edit: err = %v, want a bot.RateLimited", err)
	}
}

func TestSocketMode(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	a, err := slack.New(t.Context(), slack.Config{BotToken: slacktest.Token, AppToken: slacktest.AppToken, APIURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.RunSocketMode(ctx, rec) }()
	deadline := time.Now().Add(10 * time.Second)
	for !srv.Connected() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var ev map[string]any
	_ = json.Unmarshal(slacktest.MessageEvent("Ev9", "D1", "im", "U1", "what's due today?", "9.1", ""), &ev)
	e1 := srv.Push("events_api", ev)
	e2 := srv.Push("slash_commands", map[string]any{"command": "/tidy-inbox", "text": "", "user_id": "U1", "channel_id": "C1", "trigger_id": "t9"})
	for !(srv.Acked(e1) && srv.Acked(e2)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := rec.got()
	if !srv.Acked(e1) || !srv.Acked(e2) || len(got) != 2 {
		t.Fatalf("acked %v %v; handled %+v", srv.Acked(e1), srv.Acked(e2), got)
	}
	if got[0].Text != "what's due today?" || got[0].EventID != "msg:D1:9.1" || got[1].Command != "tidy-inbox" {
		t.Errorf("handled %+v", got)
	}
}

// dedupe is a Handler that, like the bot, handles an event id once.
type dedupe struct {
	recorder
	seen map[string]bool
}

func (d *dedupe) Handle(ctx context.Context, in bot.Incoming) error {
	d.mu.Lock()
	if d.seen == nil {
		d.seen = map[string]bool{}
	}
	if d.seen[in.EventID] {
		d.mu.Unlock()
		return nil
	}
	d.seen[in.EventID] = true
	d.mu.Unlock()
	return d.recorder.Handle(ctx, in)
}

func TestOneMentionRunsOnce(t *testing.T) {
	for _, reversed := range []bool{false, true} {
		t.Run(map[bool]string{false: "message first", true: "app_mention first"}[reversed], func(t *testing.T) {
			a, srv := newAdapter(t)
			rec := &dedupe{}
			h := a.EventsHandler(rec)
			evs := srv.Events(slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U1", Text: slacktest.Mention + " move the cake task to Birthday", TS: "5.5"})
			if len(evs) != 2 {
				t.Fatalf("the fake sent %d events for a mention, want 2 (message.channels and app_mention)", len(evs))
			}
			if reversed {
				evs[0], evs[1] = evs[1], evs[0]
			}
			deliver(t, h, evs)
			got := rec.got()
			if len(got) != 1 {
				t.Fatalf("one mention handled %d times: %+v", len(got), got)
			}
			if got[0].Text != "move the cake task to Birthday" || got[0].ThreadID != "5.5" || got[0].DM {
				t.Errorf("handled %+v: want the text without the mention, threaded under its message", got[0])
			}
		})
	}
}

// threads is a Threads the test fills.
type threads struct {
	known map[string]bool
	err   error
}

func (th threads) KnowsThread(_ context.Context, platform, chat, thread string) (bool, error) {
	return th.known[platform+":"+chat+":"+thread], th.err
}

func TestChannelsAnswerOnlyWhatIsAddressedToTheBot(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	a, err := slack.New(t.Context(), slack.Config{BotToken: slacktest.Token, SigningSecret: secret, APIURL: srv.URL,
		Threads: threads{known: map[string]bool{"slack:C1:7.0": true}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		m    slacktest.Message
		want bool
	}{
		{"an allowed user's chatter", slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U1", Text: "I'll be late today", TS: "1.1"}, false},
		{"a stranger's chatter", slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U666", Text: "lunch anyone?", TS: "1.2"}, false},
		{"a typed command not addressed to the bot", slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U1", Text: "/undo", TS: "1.3"}, false},
		{"a reply in a thread the bot is not part of", slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U1", Text: "agreed", TS: "8.1", ThreadTS: "8.0"}, false},
		{"chatter in a group DM", slacktest.Message{Channel: "G1", ChannelType: "mpim", User: "U1", Text: "see you", TS: "1.4"}, false},
		{"a mention", slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U1", Text: "<@UBOT|tidybot> what's due today?", TS: "2.1"}, true},
		{"a reply in a thread the bot is part of", slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U1", Text: "the second one", TS: "7.2", ThreadTS: "7.0"}, true},
		{"a private channel mention", slacktest.Message{Channel: "G2", ChannelType: "group", User: "U1", Text: slacktest.Mention + " /undo", TS: "3.1"}, true},
		{"a DM", slacktest.Message{Channel: "D1", ChannelType: "im", User: "U1", Text: "what's due today?", TS: "4.1"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &dedupe{}
			h := a.EventsHandler(rec)
			deliver(t, h, srv.Events(tt.m))
			got := rec.got()
			if handled := len(got) > 0; handled != tt.want {
				t.Fatalf("handled %+v, want handled = %v", got, tt.want)
			}
			if tt.want && (len(got) != 1 || strings.Contains(got[0].Text, "UBOT")) {
				t.Errorf("handled %+v", got)
			}
		})
	}
	t.Run("the thread store failing", func(t *testing.T) {
		a, err := slack.New(t.Context(), slack.Config{BotToken: slacktest.Token, SigningSecret: secret, APIURL: srv.URL, Threads: threads{err: errors.New("disk")}})
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		ev := srv.Events(slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U1", Text: "ok", TS: "9.2", ThreadTS: "9.0"})[0]
		a.EventsHandler(&recorder{}).ServeHTTP(w, signed(t, "/slack/events", "application/json", ev, secret, time.Now()))
		if w.Code != http.StatusServiceUnavailable {
			t.Errorf("status %d, want 503 so that Slack retries", w.Code)
		}
	})
}

func TestSocketModeAcksOnlyEnvelopes(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	a, err := slack.New(t.Context(), slack.Config{BotToken: slacktest.Token, AppToken: slacktest.AppToken, APIURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.RunSocketMode(ctx, &recorder{}) }()
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("the connection", srv.Connected)
	first := srv.PushEvents(slacktest.Message{Channel: "D1", ChannelType: "im", User: "U1", Text: "hi", TS: "1.1"})
	wait("the first ack", func() bool { return srv.Acked(first[0]) })
	srv.Disconnect() // Slack refreshes the connection: the client opens another (and gets another hello)
	wait("the new connection", func() bool {
		id := srv.PushEvents(slacktest.Message{Channel: "D1", ChannelType: "im", User: "U1", Text: "again", TS: "2.1"})[0]
		time.Sleep(50 * time.Millisecond)
		return srv.Acked(id)
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if stray := srv.StrayAcks(); len(stray) != 0 {
		t.Errorf("acks that name no envelope (hello or disconnect acknowledged): %q", stray)
	}
}

func TestEditLongerThanOnePartKeepsTheWholeText(t *testing.T) {
	a, srv := newAdapter(t)
	ts, err := a.Send(t.Context(), bot.Outgoing{ChatID: "C1", ThreadID: "2.2", Text: "🤔 Working on it…"})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i := range 120 {
		lines = append(lines, "➡️ Moved “Buy cake for the office party” to Birthday, step "+strconv.Itoa(i))
	}
	long := strings.Join(lines, "\n") // about 7,000 characters: over one section's 3,000
	if err := a.Edit(t.Context(), ts, bot.Outgoing{ChatID: "C1", ThreadID: "2.2", Text: long}); err != nil {
		t.Fatal(err)
	}
	ps := srv.Posts("C1")
	if len(ps) != 1 {
		t.Fatalf("posts: %d, want the one message edited", len(ps))
	}
	shown := ps[0].Shown()
	if !strings.HasPrefix(shown, lines[0]) || !strings.HasSuffix(shown, lines[len(lines)-1]) || len(ps[0].Sections) < 3 {
		t.Errorf("edited message shows %d characters in %d sections, from %q to %q: want the whole text",
			len([]rune(shown)), len(ps[0].Sections), shown[:min(60, len(shown))], shown[max(0, len(shown)-60):])
	}
}

// registered returns the slash commands deploy/slack-manifest.yaml
// registers: Slack delivers no other (api.slack.com/interactivity/slash-commands).
func registered(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile("../../deploy/slack-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		if c, ok := strings.CutPrefix(strings.TrimSpace(line), "- command: "); ok {
			out[c] = true
		}
	}
	return out
}

func TestTidySubcommands(t *testing.T) {
	a, srv := newAdapter(t)
	reg := registered(t)
	for _, tt := range []struct {
		typed    string // what the user types in Slack
		want     string // the bot's command
		wantText string
	}{
		{"/tidy-inbox", "tidy-inbox", ""},
		{"/tidy undo", "undo", ""},
		{"/tidy cancel", "cancel", ""},
		{"/tidy reset", "reset", ""},
		{"/tidy usage", "usage", ""},
		{"/tidy help", "help", ""},
		{"/tidy connect", "connect", ""},
		{"/tidy disconnect", "disconnect", ""},
		{"/tidy", "help", ""},
		{"/tidy Undo", "undo", ""},
		{"/tidy inbox", "tidy-inbox", ""},
		{"/tidy what's due today?", "tidy", "what's due today?"},
	} {
		t.Run(tt.typed, func(t *testing.T) {
			cmd, text, _ := strings.Cut(tt.typed, " ")
			if !reg[cmd] {
				t.Fatalf("%s is not registered in deploy/slack-manifest.yaml: Slack rejects it before it reaches us", cmd)
			}
			rec := &recorder{}
			form := srv.SlashCommand("C1", "U1", cmd, text)
			w := httptest.NewRecorder()
			a.CommandsHandler(rec).ServeHTTP(w, signed(t, "/slack/commands", "application/x-www-form-urlencoded", []byte(form.Encode()), secret, time.Now()))
			got := rec.got()
			if w.Code != 200 || len(got) != 1 || got[0].Command != tt.want || got[0].Text != tt.wantText {
				t.Errorf("status %d, handled %+v; want command %q text %q", w.Code, got, tt.want, tt.wantText)
			}
		})
	}
	// Typed as a message (a DM), /tidy undo is the same command.
	rec := &recorder{}
	for _, ev := range srv.Events(slacktest.Message{Channel: "D1", ChannelType: "im", User: "U1", Text: "/tidy undo", TS: "1.1"}) {
		a.EventsHandler(rec).ServeHTTP(httptest.NewRecorder(), signed(t, "/slack/events", "application/json", ev, secret, time.Now()))
	}
	if got := rec.got(); len(got) != 1 || got[0].Command != "undo" {
		t.Errorf("typed /tidy undo: %+v", got)
	}
}

func TestSlashCommandWhereTheBotIsNotAMember(t *testing.T) {
	a, srv := newAdapter(t)
	srv.NotMember("G9") // a private channel: chat:write.public does not reach it
	if _, err := a.Send(t.Context(), bot.Outgoing{ChatID: "G9", Text: "hi"}); err == nil {
		t.Fatal("posting where the bot is not a member worked: the fake does not model not_in_channel")
	}
	answerThroughResponseURL(t, srv, a)
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

// answerThroughResponseURL runs a slash command in G9, a channel the
// bot is not in: the first of as receives it, the last posts the status
// message and the final answer, and all of them in turn make more
// progress edits than a response_url takes. The user must see the
// status, progress and the final answer, all through the response_url
// and within its 5 uses, the final answer's use kept.
func answerThroughResponseURL(t *testing.T, srv *slacktest.Server, as ...*slack.Adapter) {
	t.Helper()
	ctx := t.Context()
	runner := as[len(as)-1]
	command(t, as[0], srv, "G9")
	out := bot.Outgoing{ChatID: "G9", UserID: "U1", RunID: "r1", Text: "🤔 Working on it…"}
	status, err := runner.Send(ctx, out)
	if err != nil {
		t.Fatalf("status message: %v", err)
	}
	for i := range 6 { // more progress than a response_url takes (5 posts)
		out.Text = "🤔 Working on it…\n🔎 step " + strconv.Itoa(i)
		if err := as[i%len(as)].Edit(ctx, status, out); err != nil {
			t.Errorf("progress edit %d: %v", i, err)
		}
	}
	out.Text = "Tidied your inbox: 9 tasks into 3 projects."
	if _, err := runner.Send(ctx, out); err != nil {
		t.Fatalf("final answer: %v", err)
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

func TestNoTokenInLogsOrErrors(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	srv.EchoTokens() // every error answer repeats the request's token
	srv.NotMember("C9")
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var errs []string
	const badBot, badApp = "xoxb-wrong-SECRET1", "xapp-wrong-SECRET2"

	_, err := slack.New(t.Context(), slack.Config{BotToken: badBot, APIURL: srv.URL, Logger: log})
	if err == nil {
		t.Fatal("a wrong token was accepted")
	}
	errs = append(errs, err.Error())

	a, err := slack.New(t.Context(), slack.Config{BotToken: slacktest.Token, SigningSecret: secret, AppToken: badApp, APIURL: srv.URL, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(t.Context(), bot.Outgoing{ChatID: "C9", Text: "hi"}); err != nil {
		errs = append(errs, err.Error())
	} else {
		t.Error("posting where the bot is not a member worked")
	}
	if err := a.Edit(t.Context(), "1.1", bot.Outgoing{ChatID: "C9", Text: "hi"}); err != nil {
		errs = append(errs, err.Error())
	}
	// slack-go retries an apps.connections.open error it does not know
	// as fatal (the echoed "invalid_auth token=…" is not "invalid_auth"):
	// each failure is logged.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.RunSocketMode(ctx, &recorder{}) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "Socket Mode connection failed") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		errs = append(errs, err.Error())
	}
	all := strings.Join(errs, "\n") + "\n" + logs.String()
	if !strings.Contains(all, "invalid_auth") || !strings.Contains(all, "not_in_channel") {
		t.Fatalf("the errors do not say what went wrong:\n%s", all)
	}
	for _, tok := range []string{badBot, badApp, slacktest.Token, secret} {
		if strings.Contains(all, tok) {
			t.Errorf("%s appears in an error or a log line:\n%s", tok, all)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLongQuestionIsOneMessageItsEditKeeps(t *testing.T) {
	a, srv := newAdapter(t)
	question := strings.Repeat("Which of these should go to Birthday? “Buy cake for the office party”\n", 70) + "Pick one."
	out := bot.Outgoing{ChatID: "C1", ThreadID: "2.2", Text: question, Buttons: []bot.Button{{Label: "Birthday", Data: "w:k:0"}, {Label: "Errands", Data: "w:k:1"}}}
	id, err := a.Send(t.Context(), out)
	if err != nil {
		t.Fatal(err)
	}
	out.Text, out.Buttons = question+"\n→ Birthday", nil
	if err := a.Edit(t.Context(), id, out); err != nil {
		t.Fatal(err)
	}
	ps := srv.Posts("C1")
	if len(ps) != 1 || !strings.HasPrefix(ps[0].Shown(), "Which of these") || !strings.HasSuffix(ps[0].Shown(), "Pick one.\n→ Birthday") || len(ps[0].Buttons) != 0 {
		t.Errorf("got %d posts; the question's message shows %d characters: want the whole question, then the choice, once", len(ps), len([]rune(ps[len(ps)-1].Shown())))
	}
}

// TestLongestAnswerIsOneMessage: the bot cuts an answer or question to
// MaxText; that much, with its buttons, is still one message shown whole.
func TestLongestAnswerIsOneMessage(t *testing.T) {
	a, srv := newAdapter(t)
	text := strings.Repeat("x", a.MaxText()-len("Pick one.")) + "Pick one."
	if a.MaxText() <= 3000 {
		t.Errorf("MaxText = %d: the bot would cut an answer to one section's 3,000 characters though a message holds several", a.MaxText())
	}
	if _, err := a.Send(t.Context(), bot.Outgoing{ChatID: "C1", Text: text, Buttons: []bot.Button{{Label: "Yes", Data: "w:k:0"}}}); err != nil {
		t.Fatal(err)
	}
	ps := srv.Posts("C1")
	if len(ps) != 1 || strings.ReplaceAll(ps[0].Shown(), "\n", "") != text || len(ps[0].Buttons) != 1 { // sections show as lines
		t.Errorf("got %d posts; want one showing all %d characters with its button", len(ps), len(text))
	}
}

// TestCommandNamesRoundTrip: each command as the help spells it is a
// slash command the app registers, read back as that command.
func TestCommandNamesRoundTrip(t *testing.T) {
	a, _ := newAdapter(t)
	manifest, err := os.ReadFile("../../deploy/slack-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"tidy-inbox", "undo", "cancel", "reset", "usage", "help"} {
		typed := a.CommandName(name)
		cmd, text, _ := strings.Cut(typed, " ")
		if !strings.Contains(string(manifest), "command: "+cmd+"\n") {
			t.Errorf("%s is spelled %q; the manifest registers no %s", name, typed, cmd)
		}
		rec := &recorder{}
		form := url.Values{"command": {cmd}, "text": {text}, "user_id": {"U1"}, "channel_id": {"D1"}, "trigger_id": {"t" + strconv.Itoa(i)}, "team_id": {"T1"}}
		w := httptest.NewRecorder()
		a.CommandsHandler(rec).ServeHTTP(w, signed(t, "/slack/commands", "application/x-www-form-urlencoded", []byte(form.Encode()), secret, time.Now()))
		if got := rec.got(); w.Code != 200 || len(got) != 1 || got[0].Command != name {
			t.Errorf("%q is read as %+v (status %d), want command %s", typed, got, w.Code, name)
		}
	}
}

// The fake, as Slack, edits no ephemeral message: "Ephemeral messages
// can't be updated in this way" (api.slack.com/messaging/modifying).
func TestFakeUpdatesNoEphemeralMessage(t *testing.T) {
	srv := slacktest.New()
	defer srv.Close()
	for _, tc := range []struct {
		post, tsField string
		form          url.Values
		wantOK        bool
	}{
		{"chat.postMessage", "ts", url.Values{"channel": {"D1"}, "text": {"hi"}}, true},
		{"chat.postEphemeral", "message_ts", url.Values{"channel": {"D1"}, "user": {"U1"}, "text": {"hi"}}, false},
	} {
		posted := srv.Call(t, tc.post, tc.form)
		ts, _ := posted[tc.tsField].(string)
		if posted["ok"] != true || ts == "" {
			t.Fatalf("%s: %v", tc.post, posted)
		}
		got := srv.Call(t, "chat.update", url.Values{"channel": {"D1"}, "ts": {ts}, "text": {"edited"}})
		if got["ok"] != tc.wantOK {
			t.Errorf("chat.update of a %s message: %v, want ok %v", tc.post, got, tc.wantOK)
		}
	}
}

// TestSlashCommandDMIsTheBotsOwnIMOnly: a slash command is a direct
// conversation only in the bot's own IM with its user (what
// conversations.open answers, which needs the im:write scope); in a DM
// between two people, or when Slack cannot say, it is shared (keyed per
// person).
func TestSlashCommandDMIsTheBotsOwnIMOnly(t *testing.T) {
	manifest, err := os.ReadFile("../../deploy/slack-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(manifest), "- im:write\n") {
		t.Error("the manifest lacks im:write: conversations.open would answer missing_scope")
	}
	a, srv := newAdapter(t)
	for i, tt := range []struct {
		channel, user string
		dm            bool
	}{
		{srv.IM("U1"), "U1", true},
		{"D9", "U1", false}, // U1's DM with someone else
		{"D1", "U2", false}, // U1's IM with the bot, seen by U2: not U2's
		{"C1", "U1", false}, // a channel
		{srv.IM("U1"), "U1", true},
	} {
		rec := &recorder{}
		form := srv.SlashCommand(tt.channel, tt.user, "/tidy", "undo")
		form.Set("trigger_id", "t"+strconv.Itoa(i))
		w := httptest.NewRecorder()
		a.CommandsHandler(rec).ServeHTTP(w, signed(t, "/slack/commands", "application/x-www-form-urlencoded", []byte(form.Encode()), secret, time.Now()))
		if got := rec.got(); w.Code != 200 || len(got) != 1 || got[0].DM != tt.dm {
			t.Errorf("/tidy undo by %s in %s: %+v (status %d), want DM %v", tt.user, tt.channel, got, w.Code, tt.dm)
		}
	}
	if n := srv.Opens(); n != 2 {
		t.Errorf("conversations.open called %d times, want 2 (once per person)", n)
	}

	// Slack cannot say: shared.
	srv.RateLimit("conversations.open", 100)
	rec := &recorder{}
	form := srv.SlashCommand(srv.IM("U3"), "U3", "/tidy", "undo")
	w := httptest.NewRecorder()
	a.CommandsHandler(rec).ServeHTTP(w, signed(t, "/slack/commands", "application/x-www-form-urlencoded", []byte(form.Encode()), secret, time.Now()))
	if got := rec.got(); len(got) != 1 || got[0].DM {
		t.Errorf("with conversations.open failing: %+v, want a shared conversation", got)
	}
}
