package bot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// TestErrorTextInChatIsRedacted: an answer that quotes an upstream error
// echoing a secret reaches neither the chat nor the stored answer.
func TestErrorTextInChatIsRedacted(t *testing.T) {
	const secret = "xoxb-1234-5678-abcdefSECRET"
	st, ag, plat := newMemStore(), &mockAgent{}, &fakePlatform{name: "telegram", interval: 2 * time.Second}
	b := New(st, ag, Config{AllowedUsers: []string{"telegram:42"}, Redact: agent.NewRedactor(secret)})
	b.AddPlatform(plat)
	ctx, cancel := context.WithCancel(t.Context())
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(); cancel() })
	if err := b.Handle(t.Context(), msg("invalid_auth token="+secret, "u1")); err != nil {
		t.Fatal(err)
	}
	wait, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	if err := b.WaitIdle(wait); err != nil {
		t.Fatal(err)
	}
	texts := plat.texts()
	if len(texts) == 0 || !strings.Contains(texts[len(texts)-1], "did: invalid_auth token="+agent.Redacted) {
		t.Errorf("sent %q, want the answer with the secret redacted", texts)
	}
	for _, s := range texts {
		if strings.Contains(s, secret) {
			t.Errorf("chat message holds the secret: %q", s)
		}
	}
	for _, r := range st.runs {
		if strings.Contains(r.Answer, secret) {
			t.Errorf("stored answer holds the secret: %q", r.Answer)
		}
	}
}

// TestEveryPostIsRedacted: questions, progress notes and replies go
// through the platform's queue, which hides secrets; the outbox stores
// the question redacted.
func TestEveryPostIsRedacted(t *testing.T) {
	const secret = "xoxb-1234-5678-abcdefSECRET"
	ag := &mockAgent{StartFn: func(ctx context.Context, in agent.Input, h agent.Hooks) agent.Outcome {
		h.Observe(agent.Event{Kind: agent.EventAction, Summary: "read " + secret})
		return asking("token "+secret)(ctx, in, h)
	}}
	st, plat := newMemStore(), &fakePlatform{name: "telegram", interval: 2 * time.Second}
	var stored []Outbound
	st.onCommit = func(c Change) { stored = append(stored, c.Send...) }
	b := New(st, ag, Config{AllowedUsers: []string{"telegram:42"}, Redact: agent.NewRedactor(secret)})
	b.AddPlatform(plat)
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	if err := b.Handle(t.Context(), msg("hi "+secret, "u1")); err != nil {
		t.Fatal(err)
	}
	if err := b.Handle(t.Context(), Incoming{Platform: "telegram", ChatID: "c1", UserID: "42", Command: "nope" + secret}); err != nil {
		t.Fatal(err)
	}
	wait, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	if err := b.WaitIdle(wait); err != nil {
		t.Fatal(err)
	}
	plat.mu.Lock()
	defer plat.mu.Unlock()
	posted := append([]string(nil), plat.edits...)
	for _, m := range plat.sent {
		posted = append(posted, m.Text)
		for _, bt := range m.Buttons {
			posted = append(posted, bt.Label)
		}
	}
	if len(posted) < 3 {
		t.Fatalf("posted %q", posted)
	}
	for _, s := range posted {
		if strings.Contains(s, secret) {
			t.Errorf("posted text holds the secret: %q", s)
		}
	}
	for _, ob := range stored {
		if strings.Contains(fmt.Sprint(ob.Msg), secret) {
			t.Errorf("outbox holds the secret: %+v", ob.Msg)
		}
	}
}
