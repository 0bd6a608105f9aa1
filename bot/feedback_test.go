package bot

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent"
)

// actions are the buttons of bs other than the feedback pair.
func actions(bs []Button) []Button {
	return slices.DeleteFunc(slices.Clone(bs), func(b Button) bool { return b.Feedback != "" })
}

// TestFeedbackButtons: every answer ends with 👍 and 👎 (a question does
// not); a press by the asker is stored with the run and answered, a
// second press replaces it, someone else's press and a bad button
// change nothing, and /usage counts the ratings.
func TestFeedbackButtons(t *testing.T) {
	h := newEngineHarness(t)
	h.say(t, msg("hello", ""))
	ans := h.tg.last()
	var fb []Button
	for _, b := range ans.Buttons {
		if b.Feedback != "" {
			fb = append(fb, b)
		}
	}
	if len(fb) != 2 || fb[0].Label != "👍" || fb[0].Feedback != FeedbackGood || fb[1].Label != "👎" || fb[1].Feedback != FeedbackBad || len(fb[1].Data) > 64 {
		t.Fatalf("answer buttons %+v, want 👍 and 👎", ans.Buttons)
	}
	runs, _ := h.store.ThreadRuns(t.Context(), msg("", "").ThreadKey())
	if len(runs) != 1 {
		t.Fatalf("runs %d", len(runs))
	}
	id := runs[0].ID
	press := func(user string, data, ref string) {
		h.say(t, Incoming{Platform: "telegram", ChatID: "c1", UserID: user, DM: true, Button: data, ButtonRef: ref, MessageID: "m1"})
	}
	rating := func() string {
		r, err := h.store.Run(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Feedback == nil {
			return ""
		}
		return r.Feedback.Rating
	}
	press("43", fb[1].Data, "cb0") // not the asker
	press("42", "f:"+id+":x", "cb1")
	if got := rating(); got != "" {
		t.Errorf("rating %q after someone else's press and a bad button", got)
	}
	press("42", fb[1].Data, "cb2")
	if got := rating(); got != FeedbackBad {
		t.Errorf("rating %q, want bad", got)
	}
	press("42", fb[0].Data, "cb3")
	if got := rating(); got != FeedbackGood {
		t.Errorf("rating %q after a second press, want good", got)
	}
	h.tg.mu.Lock()
	answered := strings.Join(h.tg.answered, "\n")
	h.tg.mu.Unlock()
	for _, want := range []string{"cb0: Only the person who asked", "cb1: I don't know that button.", "cb2: Thanks; noted 👎", "cb3: Thanks! Noted 👍"} {
		if !strings.Contains(answered, want) {
			t.Errorf("press answers %q lack %q", answered, want)
		}
	}
	h.say(t, Incoming{Platform: "telegram", ChatID: "c1", UserID: "42", DM: true, Command: "usage"})
	if got := h.tg.last().Text; !strings.Contains(got, "You rated 1 answer: 1 👍, 0 👎.") {
		t.Errorf("/usage = %q", got)
	}
	// A question has no feedback buttons.
	h.say(t, msg("delete the old lists", ""))
	if q := h.tg.last(); !q.Question || len(actions(q.Buttons)) != len(q.Buttons) {
		t.Errorf("question %+v has feedback buttons", q)
	}
}

// A 👎 pressed while /undo reverts the run is kept: the undo's save of
// the run does not write over it.
func TestFeedbackDuringUndoKept(t *testing.T) {
	var h *harness
	ag := &mockAgent{
		StartFn: func(_ context.Context, in agent.Input, _ agent.Hooks) agent.Outcome {
			tr := newTranscript(in)
			tr.Journal = []agent.Applied{{Write: agent.Write{Kind: agent.CloseTask, ID: "t1"}, Inverse: []agent.Write{{Kind: agent.ReopenTask, ID: "t1"}}, Summary: "completed t1"}}
			return done(tr, "Completed it.")
		},
	}
	h = newHarness(t, ag)
	h.handle(t, msg("complete t1", "e1"))
	h.idle(t)
	runs, _ := h.store.ThreadRuns(t.Context(), msg("", "").ThreadKey())
	id := runs[0].ID
	ag.mu.Lock()
	ag.UndoFn = func(ctx context.Context, _ []agent.Applied) (agent.UndoReport, error) {
		if err := h.bot.Handle(ctx, Incoming{Platform: "telegram", ChatID: "c1", UserID: "42", DM: true, Button: "f:" + id + ":b", ButtonRef: "cb", EventID: "press"}); err != nil {
			t.Error(err)
		}
		return agent.UndoReport{Undone: []string{"reopened t1"}}, nil
	}
	ag.mu.Unlock()
	h.handle(t, Incoming{Platform: "telegram", ChatID: "c1", UserID: "42", DM: true, Command: "undo", EventID: "e2"})
	h.idle(t)
	r, err := h.store.Run(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Undone || r.Feedback == nil || r.Feedback.Rating != FeedbackBad {
		t.Errorf("run undone %v, feedback %+v: want undone and rated 👎", r.Undone, r.Feedback)
	}
}
