package bot

import (
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent"
)

func groupMsg(user, text string) Incoming {
	return Incoming{Platform: "telegram", ChatID: "-100", UserID: user, Text: text}
}

func groupCmd(user, cmd string) Incoming {
	return Incoming{Platform: "telegram", ChatID: "-100", UserID: user, Command: cmd}
}

func (h *engineHarness) waiting(t *testing.T) []*Run {
	t.Helper()
	runs, err := h.store.Runs(t.Context(), RunWaiting)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// TestTelegramGroupEachPersonHasTheirOwnConversation: in one Telegram
// group, another member's "yes", press, /cancel, /reset, /usage and
// /undo never touch the owner's question or changes.
func TestTelegramGroupEachPersonHasTheirOwnConversation(t *testing.T) {
	h := newEngineHarness(t)
	const all = "Old shopping list@inbox, Old packing list@inbox"

	// 42 moves the lists (a run that wrote: its answer has an Undo button).
	h.say(t, groupMsg("42", "move the lists home"))
	moved := h.tg.last()
	moved.Buttons = actions(moved.Buttons)
	if moved.Text != "Moved both lists to Home." || len(moved.Buttons) != 1 || moved.Buttons[0].Command != "undo" {
		t.Fatalf("answer of a run that wrote = %+v, want it with an Undo button", moved)
	}
	// 43's /undo and 43's press of 42's Undo button change nothing.
	h.say(t, groupCmd("43", "undo"))
	if got := h.tg.last().Text; got != "There is nothing to undo here." {
		t.Errorf("43's /undo: %q", got)
	}
	h.say(t, Incoming{Platform: "telegram", ChatID: "-100", UserID: "43", Button: moved.Buttons[0].Data, ButtonRef: "cb0"})
	if got := h.tasks.contents(); got != "Old shopping list@home, Old packing list@home" {
		t.Fatalf("tasks after 43 tried to undo 42's move: %q", got)
	}
	if got := joined(h.tg.answered); !strings.Contains(got, "cb0: Only the person who asked can undo this.") {
		t.Errorf("43's press of 42's Undo: %s", got)
	}
	// 42's press undoes it; the button gives way.
	h.say(t, Incoming{Platform: "telegram", ChatID: "-100", UserID: "42", Button: moved.Buttons[0].Data, ButtonRef: "cb1", MessageID: "m9"})
	if got := h.tasks.contents(); got != all {
		t.Fatalf("tasks after 42 pressed Undo: %q", got)
	}
	if got := joined(h.tg.answered); !strings.Contains(got, "cb1: Undoing…") {
		t.Errorf("42's press not answered: %s", got)
	}
	if got := joined(h.tg.edits); !strings.Contains(got, "m9: Moved both lists to Home.\n→ ↩️ Undone") {
		t.Errorf("the Undo button did not give way: %s", got)
	}

	// 42 asks to delete; the confirmation is 42's.
	h.say(t, groupMsg("42", "delete the old lists"))
	q := h.tg.last()
	if len(q.Buttons) != 2 {
		t.Fatalf("confirmation = %+v", q)
	}
	// 43 says yes in the group: their own request, with none of 42's
	// history; 42's question stays open and nothing is deleted.
	h.say(t, groupMsg("43", "yes"))
	if got := h.tasks.contents(); got != all {
		t.Fatalf("tasks after 43 said yes: %q", got)
	}
	if got := h.tg.last().Text; got != "You said: yes" {
		t.Errorf("43's run answered %q, want a run of their own", got)
	}
	if w := h.waiting(t); len(w) != 1 || w[0].UserID != "42" {
		t.Fatalf("waiting runs after 43's yes: %+v", w)
	}
	// 43 presses 42's Delete button: refused, answered.
	h.say(t, Incoming{Platform: "telegram", ChatID: "-100", UserID: "43", Button: q.Buttons[0].Data, ButtonRef: "cb2"})
	if got := joined(h.tg.answered); !strings.Contains(got, "cb2: Only the person who asked can answer this.") {
		t.Errorf("43's press: %s", got)
	}
	// /usage counts each person's own runs.
	h.say(t, groupCmd("43", "usage"))
	if got := h.tg.last().Text; !strings.Contains(got, "over 1 run.") {
		t.Errorf("43's /usage: %q, want 43's one run", got)
	}
	h.say(t, groupCmd("42", "usage"))
	if got := h.tg.last().Text; !strings.Contains(got, "over 2 runs.") {
		t.Errorf("42's /usage: %q, want 42's two runs", got)
	}
	// 43's /cancel and /reset leave 42's question and history alone.
	h.say(t, groupCmd("43", "cancel"))
	if got := h.tg.last().Text; got != "Nothing is running here." {
		t.Errorf("43's /cancel: %q", got)
	}
	h.say(t, groupCmd("43", "reset"))
	if w := h.waiting(t); len(w) != 1 || w[0].UserID != "42" {
		t.Fatalf("waiting runs after 43's /cancel and /reset: %+v", w)
	}
	h.say(t, groupCmd("42", "usage"))
	if got := h.tg.last().Text; !strings.Contains(got, "over 2 runs.") {
		t.Errorf("42's /usage after 43's /reset: %q, want 42's two runs", got)
	}
	// 42's yes deletes.
	h.say(t, groupMsg("42", "yes"))
	if got := h.tasks.contents(); got != "" {
		t.Errorf("tasks after 42's yes: %q", got)
	}
	if got := h.tg.last().Text; got != "Deleted." {
		t.Errorf("42's answer: %q", got)
	}
}

// TestSlackChannelThreadEachPersonHasTheirOwnConversation: two people in
// one Slack channel thread; the second one's "yes" and "cancel" neither
// answer nor cancel the first one's confirmation.
func TestSlackChannelThreadEachPersonHasTheirOwnConversation(t *testing.T) {
	h := newEngineHarness(t)
	say := func(user, text string) {
		h.say(t, Incoming{Platform: "slack", ChatID: "C1", ThreadID: "1700.1", MessageID: newID(), UserID: user, Text: text})
	}
	say("U1", "delete the old lists")
	q := h.slack.last()
	if len(q.Buttons) != 2 || q.ThreadID != "1700.1" {
		t.Fatalf("confirmation = %+v, want buttons in the thread", q)
	}
	say("U2", "yes")
	say("U2", "cancel")
	if got := h.tasks.contents(); got != "Old shopping list@inbox, Old packing list@inbox" {
		t.Fatalf("tasks after U2's yes: %q", got)
	}
	if w := h.waiting(t); len(w) != 1 || w[0].UserID != "U1" {
		t.Fatalf("waiting runs after U2 spoke: %+v", w)
	}
	if got := joined(h.slack.texts()); !strings.Contains(got, "You said: yes") || !strings.Contains(got, "You said: cancel") {
		t.Errorf("U2's messages were not their own requests: %s", got)
	}
	// U2's runs saw none of U1's conversation.
	for _, r := range h.model.requests() {
		var last string
		for _, m := range r.Messages {
			if m.Role == "user" {
				last = m.Content
			}
		}
		if (last == "yes" || last == "cancel") && strings.Contains(joinedMessages(r), "delete the old lists") {
			t.Errorf("U2's run saw U1's history: %s", joinedMessages(r))
		}
	}
	// A press by U2 with Slack's fields (no DM flag) is refused.
	h.say(t, Incoming{Platform: "slack", ChatID: "C1", ThreadID: "1700.1", UserID: "U2", Button: q.Buttons[0].Data})
	say("U1", "Yes.")
	if got := h.tasks.contents(); got != "" {
		t.Errorf("tasks after U1's yes: %q", got)
	}
	if got := h.slack.last(); got.Text != "Deleted." || got.ThreadID != "1700.1" {
		t.Errorf("U1's answer: %+v", got)
	}
}

func joinedMessages(r agent.Request) string {
	var out []string
	for _, m := range r.Messages {
		out = append(out, string(m.Role)+": "+m.Content)
	}
	return strings.Join(out, "\n")
}

// TestSlackSlashCommandInAChannel: a slash command in a channel carries no
// thread; it acts on the person's latest conversation there, never on
// someone else's.
func TestSlackSlashCommandInAChannel(t *testing.T) {
	h := newEngineHarness(t)
	h.say(t, Incoming{Platform: "slack", ChatID: "C1", ThreadID: "1700.1", UserID: "U1", Text: "move the lists home"})
	h.say(t, Incoming{Platform: "slack", ChatID: "C1", UserID: "U2", Command: "tidy", Text: "undo"})
	if got := h.slack.last().Text; got != "There is nothing to undo here." {
		t.Errorf("U2's /tidy undo = %q", got)
	}
	h.say(t, Incoming{Platform: "slack", ChatID: "C1", UserID: "U1", Command: "tidy", Text: "undo"})
	if got := h.tasks.contents(); got != "Old shopping list@inbox, Old packing list@inbox" {
		t.Errorf("tasks after U1's /tidy undo in the channel: %q", got)
	}
	if got := h.slack.last(); !strings.HasPrefix(got.Text, "↩️ Undid 2 of 2") || got.ThreadID != "1700.1" {
		t.Errorf("U1's /tidy undo answered %+v, want it in the run's thread", got)
	}
}
