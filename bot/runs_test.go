package bot

import "testing"

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
