package agent_test

import (
	"testing"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// TestPolicyAutopilotFilesWithinItsLimits: what autopilot may do goes
// through against the real client: moves into an existing section and
// an existing project named case-insensitively, a due date and an
// existing label; the model is offered no tool its policy refuses.
func TestPolicyAutopilotFilesWithinItsLimits(t *testing.T) {
	e := newE2E(t, nil)
	home := e.todo.AddProject(todoisttest.Project{Name: "Home"})
	work := e.todo.AddProject(todoisttest.Project{Name: "Work"})
	sec := e.todo.AddSection(todoisttest.Section{ProjectID: work.ID, Name: "Talks"})
	e.todo.AddLabel(todoisttest.Label{Name: "errands"})
	t1 := e.todo.AddTask(todoisttest.Task{Content: "Finish slides"})
	t2 := e.todo.AddTask(todoisttest.Task{Content: "Buy cake"})
	e.model.next = newModel(t, func(req agent.Request) agent.Response {
		return toolReply(
			tc(agent.ActMoveTasks, `{"moves":[{"task_id":"`+t1.ID+`","section_id":"`+sec.ID+`"},{"task_id":"`+t2.ID+`","project_name":"home"}]}`),
			tc(agent.ActUpdateTasks, `{"updates":[{"task_id":"`+t2.ID+`","due_string":"tomorrow","labels":["errands"]}]}`),
			tc(agent.ActFinalAnswer, `{"answer":"none left"}`),
		)
	})
	eng := agent.New(e.model, e.tasks, agent.Config{})
	out := eng.Start(t.Context(), agent.Input{Instruction: "file them", Overview: true, Touch: []string{t1.ID, t2.ID}, Policy: agent.PolicyAutopilot}, agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("status %s (%s), want done", out.Status, out.Answer)
	}
	got1, _ := e.todo.Task(t1.ID)
	got2, _ := e.todo.Task(t2.ID)
	if got1.SectionID != sec.ID {
		t.Errorf("t1 in section %q, want %s", got1.SectionID, sec.ID)
	}
	if got2.ProjectID != home.ID || got2.Due == nil || len(got2.Labels) != 1 {
		t.Errorf("t2 %+v, want in Home, due, labelled", got2)
	}
	for _, tl := range e.model.reqs[0].Tools {
		if !agent.PolicyOf(agent.PolicyAutopilot).Allows(tl.Name) {
			t.Errorf("tool %s offered to autopilot", tl.Name)
		}
	}
}
