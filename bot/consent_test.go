package bot

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// seqPlatform is a fakePlatform whose message ids are one sequence for
// the bot's posts and the person's messages ("s1", "s2", …), as a chat's
// are on Slack (ts) and Telegram (message_id): it orders them.
type seqPlatform struct {
	*fakePlatform
	mu sync.Mutex
	n  int
}

var _ Sequencer = (*seqPlatform)(nil)

func (p *seqPlatform) next() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	return "s" + strconv.Itoa(p.n)
}

func (p *seqPlatform) Send(ctx context.Context, m Outgoing) (string, error) {
	if _, err := p.fakePlatform.Send(ctx, m); err != nil {
		return "", err
	}
	return p.next(), nil
}

func (p *seqPlatform) After(a, b string) (bool, bool) {
	x, errA := strconv.Atoi(strings.TrimPrefix(a, "s"))
	y, errB := strconv.Atoi(strings.TrimPrefix(b, "s"))
	if errA != nil || errB != nil || !strings.HasPrefix(a, "s") || !strings.HasPrefix(b, "s") {
		return false, false
	}
	return x > y, true
}

// consentHarness is an engine harness on a seqPlatform whose model can be
// held at its first call of a run, so that the person types while the
// run is working.
type consentHarness struct {
	*engineHarness
	plat    *seqPlatform
	hold    chan struct{} // closed: the model answers
	calling chan struct{} // gets a value when the model is called
}

func newConsentHarness(t *testing.T, script func(modelTurn) (string, any)) *consentHarness {
	t.Helper()
	h := &consentHarness{
		engineHarness: &engineHarness{store: newMemStore(), tasks: newMemTasks("Old shopping list", "Old packing list")},
		plat:          &seqPlatform{fakePlatform: &fakePlatform{name: "telegram", interval: time.Millisecond}},
		hold:          make(chan struct{}),
		calling:       make(chan struct{}, 100),
	}
	h.tg = h.plat.fakePlatform
	h.model = &scriptModel{fn: func(mt modelTurn) (string, any) {
		h.calling <- struct{}{}
		<-h.hold
		return script(mt)
	}}
	eng := agent.New(h.model, h.tasks, agent.Config{Confirm: agent.ConfirmDestructive})
	h.bot = New(h.store, eng, Config{Workers: 2, AllowedUsers: []string{"telegram:42"}})
	h.bot.AddPlatform(h.plat)
	ctx, cancel := context.WithCancel(t.Context())
	if err := h.bot.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.bot.Stop(); cancel() })
	return h
}

// typed is a message the person sends now: its id comes after every
// message posted so far.
func (h *consentHarness) typed(text string) Incoming {
	in := msg(text, "")
	in.MessageID = h.plat.next()
	return in
}

// TestEarlyMessageIsNotConsent: "ok thanks", typed while the run works
// and before it asks, does not confirm the delete it asks about
// afterwards; the question stays open, and a yes typed after it deletes.
// "yes?" typed after it is a question, not a yes.
func TestEarlyMessageIsNotConsent(t *testing.T) {
	const kept = "Old shopping list@inbox, Old packing list@inbox"
	for _, tt := range []struct {
		name, later, tasks, answer string
	}{
		{"then yes", "yes", "", "Deleted."},
		{"then yes?", "yes?", kept, "I kept both lists."},
		{"then ok?", "ok?", kept, "I kept both lists."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newConsentHarness(t, deleter)
			if err := h.bot.Handle(t.Context(), h.typed("delete the old lists")); err != nil {
				t.Fatal(err)
			}
			<-h.calling // the run is working: "🤔 Working on it…"
			if err := h.bot.Handle(t.Context(), h.typed("ok thanks")); err != nil {
				t.Fatal(err)
			}
			close(h.hold)
			h.idle(t)
			if got := h.tasks.contents(); got != kept {
				t.Fatalf("tasks = %q: a message sent before the question confirmed it", got)
			}
			q := h.tg.last()
			if !strings.Contains(q.Text, "Delete \"Old shopping list\", \"Old packing list\"?") || len(q.Buttons) != 2 {
				t.Fatalf("last message = %+v, want the confirmation, still open", q)
			}
			r, _ := h.store.WaitingRun(t.Context(), msg("", "").ThreadKey())
			if r == nil || len(r.Early) != 1 || r.Early[0] != "ok thanks" {
				t.Fatalf("waiting run = %+v: want it waiting, holding the early words", r)
			}
			h.say(t, h.typed(tt.later))
			if got := h.tasks.contents(); got != tt.tasks {
				t.Errorf("tasks after %q = %q, want %q", tt.later, got, tt.tasks)
			}
			if got := h.tg.last().Text; got != tt.answer {
				t.Errorf("answer = %q, want %q", got, tt.answer)
			}
		})
	}
}

func (h *consentHarness) idle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := h.bot.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestEarlyWordsReachTheModelWithTheAnswer: words typed before an
// ask_user question was posted are not its answer; the answer typed
// after it is, and the model hears both, told which is which.
func TestEarlyWordsReachTheModelWithTheAnswer(t *testing.T) {
	script := func(mt modelTurn) (string, any) {
		if mt.instruction == "file the lists" && len(mt.tools) == 0 {
			return agent.ActAskUser, map[string]any{"question": "Which project?", "options": []string{"Home", "Inbox"}}
		}
		if mt.instruction == "file the lists" {
			return agent.ActFinalAnswer, map[string]string{"answer": "Heard: " + mt.lastTool()}
		}
		return deleter(mt)
	}
	h := newConsentHarness(t, script)
	if err := h.bot.Handle(t.Context(), h.typed("file the lists")); err != nil {
		t.Fatal(err)
	}
	<-h.calling
	if err := h.bot.Handle(t.Context(), h.typed("Inbox")); err != nil {
		t.Fatal(err)
	}
	close(h.hold)
	h.idle(t)
	if q := h.tg.last(); q.Text != "Which project?" {
		t.Fatalf("last message = %q: the early %q answered the question", q.Text, "Inbox")
	}
	h.say(t, h.typed("Home"))
	want := fmt.Sprintf("Heard: The user answered: Home\n(Before the question was posted, they had also written: %s. That was not an answer to it.)", "“Inbox”")
	if got := h.tg.last().Text; got != want {
		t.Errorf("answer = %q, want %q", got, want)
	}
}
