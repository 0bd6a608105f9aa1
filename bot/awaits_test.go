package bot

import (
	"strings"
	"testing"
)

// TestAwaitsAnswerIsAnsweredWhereTheBotStaysSilent: a stranger told
// their id today and a person prompted to connect within the hour get
// nothing more for a message; an event the platform shows as pending
// until answered (Discord's deferred slash command) gets the same notice
// again, answering that event (Outgoing.EventID), so "… is thinking"
// ends.
func TestAwaitsAnswerIsAnsweredWhereTheBotStaysSilent(t *testing.T) {
	t.Run("stranger", func(t *testing.T) {
		h := newHarness(t, &mockAgent{})
		stranger := func(event string, awaits bool) Incoming {
			in := msg("hi", event)
			in.UserID, in.AwaitsAnswer = "666", awaits
			return in
		}
		h.handle(t, stranger("e1", false))
		h.handle(t, stranger("e2", false))
		h.idle(t)
		if n := len(h.plat.texts()); n != 1 {
			t.Fatalf("two messages got %d refusals, want 1", n)
		}
		c := stranger("e3", true)
		c.Command, c.Text = "help", ""
		h.handle(t, c)
		h.idle(t)
		if got := h.plat.last(); len(h.plat.texts()) != 2 || !strings.Contains(got.Text, "telegram:666") || got.EventID != "e3" {
			t.Errorf("the pending command got %+v (of %d messages), want the refusal for e3", got, len(h.plat.texts()))
		}
	})
	t.Run("stranger in a shared chat", func(t *testing.T) {
		// Each pending command is answered, so the notice does not claim
		// to come once an hour there.
		h := newHarness(t, &mockAgent{})
		for _, event := range []string{"e1", "e2"} {
			in := msg("", event)
			in.UserID, in.DM, in.Command, in.AwaitsAnswer = "666", false, "help", true
			h.handle(t, in)
		}
		h.idle(t)
		texts := h.plat.texts()
		if len(texts) != 2 {
			t.Fatalf("two pending commands got %d answers, want 2", len(texts))
		}
		for _, text := range texts {
			if strings.Contains(text, "once an hour") {
				t.Errorf("a pending command's notice says %q, yet each one is answered", text)
			}
		}
	})
	t.Run("not connected", func(t *testing.T) {
		h := newTeamHarness(t, &fakeAccounts{agents: map[string]*mockAgent{}}, Config{AllowedUsers: []string{"slack:*"}})
		in := Incoming{Platform: "slack", ChatID: "D1", UserID: "U1", Text: "tidy", EventID: "e1", DM: true}
		h.handle(t, in)
		in.EventID = "e2"
		h.handle(t, in)
		h.idle(t)
		if n := len(h.plat.texts()); n != 1 {
			t.Fatalf("two messages got %d prompts, want 1", n)
		}
		in.EventID, in.Command, in.Text, in.AwaitsAnswer = "e3", "tidy-inbox", "", true
		h.handle(t, in)
		h.idle(t)
		if got := h.plat.last(); len(h.plat.texts()) != 2 || !strings.Contains(got.Text, "https://todoist.example/oauth/authorize?for=U1") || got.EventID != "e3" {
			t.Errorf("the pending command got %+v (of %d messages), want the Connect prompt for e3", got, len(h.plat.texts()))
		}
	})
}

// TestRunMessagesNameTheirEvent: every message of a run carries the
// event id that started it (Outgoing.EventID), so a platform answering
// a pending request answers it with its own run's messages only.
func TestRunMessagesNameTheirEvent(t *testing.T) {
	h := newHarness(t, &mockAgent{})
	h.handle(t, msg("tidy up", "e7"))
	h.idle(t)
	h.plat.mu.Lock()
	defer h.plat.mu.Unlock()
	if len(h.plat.sent) == 0 {
		t.Fatal("nothing sent")
	}
	for _, m := range h.plat.sent {
		if m.EventID != "e7" {
			t.Errorf("message %q names event %q, want e7", m.Text, m.EventID)
		}
	}
}
