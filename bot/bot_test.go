package bot

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tidybot/tidybot/agent"
)

type harness struct {
	bot   *Bot
	store *memStore
	agent *mockAgent
	plat  *fakePlatform
}

func newHarness(t *testing.T, ag *mockAgent) *harness {
	t.Helper()
	return startHarness(t, ag, newTelegram(), Config{Workers: 2, AllowedUsers: []string{"telegram:42"}})
}

func newTelegram() *fakePlatform { return &fakePlatform{name: "telegram", interval: 2 * time.Second} }

// startHarness starts a bot with cfg on a memStore and plat, stopped at
// the test's end.
func startHarness(t *testing.T, ag *mockAgent, plat *fakePlatform, cfg Config) *harness {
	t.Helper()
	h := &harness{store: newMemStore(), agent: ag, plat: plat}
	h.bot = New(h.store, ag, cfg)
	h.bot.AddPlatform(h.plat)
	ctx, cancel := context.WithCancel(t.Context())
	if err := h.bot.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.bot.Stop(); cancel() })
	return h
}

func msg(text, event string) Incoming {
	return Incoming{Platform: "telegram", ChatID: "c1", UserID: "42", Text: text, EventID: event, DM: true}
}

func (h *harness) handle(t *testing.T, in Incoming) {
	t.Helper()
	if err := h.bot.Handle(t.Context(), in); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) idle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := h.bot.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestDuplicateEventDropped(t *testing.T) {
	h := newHarness(t, &mockAgent{})
	h.handle(t, msg("what's due today?", "u1"))
	h.handle(t, msg("what's due today?", "u1"))
	h.idle(t)
	if got := h.agent.startedList(); len(got) != 1 {
		t.Errorf("runs started: %d (%s), want 1", len(got), joined(got))
	}
}

func TestUnknownUserTouchesNothing(t *testing.T) {
	h := newHarness(t, &mockAgent{})
	in := msg("delete everything", "u2")
	in.UserID = "666"
	h.handle(t, in)
	h.idle(t)
	if got := h.agent.startedList(); len(got) != 0 {
		t.Errorf("runs started for an unknown user: %s", joined(got))
	}
	if len(h.store.threads)+len(h.store.messages)+len(h.store.jobs)+len(h.store.runs) != 0 {
		t.Errorf("the store was touched: %d threads, %d messages", len(h.store.threads), len(h.store.messages))
	}
	texts := h.plat.texts()
	if len(texts) != 1 || !strings.Contains(texts[0], "telegram:666") {
		t.Errorf("sent %q, want one refusal naming the user's id", texts)
	}
}

func TestMessagesDuringARunWaitTheirTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := make(chan struct{})
		ag := &mockAgent{StartFn: blocking(block, nil)}
		h := newHarness(t, ag)
		h.handle(t, msg("first", "e1"))
		h.handle(t, msg("second", "e2"))
		synctest.Wait() // the first run blocks; a wrongly parallel second would have started
		if got := ag.startedList(); len(got) != 1 {
			t.Fatalf("runs started while the first works: %s", joined(got))
		}
		close(block)
		h.idle(t)
		if got := joined(ag.startedList()); got != "first | second" {
			t.Errorf("runs = %s, want first | second", got)
		}
	})
}

func TestQuestionAnsweredByButtonOnlyByTheAskedUser(t *testing.T) {
	ag := &mockAgent{StartFn: asking("Work", "Home")}
	h := newHarness(t, ag)
	h.bot.allowed["telegram:43"] = true
	h.handle(t, msg("file the dentist task", "e1"))
	h.idle(t)
	q := h.plat.last()
	if q.Text != "Which one?" || len(q.Buttons) != 2 || len(q.Buttons[1].Data) > 64 || !q.Question {
		t.Fatalf("question = %+v", q)
	}
	other := Incoming{Platform: "telegram", ChatID: "c1", UserID: "43", Button: q.Buttons[1].Data, ButtonRef: "cb1"}
	h.handle(t, other)
	h.idle(t)
	if len(ag.resumed) != 0 {
		t.Fatalf("another user's press resumed the run")
	}
	press := Incoming{Platform: "telegram", ChatID: "c1", UserID: "42", Button: q.Buttons[1].Data, ButtonRef: "cb2"}
	h.handle(t, press)
	h.idle(t)
	if joined(ag.resumed) != "Home" {
		t.Errorf("resumed with %q, want Home", ag.resumed)
	}
	if got := joined(h.plat.answered); !strings.Contains(got, "cb1: Only the person") || !strings.Contains(got, "cb2: ") {
		t.Errorf("presses answered: %s", got)
	}
	if got := joined(h.plat.edits); !strings.Contains(got, "→ Home") {
		t.Errorf("buttons not replaced by the choice: %s", got)
	}
	// A second press on the same (now closed) question is answered too.
	press.ButtonRef = "cb3"
	h.handle(t, press)
	h.idle(t)
	if got := joined(h.plat.answered); !strings.Contains(got, "cb3: This question is no longer open.") {
		t.Errorf("stale press: %s", got)
	}
}

func TestCancelStopsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := make(chan struct{})
		ag := &mockAgent{StartFn: blocking(block, nil)}
		h := newHarness(t, ag)
		h.handle(t, msg("tidy up", "e1"))
		synctest.Wait()
		if len(ag.startedList()) != 1 {
			t.Fatal("the run did not start")
		}
		cancel := msg("", "e2")
		cancel.Command = "cancel"
		h.handle(t, cancel)
		h.idle(t)
		runs, _ := h.store.Runs(t.Context())
		if len(runs) != 1 || runs[0].Status != RunCancelled {
			t.Fatalf("runs = %+v", runs)
		}
		if got := joined(h.plat.texts()); !strings.Contains(got, "Stopped, as you asked") {
			t.Errorf("sent: %s", got)
		}
	})
}

// A run cancelled after a write reports what it changed, keeps it in the
// conversation and can be undone (issue 7 item 5).
func TestCancelAfterAWriteReportsAndUndoes(t *testing.T) {
	ag := &mockAgent{StartFn: blocking(make(chan struct{}), []agent.Applied{{
		Write:   agent.Write{Kind: agent.MoveTask, ID: "t1", ProjectID: "p2"},
		Inverse: []agent.Write{{Kind: agent.MoveTask, ID: "t1", ProjectID: "inbox"}},
		Summary: `moved "Buy cake" to Birthday`,
	}})}
	h := newHarness(t, ag)
	h.handle(t, msg("tidy up", "e1"))
	for len(ag.startedList()) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel := msg("", "e2")
	cancel.Command = "cancel"
	h.handle(t, cancel)
	h.idle(t)
	if got := joined(h.plat.texts()); !strings.Contains(got, "Stopped, as you asked. Done so far:\n• moved \"Buy cake\" to Birthday") {
		t.Errorf("sent: %s", got)
	}
	hist, _ := h.store.RecentMessages(t.Context(), msg("", "").ThreadKey(), time.Time{}, 10)
	var texts []string
	for _, m := range hist {
		texts = append(texts, string(m.Role)+": "+m.Text)
	}
	if got := joined(texts); !strings.Contains(got, "assistant: Stopped, as you asked. Done so far") {
		t.Errorf("history = %s; the next run would not know what this one changed", got)
	}
	undo := msg("", "e3")
	undo.Command = "undo"
	h.handle(t, undo)
	h.idle(t)
	if got := joined(h.plat.texts()); !strings.Contains(got, "Undid") {
		t.Errorf("sent: %s", got)
	}
}

func TestRestartResumesWorkingRuns(t *testing.T) {
	st := newMemStore()
	tr, _ := agent.MarshalTranscript(&agent.Transcript{V: agent.TranscriptVersion, Status: agent.StatusInterrupted})
	_ = st.SaveThread(t.Context(), Thread{Key: "telegram:c1:"})
	_ = st.SaveRun(t.Context(), &Run{ID: "r1", ThreadKey: "telegram:c1:", Platform: "telegram", ChatID: "c1", UserID: "42", Status: RunWorking, Transcript: json.RawMessage(tr)})
	_ = st.SaveRun(t.Context(), &Run{ID: "r2", ThreadKey: "telegram:c2:", Platform: "telegram", ChatID: "c2", UserID: "42", Status: RunWaiting, Waiting: &Waiting{Kind: "ask", Key: "k"}, Updated: time.Now()})
	ag := &mockAgent{}
	b := New(st, ag, Config{})
	b.AddPlatform(&fakePlatform{name: "telegram"})
	startUntilIdle(t, b)
	if len(ag.resumed) != 1 {
		t.Errorf("resumed %d runs, want the working one only", len(ag.resumed))
	}
	r1, _ := st.Run(t.Context(), "r1")
	r2, _ := st.Run(t.Context(), "r2")
	if r1.Status != RunDone || r2.Status != RunWaiting {
		t.Errorf("statuses: r1 %s, r2 %s", r1.Status, r2.Status)
	}
}

// TestProgressThrottle checks that the status message is edited at most
// once per the platform's interval, and that the last notes are shown
// when the run ends.
func TestProgressThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ag := &mockAgent{StartFn: scripted(func(ctx context.Context, h agent.Hooks) {
			for i, s := range []string{"🔎 Read the inbox: 9 tasks", "📁 Created Birthday", "➡️ Moved 9 tasks", "🔎 Read the inbox: 0 tasks"} {
				if i > 0 {
					time.Sleep(700 * time.Millisecond)
				}
				h.Observe(agent.Event{Kind: agent.EventAction, Summary: s})
			}
		})}
		st := newMemStore()
		plat := &fakePlatform{name: "telegram", interval: 2 * time.Second}
		b := New(st, ag, Config{AllowedUsers: []string{"telegram:42"}})
		b.AddPlatform(plat)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		if err := b.Start(ctx); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := b.Handle(ctx, msg("tidy", "e1")); err != nil {
			t.Fatal(err)
		}
		if err := b.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		b.Stop()
		cancel()
		synctest.Wait()
		// Events at 0, 0.7, 1.4 and 2.1 s: edits at 0 s (first note) and
		// 2 s (the next two), then the last at the end of the run.
		if got := len(plat.edits); got != 3 {
			t.Errorf("edits = %d (%q), want 3", got, plat.edits)
		}
		if last := plat.edits[len(plat.edits)-1]; !strings.Contains(last, "Read the inbox: 0 tasks") || !strings.Contains(last, "Moved 9 tasks") {
			t.Errorf("last edit = %q", last)
		}
		if el := time.Since(start); el < 2100*time.Millisecond {
			t.Errorf("run took %v of fake time", el)
		}
		texts := plat.texts()
		if texts[0] != "🤔 Working on it…" || texts[len(texts)-1] != "did: tidy" {
			t.Errorf("sent %q: want the status message first and the answer as its own last message", texts)
		}
	})
}

// A run that answers in one step (no progress line) does not leave its
// status message saying "Working on it…" next to the answer: the message
// is edited to say the run is done (issue 15 item 8). A run with progress
// lines keeps them. The settling edit is the message's last: rate
// limited, it waits out the Retry-After instead of being dropped as a
// progress edit is (no later edit would show it).
func TestStatusMessageSettles(t *testing.T) {
	for _, tc := range []struct {
		name    string
		events  []agent.Event
		limited bool // the first edit gets a 429
		want    []string
	}{
		{"one step", nil, false, []string{"m1: ✅ Done"}},
		{"one step, its settle rate limited", nil, true, []string{"m1: ✅ Done"}},
		{"with progress", []agent.Event{{Kind: agent.EventAction, Summary: "🔎 Read the inbox: 3 tasks"}}, false, []string{"m1: 🔎 Read the inbox: 3 tasks"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ag := &mockAgent{StartFn: observing(tc.events)}
			plat := &fakePlatform{name: "telegram"}
			if tc.limited {
				first := true
				plat.onEdit = func(string, Outgoing) error {
					if first {
						first = false
						return RetryLater(errors.New("429 too many requests"), 200*time.Millisecond)
					}
					return nil
				}
			}
			b := New(newMemStore(), ag, Config{AllowedUsers: []string{"telegram:42"}})
			b.AddPlatform(plat)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if err := b.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := b.Handle(ctx, msg("hi", "e1")); err != nil {
				t.Fatal(err)
			}
			if err := b.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
			b.Stop()
			plat.mu.Lock()
			defer plat.mu.Unlock()
			if !slices.Equal(plat.edits, tc.want) {
				t.Errorf("edits %q, want %q", plat.edits, tc.want)
			}
		})
	}
}

// TestSettledTranscriptSavedOnceWithTheRun: the agent saves its
// transcript at every step and once more as it ends; that last save is
// the same record finish commits with the answer, so it is not a
// transaction of its own. Saves during the run still go through.
func TestSettledTranscriptSavedOnceWithTheRun(t *testing.T) {
	ag := &mockAgent{StartFn: scripted(func(ctx context.Context, h agent.Hooks) {
		tr := &agent.Transcript{V: agent.TranscriptVersion, Instruction: "tidy", Steps: 1}
		if err := h.Save(ctx, tr); err != nil {
			t.Error(err)
		}
		tr.Status, tr.Answer = agent.StatusDone, "Done."
		if err := h.Save(ctx, tr); err != nil {
			t.Error(err)
		}
	})}
	h := newHarness(t, ag)
	var runCommits []RunStatus
	h.store.onCommit = func(c Change) {
		if c.Run != nil {
			runCommits = append(runCommits, c.Run.Status)
		}
	}
	h.handle(t, msg("tidy", "e1"))
	h.idle(t)
	h.store.mu.Lock()
	saves := h.store.saves
	var final *Run
	for _, r := range h.store.runs {
		final = r
	}
	h.store.mu.Unlock()
	// The step's save stores the run (and retires its job); finish
	// commits the settled transcript with the run's end.
	if saves != 0 || !slices.Equal(runCommits, []RunStatus{RunWorking, RunDone}) {
		t.Errorf("SaveRun called %d times, runs committed %v; want the step's commit storing the run, then finish's", saves, runCommits)
	}
	if final == nil || final.Status != RunDone || len(final.Transcript) == 0 {
		t.Fatalf("run = %+v, want done with its transcript", final)
	}
}
