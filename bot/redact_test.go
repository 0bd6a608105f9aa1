package bot

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// TestErrorTextInChatIsRedacted: an answer that quotes an upstream error
// echoing a secret reaches neither the chat nor the stored answer.
func TestErrorTextInChatIsRedacted(t *testing.T) {
	const secret = "xoxb-1234-5678-abcdefSECRET"
	st, ag, plat := newMemStore(), &fakeAgent{}, &fakePlatform{name: "telegram", interval: 2 * time.Second}
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
