package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidybot/tidybot/accounts"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// teamTodoist sets e up for team mode against a fake Todoist service
// with OAuth (tidybot's app registered there, its callback on e's own
// address, data keys from key): the service, and serve's base URL.
func teamTodoist(t *testing.T, e *env, key byte) (*todoisttest.Service, string) {
	t.Helper()
	svc := todoisttest.NewService(t)
	addr := freeAddr(t)
	base := "http://" + addr
	svc.RegisterApp(todoisttest.App{ClientID: "tidy-client", ClientSecret: "tidy-client-secret-0123", RedirectURL: base + accounts.CallbackPath})
	e.cfg.TodoistToken, e.cfg.TodoistURL, e.cfg.TodoistAuth = "", svc.URL, svc.AuthURL
	e.cfg.ClientID, e.cfg.ClientSecret = "tidy-client", "tidy-client-secret-0123"
	e.cfg.PublicURL, e.cfg.SecretKey = base, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{key}, 32))
	e.cfg.HTTPAddr = addr
	return svc, base
}

// startServe runs `tidybot serve` with e's config (HTTPAddr already
// chosen) and returns a function that stops it, as a SIGTERM does.
func serveTeam(t *testing.T, e *env, logs io.Writer, clock ...func() time.Time) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	m := &Main{Args: []string{"serve"}, Config: &e.cfg, Stdout: &bytes.Buffer{}, Stderr: logs}
	if len(clock) > 0 {
		m.teamClock = clock[0]
	}
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
			_ = m.Close()
		})
	}
	t.Cleanup(stop)
	waitFor(t, "the HTTP server", func() bool {
		resp, err := http.Get("http://" + e.cfg.HTTPAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return stop
}

var linkRe = regexp.MustCompile(`https?://\S+/oauth/todoist/connect\?\S+`)

// connectLink is the Connect link in text, or "" (Slack's text escapes
// & as &amp;, which the person sees as &).
func connectLink(text string) string { return linkRe.FindString(html.UnescapeString(text)) }

// open follows a link in a person's browser, presses Continue on our
// Connect page if it shows one, and returns the final page.
func open(t *testing.T, browser *http.Client, link string) (int, string) {
	t.Helper()
	code, body := visit(t, browser, link)
	if next := continueLink(body); next != "" {
		return visit(t, browser, next)
	}
	return code, body
}

// visit gets one address in browser (following redirects).
func visit(t *testing.T, browser *http.Client, link string) (int, string) {
	t.Helper()
	resp, err := browser.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

var continueRe = regexp.MustCompile(`<a href="([^"]+)"[^>]*>Continue to Todoist</a>`)

// continueLink is the address of the Continue button of our Connect
// page, or "".
func continueLink(body string) string {
	m := continueRe.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// withState returns link with its state replaced.
func withState(t *testing.T, link string, f func(string) string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("state", f(q.Get("state")))
	u.RawQuery = q.Encode()
	return u.String()
}

func slackDM(t *testing.T, base, ev, channel, user, text, ts string) {
	t.Helper()
	if code := postSigned(t, base+"/slack/events", "application/json", slacktest.MessageEvent(ev, channel, "im", user, text, ts, ""), slackSecret); code != 200 {
		t.Fatalf("event %s: HTTP %d", ev, code)
	}
}

func posted(sl *slacktest.Server, channel, sub string) bool {
	return strings.Contains(fmtPosts(sl.Posts(channel)), sub)
}

// TestTeamModeEveryoneTheirOwnTodoist: two Slack people and one Telegram
// person connect their own Todoist through OAuth and each tidies their
// own inbox; a forged or replayed state connects nothing; a restart in
// the middle of a run resumes it on the right account; a revoked token
// asks for a reconnect and loses the request not; /disconnect revokes.
func TestTeamModeEveryoneTheirOwnTodoist(t *testing.T) {
	e := newEnv(t)
	svc, base := teamTodoist(t, e, 7)
	addr := e.cfg.HTTPAddr // serve's, again at the restart
	alice, bob, carol := svc.NewAccount(), svc.NewAccount(), svc.NewAccount()
	for _, a := range []*todoisttest.Account{alice, bob, carol} {
		a.SeedTalkInbox()
	}
	// The model stalls after Bob's first write while stall is set, until
	// its client goes (the restart); the tidier reads the inbox after its
	// moves, so there is a model call after the write.
	e.scen.check = true
	var stall atomic.Bool
	stalled := make(chan struct{}, 1)
	e.model.Close()
	e.model = openaitest.New(func(req openaitest.Request) openaitest.Reply {
		if stall.Load() && wrote(openaitest.AgentRequest(req)) {
			stall.Store(false)
			stalled <- struct{}{}
			return openaitest.Text("…").After(time.Hour)
		}
		return openaitest.FromAgent(e.scen.reply)(req)
	})
	t.Cleanup(e.model.Close)

	sl := slacktest.New()
	t.Cleanup(sl.Close)
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	e.cfg.OpenAIBaseURL = e.model.URL
	e.cfg.SlackBotToken, e.cfg.SlackSigningSecret, e.cfg.SlackURL = slacktest.Token, slackSecret, sl.URL
	e.cfg.TelegramToken, e.cfg.TelegramURL = tg.Token, tg.URL
	e.cfg.AllowedUsers = []string{"slack:team:T1", "telegram:*"}
	logs := &syncBuffer{}
	stop := serveTeam(t, e, logs)

	// Alice asks before connecting: one message with the Connect link,
	// and nothing touches any account.
	slackDM(t, base, "Ev1", "D1", "U1", "/tidy-inbox", "1.1")
	waitFor(t, "Alice's Connect link", func() bool { return connectLink(lastPost(sl, "D1").Text) != "" })
	link := connectLink(lastPost(sl, "D1").Text)
	if p := lastPost(sl, "D1"); len(p.URLs) != 1 || html.UnescapeString(p.URLs[0]) != link || p.Labels[0] != "Connect Todoist" {
		t.Errorf("the Connect message's buttons: %q %q, want a Connect Todoist button to %s", p.Labels, p.URLs, link)
	}
	if n := len(sl.Posts("D1")); n != 1 {
		t.Errorf("Alice got %d messages before connecting, want one: %s", n, fmtPosts(sl.Posts("D1")))
	}
	if got := alice.AppliedCommands() + bob.AppliedCommands() + carol.AppliedCommands(); got != 0 {
		t.Errorf("%d writes before anyone connected", got)
	}
	_, connectPage := visit(t, http.DefaultClient, link)
	if u, _ := url.Parse(continueLink(connectPage)); u.Query().Get("scope") != "data:delete,data:read_write,project:delete" {
		t.Errorf("link %s: want the scopes data:delete,data:read_write,project:delete", continueLink(connectPage))
	}

	// A forged state (Bob's browser, Alice's link with another user id
	// in it, or a bad signature) is refused and stores nothing.
	forged := withState(t, link, func(s string) string {
		p, sig, _ := strings.Cut(s, ".")
		raw, _ := base64.RawURLEncoding.DecodeString(p)
		raw = bytes.Replace(raw, []byte(`"u":"U1"`), []byte(`"u":"U2"`), 1)
		return base64.RawURLEncoding.EncodeToString(raw) + "." + sig
	})
	if code, body := open(t, bob.Browser(), forged); code != http.StatusBadRequest || !strings.Contains(body, "not valid") {
		t.Errorf("forged state: HTTP %d %q, want 400", code, body)
	}
	if len(bob.Tokens()) != 0 || len(alice.Tokens()) != 0 {
		t.Error("a forged state got a token issued")
	}

	// Alice connects; what she asked runs on her account only.
	if code, body := open(t, alice.Browser(), link); code != http.StatusOK || !strings.Contains(body, "Connected — back to Slack") {
		t.Fatalf("connect: HTTP %d %q", code, body)
	}
	waitFor(t, "Alice's tidy", func() bool { return posted(sl, "D1", "Moved ") })
	if n := len(alice.TasksIn(alice.InboxID())); n != 0 {
		t.Errorf("Alice's inbox has %d tasks after her tidy", n)
	}
	for name, a := range map[string]*todoisttest.Account{"Bob": bob, "Carol": carol} {
		if n := len(a.TasksIn(a.InboxID())); n != 9 || a.AppliedCommands() != 0 {
			t.Errorf("%s's account changed by Alice's tidy: inbox %d tasks, %d writes", name, n, a.AppliedCommands())
		}
	}
	// The same link again (a replay) is refused.
	if code, _ := open(t, alice.Browser(), link); code != http.StatusBadRequest {
		t.Errorf("replayed state: HTTP %d, want 400", code)
	}
	if n := len(alice.Tokens()); n != 1 {
		t.Errorf("Alice has %d tokens after a replay, want 1", n)
	}

	// Bob connects with /connect, then tidies; the process stops in the
	// middle of his run and the restart finishes it on his account.
	slackDM(t, base, "Ev2", "D2", "U2", "/connect", "2.1")
	waitFor(t, "Bob's Connect link", func() bool { return connectLink(lastPost(sl, "D2").Text) != "" })
	if code, body := open(t, bob.Browser(), connectLink(lastPost(sl, "D2").Text)); code != http.StatusOK || !strings.Contains(body, "Connected") {
		t.Fatalf("Bob connect: HTTP %d %q", code, body)
	}
	waitFor(t, "Bob's connection", func() bool { return posted(sl, "D2", "Connected the Todoist account of") })
	if posted(sl, "D2", "You said") {
		t.Errorf("/connect ran as a request: %s", fmtPosts(sl.Posts("D2")))
	}
	stall.Store(true)
	slackDM(t, base, "Ev3", "D2", "U2", "/tidy-inbox", "2.2")
	select {
	case <-stalled:
	case <-time.After(20 * time.Second):
		t.Fatal("Bob's run never wrote")
	}
	stop()
	e.cfg.HTTPAddr = addr
	stop = serveTeam(t, e, logs)
	waitFor(t, "Bob's resumed tidy", func() bool { return posted(sl, "D2", "Moved ") })
	if n := len(bob.TasksIn(bob.InboxID())); n != 0 {
		t.Errorf("Bob's inbox has %d tasks after his resumed tidy", n)
	}
	for name, a := range map[string]*todoisttest.Account{"Alice": alice, "Bob": bob} {
		if n := len(a.Projects()); n != 4 {
			t.Errorf("%s has %d projects, want the Inbox and 3", name, n)
		}
	}
	if n := len(carol.TasksIn(carol.InboxID())); n != 9 || carol.AppliedCommands() != 0 {
		t.Errorf("Carol's account changed: inbox %d, %d writes", n, carol.AppliedCommands())
	}

	// Carol, on Telegram (telegram:* in team mode).
	tg.PushText(42, 42, "/tidy_inbox")
	waitFor(t, "Carol's Connect link", func() bool { return connectLink(lastText(tg, 42)) != "" })
	if ms := tg.Messages(42); len(ms[len(ms)-1].URLs) != 1 || ms[len(ms)-1].URLs[0] != connectLink(lastText(tg, 42)) {
		t.Errorf("Carol's Connect message has no Connect Todoist button: %+v", ms[len(ms)-1])
	}
	if code, body := open(t, carol.Browser(), connectLink(lastText(tg, 42))); code != http.StatusOK || !strings.Contains(body, "Connected — back to Telegram") {
		t.Fatalf("Carol connect: HTTP %d %q", code, body)
	}
	waitFor(t, "Carol's tidy", func() bool { return strings.HasPrefix(lastText(tg, 42), "Moved ") })
	if n := len(carol.TasksIn(carol.InboxID())); n != 0 {
		t.Errorf("Carol's inbox has %d tasks", n)
	}

	// Alice removes the app in Todoist: her next request asks her to
	// reconnect, and runs once she has.
	alice.RevokeAll()
	slackDM(t, base, "Ev4", "D1", "U1", "/tidy-inbox", "1.5")
	waitFor(t, "Alice's reconnect prompt", func() bool { return connectLink(lastPost(sl, "D1").Text) != "" })
	if !posted(sl, "D1", "no longer accepts") {
		t.Errorf("no word of the refused token:\n%s", fmtPosts(sl.Posts("D1")))
	}
	if code, _ := open(t, alice.Browser(), connectLink(lastPost(sl, "D1").Text)); code != http.StatusOK {
		t.Fatalf("Alice reconnect: HTTP %d", code)
	}
	waitFor(t, "Alice's kept request", func() bool { return posted(sl, "D1", "Your inbox is already empty.") })

	// Carol disconnects: the token is revoked at Todoist, and the
	// snapshot of her tasks kept for incremental reads is deleted.
	carolTok, aliceToks := carol.Tokens(), alice.Tokens()
	tg.PushText(42, 42, "/disconnect")
	waitFor(t, "the disconnect", func() bool { return strings.HasPrefix(lastText(tg, 42), "Disconnected") })
	if n := len(carol.Tokens()); n != 0 {
		t.Errorf("Carol has %d tokens in force after /disconnect", n)
	}
	tg.PushText(42, 42, "hello again")
	waitFor(t, "a Connect link after disconnecting", func() bool { return connectLink(lastText(tg, 42)) != "" })

	// No token is in the log or stored in clear.
	stop()
	st := e.openStore(t)
	if len(carolTok) != 1 || len(aliceToks) != 1 {
		t.Fatalf("tokens before the disconnect: Carol %d, Alice %d; want 1 each", len(carolTok), len(aliceToks))
	}
	if snap, err := st.LoadSnapshot(t.Context(), todoist.AccountKey(carolTok[0])); err != nil || snap != nil {
		t.Errorf("Carol's snapshot after /disconnect: %d bytes, %v; want none", len(snap), err)
	}
	if snap, err := st.LoadSnapshot(t.Context(), todoist.AccountKey(aliceToks[0])); err != nil || snap == nil {
		t.Errorf("Alice's snapshot: %d bytes, %v; want it kept", len(snap), err)
	}
	db := e.stored(t)
	for _, a := range []*todoisttest.Account{alice, bob} {
		for _, tok := range a.Tokens() {
			if bytes.Contains(db, []byte(tok)) || strings.Contains(logs.String(), tok) {
				t.Errorf("a token is in the database or the log in clear")
			}
		}
	}
}

// TestTeamModeExpiredStateRefused: a Connect link opened after it
// expired gets a 400 page and connects nothing; a new one works.
func TestTeamModeExpiredStateRefused(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	te := serveTeamTelegram(t, clock)
	tg, dana := te.tg, te.svc.NewAccount()

	tg.PushText(7, 7, "/connect")
	waitFor(t, "the Connect link", func() bool { return connectLink(lastText(tg, 7)) != "" })
	link := connectLink(lastText(tg, 7))
	mu.Lock()
	now = now.Add(accounts.StateTTL + time.Minute)
	mu.Unlock()
	if code, body := open(t, dana.Browser(), link); code != http.StatusBadRequest || !strings.Contains(body, "expired") {
		t.Errorf("an expired state: HTTP %d %q, want 400", code, body)
	}
	if n := len(dana.Tokens()); n != 0 {
		t.Errorf("an expired state connected: %d tokens issued", n)
	}
	tg.PushText(7, 7, "/connect")
	waitFor(t, "a new Connect link", func() bool { l := connectLink(lastText(tg, 7)); return l != "" && l != link })
	if code, body := open(t, dana.Browser(), connectLink(lastText(tg, 7))); code != http.StatusOK || !strings.Contains(body, "Connected") {
		t.Errorf("a fresh link: HTTP %d %q", code, body)
	}
}
