package telegram_test

import (
	"context"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/telegram"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/bot"
)

// answerer answers each event in its chat and thread as the bot does
// (Outgoing.ThreadID is the event's): a status message, its progress
// edit and the answer.
type answerer struct {
	recorder
	a *telegram.Adapter
}

func (h *answerer) Handle(ctx context.Context, in bot.Incoming) error {
	_ = h.recorder.Handle(ctx, in)
	m := bot.Outgoing{ChatID: in.ChatID, ThreadID: in.ThreadID, Text: "⏳ working"}
	id, err := h.a.Send(ctx, m)
	if err != nil {
		return err
	}
	m.Text = "⏳ working\n🔎 Read the inbox"
	if err := h.a.Edit(ctx, id, m); err != nil {
		return err
	}
	m.Text = "Done."
	_, err = h.a.Send(ctx, m)
	return err
}

// TestForumTopicRepliesStayInTheTopic: a message in a forum topic is an
// event of that topic (ThreadID), and what the bot sends for it goes to
// the same topic (message_thread_id); a message outside topics is
// answered without one.
func TestForumTopicRepliesStayInTheTopic(t *testing.T) {
	a, srv := newAdapter(t, "")
	const group = -1001234
	cmd := "/tidy_inbox@" + telegramtest.BotUserName // privacy mode lets a command through
	srv.PushTopicText(group, 7, 77, cmd)
	srv.PushText(-1005678, 7, cmd)
	h := &answerer{a: a}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Poll(ctx, h) }()
	deadline := time.Now().Add(10 * time.Second)
	for (len(srv.Messages(group)) < 2 || len(srv.Messages(-1005678)) < 2) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := h.got()
	if len(got) != 2 {
		t.Fatalf("handled %+v", got)
	}
	for _, in := range got {
		want := map[string]string{"-1001234": "77", "-1005678": ""}[in.ChatID]
		if in.ThreadID != want {
			t.Errorf("event in %s: ThreadID %q, want %q", in.ChatID, in.ThreadID, want)
		}
	}
	sent := srv.Messages(group)
	if len(sent) != 2 || sent[0].Edits != 1 {
		t.Fatalf("sent to the forum: %+v, want the status (edited once) and the answer", sent)
	}
	for _, m := range sent {
		if m.ThreadID != 77 {
			t.Errorf("%q went to topic %d, want 77", m.Text, m.ThreadID)
		}
	}
	for _, m := range srv.Messages(-1005678) {
		if m.ThreadID != 0 {
			t.Errorf("%q outside a forum went to topic %d", m.Text, m.ThreadID)
		}
	}
}
