package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// serve runs `tidybot serve` with e's config on a free local port until
// the test ends, and returns the base URL of its HTTP server.
func serve(t *testing.T, e *env) string {
	t.Helper()
	return startServe(t, e, nil).base
}

// serveTelegram runs `tidybot serve` with the fake Telegram (long
// polling) until the test ends.
func serveTelegram(t *testing.T, e *env) *telegramtest.Server {
	t.Helper()
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	e.cfg.TelegramToken, e.cfg.TelegramURL = tg.Token, tg.URL
	serve(t, e)
	return tg
}

// waitFor polls until cond holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func lastText(tg *telegramtest.Server, chat int64) string {
	ms := tg.Messages(chat)
	if len(ms) == 0 {
		return ""
	}
	return ms[len(ms)-1].Text
}

func TestTelegramTidyAndConfirmWithButtons(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	tg := serveTelegram(t, e)

	tg.PushText(42, 42, "/tidy-inbox")
	waitFor(t, "the tidy's answer", func() bool { return strings.HasPrefix(lastText(tg, 42), "Moved ") })
	msgs := tg.Messages(42)
	status := msgs[0]
	if status.Edits == 0 || !strings.Contains(status.Text, "➡️ Moved 9 tasks into 3 projects") {
		t.Errorf("status message %+v: want progress edited in place", status)
	}
	if len(e.layout()["Inbox"]) != 0 {
		t.Errorf("layout: %v", e.layout())
	}

	e.todo.AddTask(todoisttest.Task{Content: "Buy cake for the office"}) // the inbox is empty now
	tg.PushText(42, 42, "delete the cake task")
	var question telegramtest.Sent
	waitFor(t, "the confirmation", func() bool {
		ms := tg.Messages(42)
		question = ms[len(ms)-1]
		return len(question.Buttons) == 2
	})
	if question.Labels[0] != "Delete 1 task" || question.Labels[1] != "Cancel" {
		t.Fatalf("buttons %v", question.Labels)
	}
	tg.PushCallback(42, 666, question.MessageID, question.Buttons[0]) // not allowed
	tg.PushCallback(42, 42, question.MessageID, question.Buttons[0])
	waitFor(t, "the deletion", func() bool { return lastText(tg, 42) == "Deleted the cake task." })
	if n := len(e.todo.Tasks()); n != 9 {
		t.Errorf("tasks = %d, want 9", n)
		for _, m := range tg.Messages(42) {
			t.Logf("%d: %q %v", m.MessageID, m.Text, m.Labels)
		}
	}
	answers := strings.Join(tg.Answers(), "\n")
	if strings.Count(answers, "cb") != 2 || !strings.Contains(answers, "not allowed") {
		t.Errorf("presses must all be answered: %s", answers)
	}
	for _, m := range tg.Messages(42) {
		if m.MessageID == question.MessageID && (len(m.Buttons) != 0 || !strings.Contains(m.Text, "→ yes")) {
			t.Errorf("the buttons did not give way to the choice: %+v", m)
		}
	}

	tg.PushText(7, 666, "hi")
	waitFor(t, "the refusal", func() bool { return strings.Contains(lastText(tg, 7), "telegram:666") })
}

func TestTelegramGroupAnswersOnlyWhatIsAddressedToIt(t *testing.T) {
	e := newEnv(t)
	tg := serveTelegram(t, e)
	const group = -100
	// Privacy mode on, Telegram's default: a mention does not reach the
	// bot; /help@tidybot does, and says how to talk to it there.
	tg.PushText(group, 42, "@tidybot what's due today?")
	tg.PushText(group, 42, "/help@tidybot")
	waitFor(t, "the help", func() bool { return strings.Contains(lastText(tg, group), "/undo@tidybot") })
	if help := lastText(tg, group); !strings.Contains(help, "reply to one of my messages") || strings.Contains(help, "the word alone") {
		t.Errorf("the group's help does not say how to reach the bot there:\n%s", help)
	}
	if w := tg.Withheld(); len(w) != 1 || w[0] != "@tidybot what's due today?" {
		t.Errorf("withheld %q, want the mention", w)
	}
	help := tg.Messages(group)[len(tg.Messages(group))-1]
	tg.PushReply(group, 42, help.MessageID, "what's due today?")
	waitFor(t, "the answer to the reply to the help", func() bool { return lastText(tg, group) == "You said: what's due today?" })

	// Privacy mode off: every message reaches the bot, which answers
	// only what is addressed to it.
	tg.PrivacyOff()
	tg.PushText(group, 42, "lunch anyone?")      // the owner chatting with people
	tg.PushText(group, 666, "lunch anyone?")     // a stranger chatting
	tg.PushText(group, 42, "/help@someotherbot") // a command for another bot
	tg.PushText(group, 42, "/weather")           // someone else's command
	tg.PushText(group, 42, "@tidybot what's due tomorrow?")
	waitFor(t, "the answer to the mention", func() bool { return lastText(tg, group) == "You said: what's due tomorrow?" })
	answer := tg.Messages(group)[len(tg.Messages(group))-1]
	tg.PushReply(group, 42, answer.MessageID, "and tomorrow?")
	waitFor(t, "the answer to the reply", func() bool { return lastText(tg, group) == "You said: and tomorrow?" })
	for _, m := range tg.Messages(group) {
		if strings.Contains(m.Text, "lunch") || strings.Contains(m.Text, "telegram:666") || strings.Contains(m.Text, "don't know") {
			t.Errorf("the bot answered what was not addressed to it: %q", m.Text)
		}
	}
	// A press on a button without a message (inline mode) is still
	// answered, so its spinner stops.
	id := tg.PushCallbackWithoutMessage(42, "w:gone1234:y")
	waitFor(t, "the answer to the press", func() bool { return strings.Contains(strings.Join(tg.Answers(), "\n"), fmt.Sprint("cb", id)) })
}
