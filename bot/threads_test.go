package bot

import "testing"

func TestKnowsThreadOnlyWhereItWasAddressed(t *testing.T) {
	h := newHarness(t, &mockAgent{})
	in := msg("what's due today?", "u1")
	in.ChatID, in.ThreadID, in.DM = "C1", "5.5", false
	h.handle(t, in)
	h.idle(t)
	for _, tt := range []struct {
		chat, thread string
		want         bool
	}{{"C1", "5.5", true}, {"C1", "6.6", false}, {"C2", "5.5", false}} {
		got, err := h.bot.KnowsThread(t.Context(), "telegram", tt.chat, tt.thread)
		if err != nil || got != tt.want {
			t.Errorf("KnowsThread(%s, %s) = %v, %v; want %v", tt.chat, tt.thread, got, err, tt.want)
		}
	}
	stranger := msg("lunch anyone?", "u2")
	stranger.UserID, stranger.ChatID, stranger.ThreadID = "666", "C1", "7.7"
	h.handle(t, stranger)
	h.idle(t)
	if got, _ := h.bot.KnowsThread(t.Context(), "telegram", "C1", "7.7"); got {
		t.Error("a refused message made its thread the bot's")
	}
}
