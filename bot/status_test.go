package bot

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// linePlatform is a fakePlatform whose threads "t…" show a status line
// (ThreadStatus); each SetStatus is recorded, in order, and fails with
// err when set.
type linePlatform struct {
	*fakePlatform
	mu    sync.Mutex
	lines []string
	err   error
	// hold, when set, holds the first SetStatus until it is closed.
	hold chan struct{}
}

func (p *linePlatform) HasStatus(_, threadID string) bool { return strings.HasPrefix(threadID, "t") }

func (p *linePlatform) SetStatus(_ context.Context, _, _, text string) error {
	p.mu.Lock()
	hold := p.hold
	p.hold = nil
	p.mu.Unlock()
	if hold != nil {
		<-hold
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, text)
	return p.err
}

func (p *linePlatform) got() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

func newLineHarness(t *testing.T, ag *mockAgent, err error) (*harness, *linePlatform) {
	t.Helper()
	plat := &fakePlatform{name: "slack"}
	lp := &linePlatform{fakePlatform: plat, err: err}
	h := &harness{store: newMemStore(), agent: ag, plat: plat}
	h.bot = New(h.store, ag, Config{Workers: 2, AllowedUsers: []string{"slack:U1"}})
	h.bot.AddPlatform(lp)
	ctx, cancel := context.WithCancel(t.Context())
	if err := h.bot.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.bot.Stop(); cancel() })
	return h, lp
}

func paneMsg(thread string) Incoming {
	return Incoming{Platform: "slack", ChatID: "D1", ThreadID: thread, MessageID: "m1", UserID: "U1", Text: "tidy", EventID: "e-" + thread, DM: true}
}

var noteRun = observing([]agent.Event{{Kind: agent.EventNote, Summary: "Moved 3 tasks to Birthday"}})

// In a thread with a status line (Slack's assistant pane) the message is
// acknowledged on the line at once, the run's notes are the line, it is
// cleared before the answer, and no status message is posted or edited.
func TestStatusLineInsteadOfStatusMessage(t *testing.T) {
	h, lp := newLineHarness(t, &mockAgent{StartFn: noteRun}, nil)
	h.handle(t, paneMsg("t1"))
	h.idle(t)
	got := lp.got()
	if len(got) < 3 || got[0] != statusReading || got[1] != statusWorking || got[len(got)-1] != "" {
		t.Fatalf("status lines %q: want reading, working, …, cleared", got)
	}
	if !slices.Contains(got, "is working… moved 3 tasks to Birthday") {
		t.Errorf("status lines %q lack the note", got)
	}
	if texts := h.plat.texts(); len(texts) != 1 || !strings.HasPrefix(texts[0], "did:") {
		t.Errorf("posted %q: want the answer alone", texts)
	}
	if len(h.plat.edits) != 0 {
		t.Errorf("edited %q", h.plat.edits)
	}
}

// The intake's status line is set in the fast lane, outside the chat's
// lane of the send queue, and the run's first line waits for it: held
// at the platform, "reading" still comes before "working" (issue 36).
func TestStatusLineAtIntakeComesFirst(t *testing.T) {
	ran := make(chan struct{})
	h, lp := newLineHarness(t, &mockAgent{StartFn: func(ctx context.Context, in agent.Input, hk agent.Hooks) agent.Outcome {
		out := noteRun(ctx, in, hk)
		close(ran)
		return out
	}}, nil)
	release := make(chan struct{})
	lp.hold = release
	h.handle(t, paneMsg("t1"))
	if h.bot.signShown("D1", "t1") == nil {
		t.Fatal("no status line being set at intake")
	}
	// The run goes on meanwhile: its "working" line, note, clearing and
	// answer are queued in the chat's lane, where they wait for
	// "reading"; without that wait they would be made now.
	<-ran
	time.Sleep(100 * time.Millisecond)
	close(release)
	h.idle(t)
	got := lp.got()
	if len(got) < 3 || got[0] != statusReading || got[1] != statusWorking || got[len(got)-1] != "" {
		t.Fatalf("status lines %q: want reading, working, …, cleared", got)
	}
}

// Elsewhere (a thread without a status line), and where the platform
// refuses the line, the run posts its status message as before; the
// notes are not lost.
func TestStatusLineRefusedFallsBack(t *testing.T) {
	for _, tt := range []struct {
		thread string
		err    error
	}{{"x1", nil}, {"t1", errors.New("slack: invalid_thread_ts")}} {
		h, lp := newLineHarness(t, &mockAgent{StartFn: noteRun}, tt.err)
		h.handle(t, paneMsg(tt.thread))
		h.idle(t)
		texts := h.plat.texts()
		if len(texts) != 2 || !strings.HasPrefix(texts[0], "🤔 Working on it…") || !strings.HasPrefix(texts[1], "did:") {
			t.Errorf("thread %s, err %v: posted %q, want the status message then the answer", tt.thread, tt.err, texts)
		}
		if tt.err == nil && len(lp.got()) != 0 {
			t.Errorf("thread %s: status lines %q", tt.thread, lp.got())
		}
		seen := strings.Join(append(texts, h.plat.edits...), "\n")
		if !strings.Contains(seen, "Moved 3 tasks to Birthday") {
			t.Errorf("thread %s, err %v: the note is lost: %q", tt.thread, tt.err, seen)
		}
	}
}
