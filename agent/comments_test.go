package agent_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// TestAddComments: add_comments puts every comment of the call on its
// task in one /sync request, reports each new comment's id (an unknown
// task is named, and nothing is sent for it), says so in the progress
// line, and undo deletes the comments.
func TestAddComments(t *testing.T) {
	e := newE2E(t, nil)
	cake := e.todo.AddTask(todoisttest.Task{Content: "Buy cake"})
	mum := e.todo.AddTask(todoisttest.Task{Content: "Call mum"})
	args := fmt.Sprintf(`{"comments":[{"task_id":%q,"content":"chocolate, not lemon"},{"task_id":%q,"content":"on Sunday"},{"task_id":"nope","content":"x"}]}`, cake.ID, mum.ID)
	var obs string
	e.model.next = newModel(t, func(req agent.Request) agent.Response {
		last := req.Messages[len(req.Messages)-1].Content
		switch {
		case strings.Contains(last, "Commented on"):
			obs = last
			return toolReply(tc(agent.ActFinalAnswer, `{"answer":"done"}`))
		case strings.Contains(last, "Buy cake"):
			return toolReply(tc(agent.ActAddComments, args))
		}
		return toolReply(tc(agent.ActGetInboxTasks, `{}`))
	})
	var progress []string
	eng := agent.New(e.model, e.tasks, agent.Config{})
	e.todo.ResetCounters()
	out := eng.Start(t.Context(), agent.Input{Instruction: "note the flavour on the cake and the day to call mum"},
		agent.Hooks{Observe: func(ev agent.Event) {
			if ev.Action == agent.ActAddComments {
				progress = append(progress, ev.Summary)
			}
		}})
	if out.Status != agent.StatusDone {
		t.Fatalf("outcome %s %q", out.Status, out.Answer)
	}
	onCake, onMum := e.todo.Comments(cake.ID), e.todo.Comments(mum.ID)
	if len(onCake) != 1 || onCake[0].Content != "chocolate, not lemon" || len(onMum) != 1 || onMum[0].Content != "on Sunday" {
		t.Fatalf("comments: cake %+v, mum %+v", onCake, onMum)
	}
	// The model sees the task by its short alias (t1, t2…), not its id.
	if re := regexp.MustCompile(fmt.Sprintf(`✓ Commented on t\d+ %q: comment id %s`, "Buy cake", regexp.QuoteMeta(onCake[0].ID))); !re.MatchString(obs) {
		t.Errorf("observation %q lacks the comment on the cake", obs)
	}
	for _, want := range []string{"✗ nope: no task with id nope", "1 of 3 failed"} {
		if !strings.Contains(obs, want) {
			t.Errorf("observation %q lacks %q", obs, want)
		}
	}
	if len(progress) != 1 || progress[0] != "💬 Added 2 comments · ⚠️ 1 failed" {
		t.Errorf("progress %q", progress)
	}
	// The inbox read (through /sync) and one /sync for both comments.
	if got := e.todo.SyncRequests(); got != 2 {
		t.Errorf("%d /sync requests, want 2", got)
	}
	rep, err := eng.Undo(t.Context(), out.Transcript.Journal)
	if err != nil || len(rep.NotUndone) > 0 || len(rep.Undone) != 2 {
		t.Fatalf("undo: %v, %+v", err, rep)
	}
	if left := e.todo.Comments(""); len(left) != 0 {
		t.Errorf("comments after undo: %+v", left)
	}
}

// TestAddCommentsAsksUnderWritesPolicy: add_comments is a write like any
// other: under ConfirmWrites it waits for a yes naming the tasks.
func TestAddCommentsAsksUnderWritesPolicy(t *testing.T) {
	e := newE2E(t, nil)
	cake := e.todo.AddTask(todoisttest.Task{Content: "Buy cake"})
	e.model.next = newModel(t, func(agent.Request) agent.Response {
		return toolReply(tc(agent.ActAddComments, fmt.Sprintf(`{"comments":[{"task_id":%q,"content":"chocolate"}]}`, cake.ID)))
	})
	eng := agent.New(e.model, e.tasks, agent.Config{Confirm: agent.ConfirmWrites})
	out := eng.Start(t.Context(), agent.Input{Instruction: "note the flavour"}, agent.Hooks{})
	if out.Status != agent.StatusConfirming || out.Label != "Add 1 comment" || !strings.Contains(out.Question, `"Buy cake"`) {
		t.Errorf("outcome %s label %q question %q", out.Status, out.Label, out.Question)
	}
	if n := len(e.todo.Comments("")); n != 0 {
		t.Errorf("%d comments before the yes", n)
	}
}
