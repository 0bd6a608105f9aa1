package main

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
	"github.com/tidybot/tidybot/bot"
)

// TestServeAutopilotOnTelegram: through `tidybot serve` (Telegram, the
// fake Todoist, the fake model), with autopilot on a task added to the
// inbox is filed at the next TIDYBOT_AUTOPILOT_INTERVAL and announced
// with Undo and Stop autopilot; Undo restores it; Stop autopilot stops
// it.
func TestServeAutopilotOnTelegram(t *testing.T) {
	e := newEnv(t)
	groceries := e.todo.AddProject(todoisttest.Project{Name: "Groceries"})
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	e.cfg.TelegramToken, e.cfg.TelegramURL = tg.Token, tg.URL
	e.cfg.AutopilotInterval = time.Second
	e.cfg.HTTPAddr = freeAddr(t)
	var (
		mu sync.Mutex
		b  *bot.Bot
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
			for _, m := range tg.Messages(42) {
				t.Logf("message %q %v", m.Text, m.Labels)
			}
		}
	})
	m := &Main{Args: []string{"serve"}, Config: &e.cfg, Stdout: io.Discard, Stderr: logs, Ready: func(x *bot.Bot) {
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

	// The person writes once in private, then turns autopilot on (what
	// /settings autopilot on does).
	tg.PushText(42, 42, "hi")
	waitFor(t, "the answer", func() bool { return lastText(tg, 42) == "You said: hi" })
	ps, err := b.Settings(t.Context(), "telegram", "42")
	if err != nil {
		t.Fatal(err)
	}
	ps.Autopilot = true
	if err := b.SaveSettings(t.Context(), "telegram", "42", ps); err != nil {
		t.Fatal(err)
	}
	if err := b.Autopilot(t.Context(), "telegram", "42"); err != nil { // the first look: the inbox as it is
		t.Fatal(err)
	}

	milk := e.todo.AddTask(todoisttest.Task{Content: "Buy milk"})
	var ann telegramtest.Sent
	waitFor(t, "autopilot's message", func() bool {
		ms := tg.Messages(42)
		ann = ms[len(ms)-1]
		return strings.HasPrefix(ann.Text, "🤖 Filed 1 new task")
	})
	if got, _ := e.todo.Task(milk.ID); got.ProjectID != groceries.ID {
		t.Errorf("milk in %s, want Groceries", got.ProjectID)
	}
	if len(ann.Labels) != 2 || !strings.Contains(ann.Labels[0], "Undo") || !strings.Contains(ann.Labels[1], "Stop autopilot") {
		t.Fatalf("buttons %v, want Undo and Stop autopilot", ann.Labels)
	}

	tg.PushCallback(42, 42, ann.MessageID, ann.Buttons[0])
	waitFor(t, "the undo", func() bool { got, _ := e.todo.Task(milk.ID); return got.ProjectID == e.todo.InboxID() })

	tg.PushCallback(42, 42, ann.MessageID, ann.Buttons[1])
	waitFor(t, "autopilot off", func() bool { ps, _ := b.Settings(t.Context(), "telegram", "42"); return !ps.Autopilot })
	calls := e.model.Calls()
	e.todo.AddTask(todoisttest.Task{Content: "Buy more milk"})
	if err := b.AutopilotAll(t.Context()); err != nil { // what the next tick does
		t.Fatal(err)
	}
	if err := b.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if e.model.Calls() != calls || len(e.todo.TasksIn(e.todo.InboxID())) != 2 {
		t.Errorf("autopilot filed after Stop autopilot")
	}
}
