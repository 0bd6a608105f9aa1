package main

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
	"github.com/tidybot/tidybot/bot"
)

// testClock is a settable clock for serve (Main.clock).
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

// serveClocked runs `tidybot serve` on e with the bot's clock clk and
// returns the bot and a stop function (also called at the test's end).
func serveClocked(t *testing.T, e *env, clk *testClock) (*bot.Bot, func()) {
	t.Helper()
	ready := make(chan *bot.Bot, 1)
	r := startMain(t, e, func(m *Main) {
		m.clock = clk.Now
		m.Ready = func(b *bot.Bot) { ready <- b }
	})
	return <-ready, r.stop
}

// runTimers runs the bot's due timers now (the test moved the clock)
// and waits until what they sent is posted.
func runTimers(t *testing.T, b *bot.Bot) {
	t.Helper()
	if _, err := b.RunTimers(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := b.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

func telegramDigests(tg *telegramtest.Server, chat int64) []telegramtest.Sent {
	var out []telegramtest.Sent
	for _, m := range tg.Messages(chat) {
		if strings.HasPrefix(m.Text, "☀️") {
			out = append(out, m)
		}
	}
	return out
}

// The morning digest through serve and the real Telegram client: set
// with /settings, it arrives at 08:00 in the person's time zone
// (Todoist's tz_info, Europe/Amsterdam: 07:00 UTC), not at 08:00 UTC,
// costs no model call, and after a restart a missed digest is sent once.
func TestTelegramDigestAtEightInAmsterdam(t *testing.T) {
	e := newEnv(t)
	e.todo = todoisttest.New(t, todoisttest.WithTimezone("Europe/Amsterdam"))
	e.cfg.TodoistToken, e.cfg.TodoistURL = e.todo.Token, e.todo.URL
	e.todo.AddTask(todoisttest.Task{Content: "Call mum", Due: &todoisttest.Due{Date: "2026-11-25", String: "Nov 25"}})
	e.todo.AddTask(todoisttest.Task{Content: "Pay rent", Due: &todoisttest.Due{Date: "2026-11-23", String: "Nov 23"}})
	e.todo.AddTask(todoisttest.Task{Content: "Buy milk"})
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	e.cfg.TelegramToken, e.cfg.TelegramURL = tg.Token, tg.URL
	clk := &testClock{now: time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)}
	b, stop := serveClocked(t, e, clk)

	tg.PushText(42, 42, "/settings digest 08:00")
	waitFor(t, "the settings", func() bool { return strings.Contains(lastText(tg, 42), "Morning digest: 08:00") })
	if s := lastText(tg, 42); !strings.Contains(s, "Time zone: Todoist's (Europe/Amsterdam)") {
		t.Errorf("settings:\n%s", s)
	}
	models := e.model.Calls()

	clk.Set(time.Date(2026, 11, 25, 6, 59, 0, 0, time.UTC))
	runTimers(t, b)
	if n := len(telegramDigests(tg, 42)); n != 0 {
		t.Fatalf("%d digests at 07:59 in Amsterdam", n)
	}
	clk.Set(time.Date(2026, 11, 25, 7, 0, 1, 0, time.UTC))
	reqs := e.todo.TotalRequests()
	runTimers(t, b)
	if n := e.todo.TotalRequests() - reqs; n != 1 {
		t.Errorf("the digest made %d Todoist requests, want 1 (one /sync)", n)
	}
	ds := telegramDigests(tg, 42)
	if len(ds) != 1 {
		t.Fatalf("%d digests at 08:00 in Amsterdam, want 1", len(ds))
	}
	for _, want := range []string{"Due today (1):\n• Call mum", "Overdue (1):\n• Pay rent", "Inbox: 3 tasks waiting"} {
		if !strings.Contains(ds[0].Text, want) {
			t.Errorf("digest lacks %q:\n%s", want, ds[0].Text)
		}
	}
	if got := strings.Join(ds[0].Labels, "|"); got != "Move overdue to today|Tidy inbox|Snooze digest" {
		t.Errorf("digest buttons %s", got)
	}
	clk.Set(time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)) // 08:00 UTC
	runTimers(t, b)
	if n := len(telegramDigests(tg, 42)); n != 1 {
		t.Errorf("%d digests by 08:00 UTC, want the one at 08:00 in Amsterdam", n)
	}
	if n := e.model.Calls() - models; n != 0 {
		t.Errorf("the digest made %d model calls", n)
	}
	stop()

	// Down over the next 08:00; back 90 minutes late (under two hours):
	// the missed digest is sent once, at start, and not again by a
	// second restart.
	for range 2 {
		clk.Set(time.Date(2026, 11, 26, 8, 30, 0, 0, time.UTC))
		_, stop := serveClocked(t, e, clk)
		waitFor(t, "the missed digest", func() bool { return len(telegramDigests(tg, 42)) >= 2 })
		time.Sleep(100 * time.Millisecond)
		stop()
	}
	if n := len(telegramDigests(tg, 42)); n != 2 {
		t.Errorf("%d digests after two restarts, want 2 (one a day)", n)
	}
}

// /settings on Telegram: the buttons change the presser's settings and
// the message shows them.
func TestTelegramSettingsButtons(t *testing.T) {
	e := newEnv(t)
	tg := serveTelegram(t, e)
	tg.PushText(42, 42, "/settings")
	var m telegramtest.Sent
	waitFor(t, "the settings", func() bool {
		ms := tg.Messages(42)
		if len(ms) == 0 {
			return false
		}
		m = ms[len(ms)-1]
		return strings.Contains(m.Text, "Autopilot: off") && len(m.Buttons) > 0
	})
	if m.Labels[0] != "Turn autopilot on" {
		t.Fatalf("buttons %v", m.Labels)
	}
	tg.PushCallback(42, 42, m.MessageID, m.Buttons[0])
	waitFor(t, "autopilot on", func() bool {
		for _, s := range tg.Messages(42) {
			if s.MessageID == m.MessageID && strings.Contains(s.Text, "Autopilot: on") {
				return true
			}
		}
		return false
	})
	tg.PushText(42, 42, "/settings confirm sometimes")
	waitFor(t, "the refusal", func() bool { return strings.Contains(lastText(tg, 42), "Confirm is destructive") })
}

// /settings on Slack: "/tidy settings autopilot on" and a button press.
func TestSlackSettings(t *testing.T) {
	e := newEnv(t)
	sl, base := serveSlack(t, e)
	form := sl.SlashCommand("D1", "U1", "/tidy", "settings digest 07:30")
	if code := postSigned(t, base+"/slack/commands", "application/x-www-form-urlencoded", []byte(form.Encode()), slackSecret); code != 200 {
		t.Fatalf("slash command: %d", code)
	}
	waitFor(t, "the settings", func() bool { return strings.Contains(lastPost(sl, "D1").Text, "Morning digest: 07:30") })
	p := lastPost(sl, "D1")
	if !strings.Contains(p.Text, "/tidy settings autopilot on|off") || len(p.Buttons) == 0 {
		t.Fatalf("settings post %+v", p)
	}
	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "trigger_id": "tr9", "user": map[string]any{"id": "U1"}, "channel": map[string]any{"id": "D1"},
		"container": map[string]any{"type": "message", "message_ts": p.TS, "channel_id": "D1"},
		"actions":   []map[string]any{{"type": "button", "action_id": "choice_0", "block_id": "choices", "value": p.Buttons[0]}}})
	if code := postSigned(t, base+"/slack/interactivity", "application/x-www-form-urlencoded", []byte(url.Values{"payload": {string(payload)}}.Encode()), slackSecret); code != 200 {
		t.Fatalf("press: %d", code)
	}
	waitFor(t, "autopilot on", func() bool {
		for _, q := range sl.Posts("D1") {
			if strings.Contains(q.Text, "Autopilot: on") {
				return true
			}
		}
		return false
	})
}

// /settings in the terminal: typed, no buttons.
func TestChatSettings(t *testing.T) {
	e := newEnv(t)
	out := e.chat(t, "/settings language Dutch\n/settings digest 9\n/settings timezone Nowhere/Else\n", nil)
	mustContain(t, out, "✓ I answer in Dutch.", "Morning digest: 09:00", `I don't know the time zone "Nowhere/Else"`, "/settings confirm destructive|writes|never")
	if strings.Contains(out, "Turn autopilot on") {
		t.Errorf("the terminal shows buttons it cannot press:\n%s", out)
	}
}

// The digest on Slack, in the person's DM, and its Snooze button.
func TestSlackDigestAndSnooze(t *testing.T) {
	e := newEnv(t)
	e.todo.AddTask(todoisttest.Task{Content: "Pay rent", Due: &todoisttest.Due{Date: "2026-11-23", String: "Nov 23"}})
	sl := slacktest.New()
	t.Cleanup(sl.Close)
	e.cfg.SlackBotToken, e.cfg.SlackSigningSecret, e.cfg.SlackURL = slacktest.Token, slackSecret, sl.URL
	e.cfg.AllowedUsers = []string{"slack:U1"}
	clk := &testClock{now: time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)}
	b, _ := serveClocked(t, e, clk)
	base := "http://" + e.cfg.HTTPAddr
	if code := postSigned(t, base+"/slack/events", "application/json", slacktest.MessageEvent("Ev1", "D1", "im", "U1", "settings", "1.1", ""), slackSecret); code != 200 {
		t.Fatalf("dm: %d", code)
	}
	waitFor(t, "the settings", func() bool { return strings.Contains(lastPost(sl, "D1").Text, "Your settings:") })
	form := sl.SlashCommand("D1", "U1", "/tidy", "settings digest 07:30")
	if code := postSigned(t, base+"/slack/commands", "application/x-www-form-urlencoded", []byte(form.Encode()), slackSecret); code != 200 {
		t.Fatalf("slash command: %d", code)
	}
	waitFor(t, "the digest time", func() bool { return strings.Contains(lastPost(sl, "D1").Text, "Morning digest: 07:30") })
	clk.Set(time.Date(2026, 11, 25, 7, 30, 0, 0, time.UTC)) // the fake Todoist's zone is UTC
	runTimers(t, b)
	d := lastPost(sl, "D1")
	if !strings.HasPrefix(d.Text, "☀️") || !strings.Contains(d.Text, "Overdue (1):\n• Pay rent") || len(d.Buttons) != 3 {
		t.Fatalf("digest %+v", d)
	}
	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "trigger_id": "tr2", "user": map[string]any{"id": "U1"}, "channel": map[string]any{"id": "D1"},
		"container": map[string]any{"type": "message", "message_ts": d.TS, "channel_id": "D1"},
		"actions":   []map[string]any{{"type": "button", "action_id": "choice_2", "block_id": "choices", "value": d.Buttons[2]}}})
	if code := postSigned(t, base+"/slack/interactivity", "application/x-www-form-urlencoded", []byte(url.Values{"payload": {string(payload)}}.Encode()), slackSecret); code != 200 {
		t.Fatalf("press: %d", code)
	}
	waitFor(t, "the snooze", func() bool { return strings.Contains(lastPost(sl, "D1").Text, "again in an hour") })
	clk.Set(time.Date(2026, 11, 25, 8, 30, 1, 0, time.UTC))
	runTimers(t, b)
	n := 0
	for _, p := range sl.Posts("D1") {
		if strings.HasPrefix(p.Text, "☀️") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d digests after the snooze, want 2", n)
	}
}
