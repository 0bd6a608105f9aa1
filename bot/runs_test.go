package bot

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
)

// A button press finds the run its key names in whichever conversation
// asked, and a run that stopped waiting is no longer found.
func TestPressFindsItsRunInAnyConversation(t *testing.T) {
	ag := &mockAgent{StartFn: asking("Work", "Home")}
	h := newHarness(t, ag)
	in1, in2 := msg("file the dentist task", "e1"), msg("file the cake task", "e2")
	in2.ChatID = "c2"
	h.handle(t, in1)
	h.idle(t)
	q1 := h.plat.last()
	h.handle(t, in2)
	h.idle(t)
	q2 := h.plat.last()
	if q1.ChatID != "c1" || q2.ChatID != "c2" || len(q1.Buttons) != 2 || len(q2.Buttons) != 2 {
		t.Fatalf("questions = %+v, %+v", q1, q2)
	}
	press := func(q Outgoing, i int, ref string) {
		t.Helper()
		h.handle(t, Incoming{Platform: "telegram", ChatID: q.ChatID, UserID: "42", Button: q.Buttons[i].Data, ButtonRef: ref, DM: true})
		h.idle(t)
	}
	// The later conversation's question first: the press answers it,
	// not the other one.
	press(q2, 1, "cb1")
	if got := joined(ag.resumed); got != "Home" {
		t.Fatalf("resumed with %q, want Home", got)
	}
	waiting, _ := h.store.Runs(t.Context(), RunWaiting)
	if len(waiting) != 1 || waiting[0].ChatID != "c1" {
		t.Fatalf("waiting runs after the press in c2: %+v, want c1's only", waiting)
	}
	press(q1, 0, "cb2")
	if got := joined(ag.resumed); got != "Home | Work" {
		t.Errorf("resumed with %q, want Home | Work", got)
	}
	// Both answered: a press of either is told so and resumes nothing.
	press(q2, 0, "cb3")
	press(q1, 1, "cb4")
	if got := joined(ag.resumed); got != "Home | Work" {
		t.Errorf("stale presses resumed runs: %q", got)
	}
	if got := joined(h.plat.answered); !strings.Contains(got, "cb3: This question is no longer open.") || !strings.Contains(got, "cb4: This question is no longer open.") {
		t.Errorf("stale presses answered: %s", got)
	}
}

// The store's lists return runs without their transcripts; /undo and
// /cancel save a run they found through one, which keeps its transcript.
func TestRunsSavedFromListsKeepTheirTranscripts(t *testing.T) {
	h := newEngineHarness(t)
	h.say(t, groupMsg("42", "move the lists home"))
	moved := lastRunID(t, h.store, "42")
	h.say(t, groupMsg("42", "delete the old lists"))
	asked := lastRunID(t, h.store, "42")
	h.say(t, groupCmd("42", "cancel"))
	h.say(t, groupCmd("42", "undo"))
	if got := h.tasks.contents(); got != "Old shopping list@inbox, Old packing list@inbox" {
		t.Fatalf("tasks after /undo: %q", got)
	}
	for _, id := range []string{moved, asked} {
		r, err := h.store.Run(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Transcript) == 0 {
			t.Errorf("run %s (%s, undone %v) lost its transcript", id, r.Status, r.Undone)
		}
	}
	if r, _ := h.store.Run(t.Context(), moved); !r.Undone {
		t.Errorf("the moving run is not marked undone")
	}
	if r, _ := h.store.Run(t.Context(), asked); r.Status != RunCancelled {
		t.Errorf("the asking run is %s, want cancelled", r.Status)
	}
	for _, r := range h.waiting(t) {
		t.Errorf("run %s still waits", r.ID)
	}
	all, _ := h.store.Runs(t.Context())
	for _, r := range all {
		if r.Transcript != nil {
			t.Errorf("Runs returned the transcript of %s", r.ID)
		}
	}
}

// lastRunID is the id of the newest run of user's group conversation.
func lastRunID(t *testing.T, s *memStore, user string) string {
	t.Helper()
	runs, err := s.ThreadRuns(t.Context(), groupMsg(user, "").ThreadKey())
	if err != nil || len(runs) == 0 {
		t.Fatalf("runs of %s: %v, %v", user, runs, err)
	}
	return runs[len(runs)-1].ID
}

// waitingCounter is a memStore counting the reads of a thread's waiting
// run.
type waitingCounter struct {
	*memStore
	reads atomic.Int32
}

func (s *waitingCounter) WaitingRun(ctx context.Context, key string) (*Run, error) {
	s.reads.Add(1)
	return s.memStore.WaitingRun(ctx, key)
}

// TestNewRequestReadsTheWaitingRunOnce: a message in a conversation
// where no run waits looks for a waiting run once (message), not again
// as its run starts; one that comes while a question waits still drops
// the question and starts a run of its own.
func TestNewRequestReadsTheWaitingRunOnce(t *testing.T) {
	ag := &mockAgent{}
	st := &waitingCounter{memStore: newMemStore()}
	b := New(st, ag, Config{Workers: 1, AllowedUsers: []string{"telegram:42", "telegram:43"}})
	plat := newTelegram()
	b.AddPlatform(plat)
	ctx, cancel := context.WithCancel(t.Context())
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(); cancel() })
	h := &harness{bot: b, store: st.memStore, agent: ag, plat: plat}

	h.handle(t, msg("what's due today?", "e1"))
	h.idle(t)
	if got := joined(ag.startedList()); got != "what's due today?" {
		t.Fatalf("runs = %s", got)
	}
	if n := st.reads.Load(); n != 1 {
		t.Errorf("the waiting run was read %d times for a new request, want 1", n)
	}

	ag.mu.Lock()
	ag.StartFn = asking("Work", "Home")
	ag.mu.Unlock()
	h.handle(t, msg("file the dentist task", "e2"))
	h.idle(t)
	asked, err := st.memStore.WaitingRun(t.Context(), msg("", "").ThreadKey())
	if err != nil || asked == nil {
		t.Fatalf("the run asking: %+v, %v", asked, err)
	}
	other := msg("what's due tomorrow?", "e3")
	other.UserID = "43" // someone else in the chat: a new request
	h.handle(t, other)
	h.idle(t)
	if got, err := st.Run(t.Context(), asked.ID); err != nil || got.Status != RunCancelled {
		t.Errorf("the question after a new request: %+v, %v", got, err)
	}
}
