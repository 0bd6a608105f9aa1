package agent

import (
	"strings"
	"testing"
)

// TestEngineAllowRefusesOtherActions: a run limited to some actions is
// offered only their tools, and a call of another action (the model
// talked into it by a task's text) runs nothing, even with no
// confirmation asked, nor after a resume from the saved transcript.
func TestEngineAllowRefusesOtherActions(t *testing.T) {
	allow := []string{ActGetOverview, ActMoveTasks, ActUpdateTasks, ActFinalAnswer, ActFailTask}
	for _, forbidden := range []struct{ name, args string }{
		{ActDeleteTasks, `{"task_ids":["t2"]}`},
		{ActCompleteTasks, `{"task_ids":["t2"]}`},
		{ActAddComments, `{"comments":[{"task_id":"t2","content":"@everyone hello"}]}`},
		{ActAskUser, `{"question":"May I delete everything?"}`},
	} {
		t.Run(forbidden.name, func(t *testing.T) {
			m := newTalkTasks()
			before := len(m.tasks)
			s := &script{replies: []Response{
				tool(forbidden.name, forbidden.args),
				tool(ActFinalAnswer, `{"answer":"Filed nothing."}`),
			}}
			e := New(s, m, Config{Confirm: ConfirmNever})
			out := e.Start(t.Context(), Input{Instruction: "file the new tasks", Allow: allow}, Hooks{})
			if out.Status != StatusDone {
				t.Fatalf("status %s (%s), want done", out.Status, out.Answer)
			}
			if len(m.tasks) != before || len(out.Transcript.Journal) != 0 {
				t.Errorf("tasks %d → %d, journal %v: a forbidden action ran", before, len(m.tasks), out.Transcript.Journal)
			}
			for _, tl := range s.reqs[0].Tools {
				if !contains(allow, tl.Name) {
					t.Errorf("tool %s offered", tl.Name)
				}
			}
			if len(s.reqs[0].Tools) != len(allow) {
				t.Errorf("%d tools offered, want %d", len(s.reqs[0].Tools), len(allow))
			}
			if obs := lastObs(s.reqs[1], "c_"+forbidden.name); !strings.Contains(obs, "not allowed") {
				t.Errorf("observation %q, want a refusal", obs)
			}
			// The limit is kept with the transcript: a resumed run keeps it.
			tr := reload(t, out.Transcript)
			if strings.Join(tr.Allow, ",") != strings.Join(allow, ",") {
				t.Errorf("saved allow %v", tr.Allow)
			}
		})
	}
}

// TestEngineAllowEmptyIsEverything: without Allow, every tool is offered.
func TestEngineAllowEmptyIsEverything(t *testing.T) {
	s := &script{replies: []Response{tool(ActFinalAnswer, `{"answer":"ok"}`)}}
	e := New(s, newTalkTasks(), Config{})
	e.Start(t.Context(), Input{Instruction: "hi"}, Hooks{})
	if got, want := len(s.reqs[0].Tools), len(ActionNames()); got != want {
		t.Errorf("%d tools, want %d", got, want)
	}
}

// TestEngineTouchRefusesOtherTasks: a run limited to some tasks cannot
// move another, even one it read.
func TestEngineTouchRefusesOtherTasks(t *testing.T) {
	m := newTalkTasks()
	m.projects = append(m.projects, Project{ID: "home", Name: "Home"})
	s := &script{replies: []Response{
		tool(ActMoveTasks, `{"moves":[{"task_id":"t1","project_id":"home"},{"task_id":"t2","project_id":"home"}]}`),
		tool(ActMoveTasks, `{"moves":[{"task_id":"t2","project_id":"home"}]}`),
		tool(ActFinalAnswer, `{"answer":"Filed."}`),
	}}
	e := New(s, m, Config{})
	out := e.Start(t.Context(), Input{Instruction: "file t2", Touch: []string{"t2"}}, Hooks{})
	if out.Status != StatusDone {
		t.Fatalf("status %s (%s)", out.Status, out.Answer)
	}
	if m.tasks["t1"].ProjectID != "inbox1" {
		t.Errorf("t1 moved to %s; it was outside the run", m.tasks["t1"].ProjectID)
	}
	if m.tasks["t2"].ProjectID != "home" {
		t.Errorf("t2 in %s, want home", m.tasks["t2"].ProjectID)
	}
	if obs := lastObs(s.reqs[1], "c_"+ActMoveTasks); !strings.Contains(obs, "may not be changed") {
		t.Errorf("observation %q", obs)
	}
}
