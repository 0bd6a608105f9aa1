package bot

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// ackPlatform is a fakePlatform that acknowledges messages (Acknowledger);
// each Ack's "chat/message" goes to acks, and fails with err when set.
type ackPlatform struct {
	*fakePlatform
	acks chan string
	err  error
}

func (p *ackPlatform) Ack(_ context.Context, chatID, messageID string) error {
	p.acks <- chatID + "/" + messageID
	return p.err
}

func newAckHarness(t *testing.T, ag *mockAgent, err error) (*harness, *ackPlatform) {
	t.Helper()
	plat := newTelegram()
	ap := &ackPlatform{fakePlatform: plat, acks: make(chan string, 10), err: err}
	h := &harness{store: newMemStore(), agent: ag, plat: plat}
	h.bot = New(h.store, ag, Config{Workers: 2, AllowedUsers: []string{"telegram:42"}})
	h.bot.AddPlatform(ap)
	ctx, cancel := context.WithCancel(t.Context())
	if err := h.bot.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.bot.Stop(); cancel() })
	return h, ap
}

func waitAck(t *testing.T, acks chan string) string {
	t.Helper()
	select {
	case a := <-acks:
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("no acknowledgement")
		return ""
	}
}

// A stored message is acknowledged at once, while its run has not even
// started (the model is busy elsewhere): the first sign of life does not
// wait for the queue, the model or the status message (issue 26 item 3).
func TestAckBeforeTheRun(t *testing.T) {
	release := make(chan struct{})
	ag := &mockAgent{StartFn: func(ctx context.Context, in agent.Input, _ agent.Hooks) agent.Outcome {
		<-release
		return done(newTranscript(in), "did: "+in.Instruction)
	}}
	h, ap := newAckHarness(t, ag, nil)
	in := msg("tidy", "e1")
	in.MessageID = "m1"
	h.handle(t, in)
	if got := waitAck(t, ap.acks); got != "c1/m1" {
		t.Errorf("ack = %q, want c1/m1", got)
	}
	close(release)
	h.idle(t)
	// The same event delivered again is a duplicate: no second ack.
	h.handle(t, in)
	h.idle(t)
	select {
	case a := <-ap.acks:
		t.Errorf("a duplicate was acknowledged: %q", a)
	default:
	}
}

// A message the store refused is not acknowledged: the 👀 would promise
// an answer that never comes if the platform's retry is lost.
func TestNoAckWhenNotStored(t *testing.T) {
	h, ap := newAckHarness(t, &mockAgent{}, nil)
	h.store.mu.Lock()
	h.store.commitErr = func(Change) error { return errors.New("disk full") }
	h.store.mu.Unlock()
	in := msg("tidy", "e1")
	in.MessageID = "m1"
	if err := h.bot.Handle(t.Context(), in); err == nil {
		t.Fatal("Handle of an unstored message returned nil")
	}
	select {
	case a := <-ap.acks:
		t.Errorf("an unstored message was acknowledged: %q", a)
	case <-time.After(50 * time.Millisecond):
	}
}

// An acknowledgement the platform refuses (an old Bot API server, a chat
// with reactions off) leaves the person the status message: a run still
// working after quietStatus posts it, and its answer follows.
func TestAckFailureFallsBack(t *testing.T) {
	quietStatus = 20 * time.Millisecond
	t.Cleanup(func() { quietStatus = 2 * time.Second })
	var h *harness
	ag := &mockAgent{StartFn: func(ctx context.Context, in agent.Input, _ agent.Hooks) agent.Outcome {
		for !slices.Contains(h.plat.texts(), "🤔 Working on it…") {
			select {
			case <-ctx.Done():
				return agent.Outcome{Status: agent.StatusInterrupted, Err: ctx.Err()}
			case <-time.After(5 * time.Millisecond):
			}
		}
		return done(newTranscript(in), "did: "+in.Instruction)
	}}
	h, ap := newAckHarness(t, ag, errors.New("telegram: REACTION_INVALID"))
	in := msg("tidy", "e1")
	in.MessageID = "m1"
	h.handle(t, in)
	waitAck(t, ap.acks)
	h.idle(t)
	if texts := h.plat.texts(); len(texts) != 2 || texts[1] != "did: tidy" {
		t.Errorf("sent %q", texts)
	}
}

// ackedRun handles a message acknowledged at intake (the reaction
// shown) whose run ag does, and returns what the chat was sent and the
// edits made, once the bot is idle.
func ackedRun(t *testing.T, ag *mockAgent) (texts, edits []string) {
	t.Helper()
	h, ap := newAckHarness(t, ag, nil)
	in := msg("tidy", "e1")
	in.MessageID = "m1"
	h.handle(t, in)
	waitAck(t, ap.acks)
	h.idle(t)
	h.plat.mu.Lock()
	edits = slices.Clone(h.plat.edits)
	h.plat.mu.Unlock()
	return h.plat.texts(), edits
}

// A message acknowledged at intake whose run answers at once costs the
// chat its answer alone: no status message, and so no edit settling it
// (Slack's chat.update is Tier 3, about 50 a minute for a whole
// workspace: issue 36).
func TestAckedRunPostsNoStatusMessage(t *testing.T) {
	texts, edits := ackedRun(t, &mockAgent{})
	if len(texts) != 1 || texts[0] != "did: tidy" || len(edits) != 0 {
		t.Errorf("sent %q, edited %q; want the answer alone", texts, edits)
	}
}

// The run of an acknowledged message posts its status message with its
// first note: the note is the message, and, having lines, it needs no
// settling edit.
func TestAckedRunPostsItsFirstNote(t *testing.T) {
	ag := &mockAgent{StartFn: func(ctx context.Context, in agent.Input, hk agent.Hooks) agent.Outcome {
		hk.Observe(agent.Event{Kind: agent.EventAction, Summary: "Read the inbox"})
		return done(newTranscript(in), "did: "+in.Instruction)
	}}
	texts, edits := ackedRun(t, ag)
	if !slices.Equal(texts, []string{"Read the inbox", "did: tidy"}) || len(edits) != 0 {
		t.Errorf("sent %q, edited %q", texts, edits)
	}
}
