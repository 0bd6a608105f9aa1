package bot

import (
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent"
)

// mover is deleter with two runs that wait for the user: "move the
// packing list back, then ask" moves t2 to the inbox and then asks; "just
// ask" asks at once.
func mover(t modelTurn) (string, any) {
	ask := func() (string, any) {
		return agent.ActAskUser, map[string]any{"question": "Anything else?"}
	}
	switch t.instruction {
	case "move the packing list back, then ask":
		switch len(t.tools) {
		case 0:
			return agent.ActMoveTasks, map[string]any{"moves": []map[string]string{{"task_id": "t2", "project_id": "inbox"}}}
		case 1:
			return ask()
		}
		return agent.ActFinalAnswer, map[string]string{"answer": "Done."}
	case "just ask":
		if len(t.tools) == 0 {
			return ask()
		}
		return agent.ActFinalAnswer, map[string]string{"answer": "Done."}
	}
	return deleter(t)
}

// TestUndoWhileARunWaits: /undo typed while a run waits for an answer
// reverts the latest changes — the waiting run's, which it stops — and
// never silently an older run's.
func TestUndoWhileARunWaits(t *testing.T) {
	undo := func() Incoming {
		in := msg("", "")
		in.Command = "undo"
		return in
	}
	t.Run("the waiting run wrote", func(t *testing.T) {
		h := newEngineHarness(t)
		h.model.fn = mover
		h.say(t, msg("move the lists home", ""))
		h.say(t, msg("move the packing list back, then ask", ""))
		if got := h.tasks.contents(); got != "Old shopping list@home, Old packing list@inbox" {
			t.Fatalf("tasks before /undo = %q", got)
		}
		h.say(t, undo())
		// The waiting run's move is reverted; the run before it is kept.
		if got, want := h.tasks.contents(), "Old shopping list@home, Old packing list@home"; got != want {
			t.Errorf("tasks after /undo = %q, want %q", got, want)
		}
		report := h.tg.last().Text
		if !strings.HasPrefix(report, "↩️ Undid 1 of 1 changes of the run that was waiting for your answer") {
			t.Errorf("report = %q", report)
		}
		if r, _ := h.store.WaitingRun(t.Context(), msg("", "").ThreadKey()); r != nil {
			t.Errorf("run %s still waits after its changes were undone", r.ID)
		}
		// A second /undo reverts the run before it, as usual.
		h.say(t, undo())
		if got, want := h.tasks.contents(), "Old shopping list@inbox, Old packing list@inbox"; got != want {
			t.Errorf("tasks after the second /undo = %q, want %q", got, want)
		}
	})
	t.Run("the waiting run wrote nothing", func(t *testing.T) {
		h := newEngineHarness(t)
		h.model.fn = mover
		h.say(t, msg("move the lists home", ""))
		h.say(t, msg("just ask", ""))
		h.say(t, undo())
		if got, want := h.tasks.contents(), "Old shopping list@inbox, Old packing list@inbox"; got != want {
			t.Errorf("tasks after /undo = %q, want %q", got, want)
		}
		report := h.tg.last().Text
		if !strings.Contains(report, "the run before the one waiting for your answer") {
			t.Errorf("report = %q: it must say that an older run was undone", report)
		}
		if r, _ := h.store.WaitingRun(t.Context(), msg("", "").ThreadKey()); r == nil {
			t.Error("the question was dropped; it should stay open")
		}
	})
}
