package agent

import (
	"strings"
	"testing"
)

// TestReadsAreFreshAfterAWait: a task created while the run waited for
// the user is found after the answer, not reported as "no task with id".
func TestReadsAreFreshAfterAWait(t *testing.T) {
	m := newMemTasks()
	m.addTask("t1", "Buy cake")
	s := &script{replies: []Response{
		tool(ActGetOverview, `{}`),
		tool(ActAskUser, `{"question":"Which tasks?"}`),
		tool(ActCompleteTasks, `{"task_ids":["t9"]}`),
		tool(ActFinalAnswer, `{"answer":"Completed."}`),
	}}
	e := New(s, m, Config{Confirm: ConfirmNever})
	out := e.Start(t.Context(), Input{Instruction: "complete the new task"}, Hooks{})
	if out.Status != StatusAsking {
		t.Fatalf("outcome %s %q", out.Status, out.Answer)
	}
	m.mu.Lock()
	m.addTask("t9", "Call the bakery") // created while the run waited
	m.mu.Unlock()
	out = e.Resume(t.Context(), out.Transcript, "the new one, t9", Hooks{})
	if out.Status != StatusDone {
		t.Fatalf("outcome %s %q", out.Status, out.Answer)
	}
	last := s.reqs[len(s.reqs)-1].Messages
	if obs := last[len(last)-1].Content; strings.Contains(obs, "no task with id") {
		t.Errorf("the task created meanwhile was reported unknown: %s", obs)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.tasks["t9"]; ok {
		t.Error("t9 was not completed")
	}
}
