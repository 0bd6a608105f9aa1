package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
)

// TestChatConfirmationOnlyAYesDeletes: a reply that starts with "yes"
// but is not one deletes nothing and reaches the model as the user's
// words; a 👍 is a yes.
func TestChatConfirmationOnlyAYesDeletes(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	for _, reply := range []string{"yesterday's list is fine, keep it", "yes, but only the first one"} {
		out := e.chat(t, "delete the cake task\n"+reply+"\n", nil)
		mustContain(t, out, "1) Delete 1 task", "I kept the cake task. The user did not confirm; nothing was done. They said: “"+reply+"”")
		if n := len(e.todo.Tasks()); n != 9 {
			t.Fatalf("tasks after %q: %d, want 9", reply, n)
		}
	}
	out := e.chat(t, "delete the cake task\n👍\n", nil)
	mustContain(t, out, "Deleted the cake task.")
	if n := len(e.todo.Tasks()); n != 8 {
		t.Errorf("tasks after 👍: %d, want 8", n)
	}
}

// TestTelegramUndoButton: the answer of a run that wrote carries an Undo
// button through the real adapter; another user's press is refused, the
// asker's press reverts the run, and every press is answered.
func TestTelegramUndoButton(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	before := e.layout()
	tg := serveTelegram(t, e)
	tg.PushText(42, 42, "/tidy-inbox")
	waitFor(t, "the tidy's answer", func() bool { return strings.HasPrefix(lastText(tg, 42), "Moved ") })
	ms := tg.Messages(42)
	answer := ms[len(ms)-1]
	if len(answer.Buttons) != 3 || answer.Labels[0] != "↩️ Undo" || answer.Labels[1] != "👍" || answer.Labels[2] != "👎" {
		t.Fatalf("answer %+v: want the Undo button, then 👍 and 👎", answer)
	}
	tg.PushCallback(42, 43, answer.MessageID, answer.Buttons[0]) // not allowed
	tg.PushCallback(42, 42, answer.MessageID, answer.Buttons[0])
	waitFor(t, "the undo", func() bool { return strings.HasPrefix(lastText(tg, 42), "↩️ Undid 12 of 12 changes") })
	if got := e.layout(); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("after Undo:\n%v\nwant\n%v", got, before)
	}
	waitFor(t, "both presses answered", func() bool { return len(tg.Answers()) == 2 })
	for _, m := range tg.Messages(42) {
		if m.MessageID == answer.MessageID && (len(m.Buttons) != 0 || !strings.Contains(m.Text, "→ ↩️ Undone")) {
			t.Errorf("the Undo button did not give way: %+v", m)
		}
	}
}

// TestTelegramRunawayAnswerIsCapped: a 1 MB answer is cut to about three
// Telegram messages, ending in "…", not sent as 258.
func TestTelegramRunawayAnswerIsCapped(t *testing.T) {
	e := newEnv(t)
	// Room for the runaway answer at the model API (the fake cuts a reply
	// at max_tokens as the real one does).
	e.cfg.MaxTokens, e.cfg.TokenBudget = 400_000, 2_000_000
	tg := serveTelegram(t, e)
	tg.PushText(42, 42, "say a lot")
	// The answer's parts go out in one Send, so once the last (cut) part
	// is there, all are.
	defer func() {
		for _, m := range tg.Messages(42) {
			t.Logf("sent %.300q", m.Text)
		}
	}()
	waitFor(t, "the cut answer", func() bool {
		last := lastText(tg, 42)
		return strings.HasPrefix(last, "blah") && strings.HasSuffix(last, "…")
	})
	n := len(tg.Messages(42))
	t.Logf("messages sent for a 1 MB answer: %d (with the status message)", n)
	if n > 4 {
		t.Errorf("sent %d messages (the status message and the answer), want at most 4", n)
	}
}

// TestSlackChannelThreadTwoPeople: in one Slack channel thread, a second
// person's "yes" (a reply in a thread the bot is part of) is their own
// request and their press of the first person's button is refused; only
// the first person's own "yes" deletes.
func TestSlackChannelThreadTwoPeople(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	sl := slacktest.New()
	t.Cleanup(sl.Close)
	e.cfg.SlackBotToken, e.cfg.SlackSigningSecret, e.cfg.SlackURL = slacktest.Token, slackSecret, sl.URL
	e.cfg.AllowedUsers = []string{"slack:U1", "slack:U2"}
	base := serve(t, e)
	post := func(m slacktest.Message) {
		t.Helper()
		for _, ev := range sl.Events(m) {
			if code := postSigned(t, base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
				t.Fatalf("event: %d", code)
			}
		}
	}
	post(slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U1", Text: slacktest.Mention + " delete the cake task", TS: "1.1"})
	waitFor(t, "the confirmation", func() bool { return len(lastPost(sl, "C1").Buttons) == 2 })
	q := lastPost(sl, "C1")
	post(slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U2", Text: "yes", TS: "1.2", ThreadTS: "1.1"})
	waitFor(t, "U2's own answer", func() bool { return lastPost(sl, "C1").Text == "You said: yes" })
	press := func(user, trigger string) {
		payload, _ := json.Marshal(map[string]any{"type": "block_actions", "trigger_id": trigger, "user": map[string]any{"id": user}, "channel": map[string]any{"id": "C1"},
			"container": map[string]any{"type": "message", "message_ts": q.TS, "channel_id": "C1", "thread_ts": "1.1"},
			"actions":   []map[string]any{{"type": "button", "action_id": "choice_0", "block_id": "choices", "value": q.Buttons[0]}}})
		if code := postSigned(t, base+"/slack/interactivity", "application/x-www-form-urlencoded", []byte(url.Values{"payload": {string(payload)}}.Encode()), slackSecret); code != 200 {
			t.Fatalf("press: %d", code)
		}
	}
	press("U2", "tr1")
	if n := len(e.todo.Tasks()); n != 9 {
		t.Fatalf("tasks after U2's yes and press: %d, want 9", n)
	}
	post(slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U1", Text: "yes", TS: sl.NextTS(), ThreadTS: "1.1"})
	waitFor(t, "the deletion", func() bool { return lastPost(sl, "C1").Text == "Deleted the cake task." })
	if n := len(e.todo.Tasks()); n != 8 {
		t.Errorf("tasks after U1's yes: %d, want 8", n)
	}
	for _, p := range sl.Posts("C1") {
		if p.ThreadTS != "1.1" {
			t.Errorf("a post outside the thread: %+v", p)
		}
	}
}

// TestTelegramGroupTwoPeople: in one Telegram group, another member's
// "yes" to the bot is their own request and their press of the owner's
// button is refused and answered; the owner's reply "yes" deletes.
func TestTelegramGroupTwoPeople(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	e.cfg.AllowedUsers = []string{"telegram:42", "telegram:43"}
	tg := serveTelegram(t, e)
	tg.PrivacyOff() // mentions reach the bot
	const group = -100
	tg.PushText(group, 42, "@"+telegramtest.BotUserName+" delete the cake task")
	var q telegramtest.Sent
	waitFor(t, "the confirmation", func() bool {
		ms := tg.Messages(group)
		if len(ms) == 0 {
			return false
		}
		q = ms[len(ms)-1]
		return len(q.Buttons) == 2
	})
	tg.PushText(group, 43, "@"+telegramtest.BotUserName+" yes")
	waitFor(t, "43's own answer", func() bool { return lastText(tg, group) == "You said: yes" })
	tg.PushCallback(group, 43, q.MessageID, q.Buttons[0])
	waitFor(t, "43's press answered", func() bool { return strings.Contains(strings.Join(tg.Answers(), "\n"), "Only the person who asked") })
	if n := len(e.todo.Tasks()); n != 9 {
		t.Fatalf("tasks after 43's yes and press: %d, want 9", n)
	}
	tg.PushReply(group, 42, q.MessageID, "yes")
	waitFor(t, "the deletion", func() bool { return lastText(tg, group) == "Deleted the cake task." })
	if n := len(e.todo.Tasks()); n != 8 {
		t.Errorf("tasks after 42's yes: %d, want 8", n)
	}
}
