package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/accounts"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
	"github.com/tidybot/tidybot/bot"
)

// TestServeAutopilotOnTelegram: through `tidybot serve` (Telegram, the
// fake Todoist, the fake model) on a settable clock, with autopilot
// turned on by /settings a task added to the inbox is filed when the
// person's autopilot timer is next due (TIDYBOT_AUTOPILOT_INTERVAL) and
// announced with Undo and Stop autopilot; /settings lists the filing
// until Undo restores it; Stop
// autopilot stops it and deletes the timer. A task added while serve
// was down is filed at the next start: the timer is in the store.
func TestServeAutopilotOnTelegram(t *testing.T) {
	e := newEnv(t)
	groceries := e.todo.AddProject(todoisttest.Project{Name: "Groceries"})
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	e.cfg.TelegramToken, e.cfg.TelegramURL = tg.Token, tg.URL
	e.cfg.AutopilotInterval = time.Minute
	clk := &testClock{now: time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)}
	b, stop := serveClocked(t, e, clk)
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range tg.Messages(42) {
				t.Logf("message %q %v", m.Text, m.Labels)
			}
		}
	})
	tick := func() int { // a minute on, and the due timers run
		t.Helper()
		clk.Set(clk.Now().Add(time.Minute))
		n, err := b.RunTimers(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := b.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		return n
	}

	tg.PushText(42, 42, "/settings autopilot on")
	waitFor(t, "autopilot on", func() bool { return strings.Contains(lastText(tg, 42), "Autopilot is on") })
	if n := tick(); n != 1 { // the first look: the inbox as it is
		t.Fatalf("%d timers ran, want the autopilot's", n)
	}

	// Down for ten minutes; a task added meanwhile is filed at the next
	// start, in one batch.
	stop()
	milk := e.todo.AddTask(todoisttest.Task{Content: "Buy milk"})
	clk.Set(clk.Now().Add(10 * time.Minute))
	b, _ = serveClocked(t, e, clk)
	waitFor(t, "milk filed after the restart", func() bool { got, _ := e.todo.Task(milk.ID); return got.ProjectID == groceries.ID })
	if err := b.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	ms := tg.Messages(42)
	if n := countPrefix(ms, "🤖"); n != 1 {
		t.Errorf("%d autopilot messages, want one (one look, one batch)", n)
	}
	ann := ms[len(ms)-1]
	if !strings.HasPrefix(ann.Text, "🤖 Filed 1 new task") {
		t.Fatalf("last message %q, want autopilot's", ann.Text)
	}
	if len(ann.Labels) != 2 || !strings.Contains(ann.Labels[0], "Undo") || !strings.Contains(ann.Labels[1], "Stop autopilot") {
		t.Fatalf("buttons %v, want Undo and Stop autopilot", ann.Labels)
	}
	if n := tick(); n != 1 { // the timer goes on after the start
		t.Errorf("%d timers ran a minute after the start, want the autopilot's", n)
	}

	// /settings lists the filing under autopilot, as Slack's Home does.
	tg.PushText(42, 42, "/settings")
	waitFor(t, "the settings with the filing", func() bool {
		s := lastText(tg, 42)
		return strings.Contains(s, "Your settings:") && strings.Contains(s, "Its last filings") && strings.Contains(s, "“Buy milk” → Groceries")
	})

	tg.PushCallback(42, 42, ann.MessageID, ann.Buttons[0])
	waitFor(t, "the undo", func() bool { got, _ := e.todo.Task(milk.ID); return got.ProjectID == e.todo.InboxID() })
	waitFor(t, "the undo's report", func() bool { return strings.HasPrefix(lastText(tg, 42), "↩️ Undid") })
	tg.PushText(42, 42, "/settings")
	waitFor(t, "the settings after the undo", func() bool { return strings.Contains(lastText(tg, 42), "Your settings:") })
	if s := lastText(tg, 42); strings.Contains(s, "Its last filings") {
		t.Errorf("/settings still lists an undone filing:\n%s", s)
	}

	tg.PushCallback(42, 42, ann.MessageID, ann.Buttons[1])
	waitFor(t, "autopilot off", func() bool { ps, _ := b.Settings(t.Context(), "telegram", "42"); return !ps.Autopilot })
	calls := e.model.Calls()
	e.todo.AddTask(todoisttest.Task{Content: "Buy more milk"})
	if n := tick(); n != 0 {
		t.Errorf("%d timers ran after Stop autopilot, want none (its timer deleted)", n)
	}
	if e.model.Calls() != calls || len(e.todo.TasksIn(e.todo.InboxID())) != 2 {
		t.Errorf("autopilot filed after Stop autopilot")
	}
}

// TestServeAutopilotOnTodoistWebhook: in team mode, a person connects
// their Todoist (whose app sends webhooks) and turns autopilot on; a task
// added to their inbox reaches serve as a signed item:added at
// /todoist/webhook and is filed at once (the periodic look is an hour
// away); a forged webhook gets 401.
func TestServeAutopilotOnTodoistWebhook(t *testing.T) {
	e := newEnv(t)
	svc := todoisttest.NewService(t)
	addr := freeAddr(t)
	base := "http://" + addr
	const secret = "tidy-client-secret-0123"
	svc.RegisterApp(todoisttest.App{ClientID: "tidy-client", ClientSecret: secret, RedirectURL: base + accounts.CallbackPath, WebhookURL: base + accounts.WebhookPath})
	alice := svc.NewAccount()
	groceries := alice.AddProject(todoisttest.Project{Name: "Groceries"})
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	e.cfg.TelegramToken, e.cfg.TelegramURL = tg.Token, tg.URL
	e.cfg.TodoistToken, e.cfg.TodoistURL, e.cfg.TodoistAuth = "", svc.URL, svc.AuthURL
	e.cfg.ClientID, e.cfg.ClientSecret = "tidy-client", secret
	e.cfg.PublicURL, e.cfg.SecretKey = base, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	e.cfg.AllowedUsers = []string{"telegram:*"}
	e.cfg.HTTPAddr = addr
	e.cfg.AutopilotInterval = time.Hour
	b := serveWithBot(t, e)

	tg.PushText(42, 42, "hi")
	var link string
	waitFor(t, "the Connect link", func() bool {
		for _, m := range tg.Messages(42) {
			for _, u := range m.URLs {
				if l := connectLink(u); l != "" {
					link = l
				}
			}
		}
		return link != ""
	})
	if code, body := open(t, alice.Browser(), link); code != http.StatusOK {
		t.Fatalf("connect: HTTP %d %q", code, body)
	}
	waitFor(t, "the pending message's answer", func() bool { return lastText(tg, 42) == "You said: hi" })
	ps, err := b.Settings(t.Context(), "telegram", "42")
	if err != nil {
		t.Fatal(err)
	}
	ps.Autopilot = true
	if err := b.SaveSettings(t.Context(), "telegram", "42", ps); err != nil {
		t.Fatal(err)
	}
	if err := b.Autopilot(t.Context(), "telegram", "42"); err != nil { // the first look
		t.Fatal(err)
	}

	milk := alice.AddTask(todoisttest.Task{Content: "Buy milk"})
	waitFor(t, "autopilot's message", func() bool { return strings.HasPrefix(lastText(tg, 42), "🤖 Filed 1 new task") })
	if got, _ := alice.Task(milk.ID); got.ProjectID != groceries.ID {
		t.Errorf("milk in %s, want Groceries", got.ProjectID)
	}
	if sent, _ := alice.WebhooksSent(); sent != 1 {
		t.Errorf("%d webhooks answered 200, want 1", sent)
	}

	body := `{"event_name":"item:added","user_id":"1","event_data":{"id":"x"}}`
	req, _ := http.NewRequest(http.MethodPost, base+accounts.WebhookPath, strings.NewReader(body))
	req.Header.Set("X-Todoist-Hmac-SHA256", todoisttest.SignWebhook([]byte(body), "another secret"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("forged webhook: HTTP %d, want 401", resp.StatusCode)
	}
}

// serveWithBot runs `tidybot serve` with e's config until the test ends
// and returns its bot.
func serveWithBot(t *testing.T, e *env) *bot.Bot {
	t.Helper()
	var (
		mu sync.Mutex
		b  *bot.Bot
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	m := &Main{Args: []string{"serve"}, Config: &e.cfg, Stdout: io.Discard, Stderr: io.Discard, Ready: func(x *bot.Bot) {
		mu.Lock()
		b = x
		mu.Unlock()
	}}
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		_ = m.Close()
	})
	waitFor(t, "serve", func() bool { mu.Lock(); defer mu.Unlock(); return b != nil })
	return b
}

func countPrefix(ms []telegramtest.Sent, prefix string) int {
	n := 0
	for _, m := range ms {
		if strings.HasPrefix(m.Text, prefix) {
			n++
		}
	}
	return n
}

// TestServeAutopilotOnSlack: the same on Slack: autopilot turned on in
// the person's DM, a new inbox task filed when the timer is due and
// announced there with Undo and Stop autopilot, and Stop autopilot
// pressed as a Block Kit button turns it off.
func TestServeAutopilotOnSlack(t *testing.T) {
	e := newEnv(t)
	groceries := e.todo.AddProject(todoisttest.Project{Name: "Groceries"})
	sl := slacktest.New()
	t.Cleanup(sl.Close)
	e.cfg.SlackBotToken, e.cfg.SlackSigningSecret, e.cfg.SlackURL = slacktest.Token, slackSecret, sl.URL
	e.cfg.AllowedUsers = []string{"slack:U1"}
	e.cfg.AutopilotInterval = time.Minute
	clk := &testClock{now: time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)}
	b, _ := serveClocked(t, e, clk)
	base := "http://" + e.cfg.HTTPAddr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("posts: %s", fmtPosts(sl.Posts("D1")))
		}
	})
	if code := postSigned(t, base+"/slack/events", "application/json", slacktest.MessageEvent("Ev1", "D1", "im", "U1", "settings", "1.1", ""), slackSecret); code != 200 {
		t.Fatalf("dm: %d", code)
	}
	waitFor(t, "the settings", func() bool { return strings.Contains(lastPost(sl, "D1").Text, "Your settings:") })
	form := sl.SlashCommand("D1", "U1", "/tidy", "settings autopilot on")
	if code := postSigned(t, base+"/slack/commands", "application/x-www-form-urlencoded", []byte(form.Encode()), slackSecret); code != 200 {
		t.Fatalf("slash command: %d", code)
	}
	waitFor(t, "autopilot on", func() bool { return strings.Contains(lastPost(sl, "D1").Text, "Autopilot is on") })
	clk.Set(clk.Now().Add(time.Minute))
	runTimers(t, b) // the first look: the inbox as it is
	milk := e.todo.AddTask(todoisttest.Task{Content: "Buy milk"})
	clk.Set(clk.Now().Add(time.Minute))
	runTimers(t, b)
	waitFor(t, "milk filed", func() bool { got, _ := e.todo.Task(milk.ID); return got.ProjectID == groceries.ID })
	waitFor(t, "autopilot's message", func() bool { return strings.HasPrefix(lastPost(sl, "D1").Text, "🤖 Filed 1 new task") })
	ann := lastPost(sl, "D1")
	if len(ann.Labels) != 2 || !strings.Contains(ann.Labels[0], "Undo") || !strings.Contains(ann.Labels[1], "Stop autopilot") || len(ann.Feedback) != 0 {
		t.Fatalf("buttons %v feedback %v, want Undo and Stop autopilot, no rating", ann.Labels, ann.Feedback)
	}
	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "trigger_id": "tr3", "user": map[string]any{"id": "U1"}, "channel": map[string]any{"id": "D1"},
		"container": map[string]any{"type": "message", "message_ts": ann.TS, "channel_id": "D1"},
		"actions":   []map[string]any{{"type": "button", "action_id": "choice_1", "block_id": "choices", "value": ann.Buttons[1]}}})
	if code := postSigned(t, base+"/slack/interactivity", "application/x-www-form-urlencoded", []byte(url.Values{"payload": {string(payload)}}.Encode()), slackSecret); code != 200 {
		t.Fatalf("press: %d", code)
	}
	waitFor(t, "autopilot off", func() bool { ps, _ := b.Settings(t.Context(), "slack", "U1"); return !ps.Autopilot })
}
