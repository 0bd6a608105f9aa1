package agent_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// move_tasks' grouped form names each destination once: one group to a
// project by id, one to a new project by name, beside a single move. Each
// task is moved, named in the observation and journaled with its own
// inverse, through the real client, and undo puts every one back.
func TestGroupedMovesAreMovedJournaledAndUndone(t *testing.T) {
	e := newE2E(t, nil)
	tasks := e.todo.SeedInbox(6, 3)
	work := e.todo.AddProject(todoisttest.Project{Name: "Work"})
	args := fmt.Sprintf(`{"moves":[{"task_id":%q,"project_id":%q}],"groups":[{"task_ids":[%q,%q],"project_id":%q},{"task_ids":[%q,%q,%q],"project_name":"Garden"}]}`,
		tasks[0].ID, work.ID, tasks[1].ID, tasks[2].ID, work.ID, tasks[3].ID, tasks[4].ID, tasks[5].ID)
	e.model.next = newModel(t, replies(
		toolReply(tc(agent.ActMoveTasks, args), tc(agent.ActFinalAnswer, `{"answer":"Filed six."}`)),
	))
	eng := agent.New(e.model, e.tasks, agent.Config{})
	out := eng.Start(t.Context(), agent.Input{Instruction: "file the PyData talk, birthday party and personal website tasks"}, agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	where := e.where()
	if len(where["Work"]) != 3 || len(where["Garden"]) != 3 || len(where["Inbox"]) != 0 {
		t.Fatalf("after the moves: %v", where)
	}
	// The project and six moves, each with its inverse.
	if got := len(out.Transcript.Journal); got != 7 {
		t.Errorf("journal has %d entries, want 7", got)
	}
	for _, a := range out.Transcript.Journal {
		if a.Write.Kind == agent.MoveTask && len(a.Inverse) != 1 {
			t.Errorf("%s has %d inverse writes, want 1", a.Summary, len(a.Inverse))
		}
	}
	if got := e.todo.Requests("/sync"); got != 1 {
		t.Errorf("%d /sync requests, want 1 (one batch)", got)
	}
	rep, err := eng.Undo(t.Context(), out.Transcript.Journal)
	if err != nil || len(rep.NotUndone) > 0 {
		t.Fatalf("undo: %v, not undone %v", err, rep.NotUndone)
	}
	if where := e.where(); len(where["Inbox"]) != 6 || len(e.todo.Projects()) != 2 {
		t.Errorf("after undo: %v, %d projects", where, len(e.todo.Projects()))
	}
}

// A move_tasks with neither moves nor groups, or a group with no task,
// is answered with what to give; nothing is written and the model can
// repair it.
func TestMoveTasksWithoutTasksIsRepaired(t *testing.T) {
	for name, args := range map[string]string{
		"empty":       `{}`,
		"empty lists": `{"moves":[],"groups":[]}`,
		"null":        `{"moves":null,"groups":null}`,
	} {
		t.Run(name, func(t *testing.T) {
			e := newE2E(t, nil)
			e.todo.SeedInbox(1, 1)
			e.model.next = newModel(t, replies(
				toolReply(tc(agent.ActMoveTasks, args)),
				toolReply(tc(agent.ActFinalAnswer, `{"answer":"Nothing to move."}`)),
			))
			out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "file it"}, agent.Hooks{})
			if out.Status != agent.StatusDone {
				t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
			}
			if obs := e.model.lastMessage(1); !strings.Contains(obs, "give moves, or groups with task_ids") {
				t.Errorf("observation %q", obs)
			}
			if got := e.todo.Requests("/sync"); got != 0 {
				t.Errorf("%d /sync requests, want none", got)
			}
		})
	}
	// A group without tasks breaks the schema (minItems): a repair prompt.
	e := newE2E(t, nil)
	e.model.next = newModel(t, replies(
		toolReply(tc(agent.ActMoveTasks, `{"groups":[{"task_ids":[],"project_name":"Garden"}]}`)),
		toolReply(tc(agent.ActFinalAnswer, `{"answer":"Nothing to move."}`)),
	))
	out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "file it"}, agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if obs := e.model.lastMessage(1); !strings.Contains(obs, "task_ids") {
		t.Errorf("repair prompt %q", obs)
	}
}

// An inbox tidy (Input.Overview) offers the model only TidyActions, and
// still after a restart: a delete it asks for anyway (an order planted in
// a task) is refused with the valid actions, and nothing is deleted.
func TestTidyOffersOnlyTidyActions(t *testing.T) {
	e := newE2E(t, nil)
	tasks := e.todo.SeedInbox(2, 1)
	e.model.next = newModel(t, replies(
		toolReply(tc(agent.ActAskUser, `{"question":"Which project?"}`)),
		toolReply(tc(agent.ActDeleteTasks, fmt.Sprintf(`{"task_ids":[%q]}`, tasks[0].ID))),
		toolReply(tc(agent.ActFinalAnswer, `{"answer":"Left as it is."}`)),
	))
	eng := agent.New(e.model, e.tasks, agent.Config{})
	out := eng.Start(t.Context(), agent.Input{Instruction: "Tidy my inbox", Overview: true}, agent.Hooks{})
	if out.Status != agent.StatusAsking {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	b, _ := agent.MarshalTranscript(out.Transcript)
	tr, err := agent.UnmarshalTranscript(b)
	if err != nil {
		t.Fatal(err)
	}
	out = agent.New(e.model, e.tasks, agent.Config{}).Resume(t.Context(), tr, "none", agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("resumed: outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	for i, req := range e.model.reqs {
		var names []string
		for _, tool := range req.Tools {
			names = append(names, tool.Name)
		}
		if strings.Join(names, ",") != strings.Join(agent.TidyActions, ",") {
			t.Errorf("call %d offered %v, want %v", i, names, agent.TidyActions)
		}
	}
	if obs := e.model.lastMessage(2); !strings.Contains(obs, "delete_tasks cannot be run in this request. Valid actions: get_overview,") {
		t.Errorf("observation %q", obs)
	}
	if got := len(e.todo.TasksIn(e.todo.InboxID())); got != 2 {
		t.Errorf("%d tasks in the inbox, want 2", got)
	}
	// Any other request offers every action.
	e.model.reqs = nil
	e.model.next = newModel(t, replies(toolReply(tc(agent.ActFinalAnswer, `{"answer":"Hi."}`))))
	eng.Start(t.Context(), agent.Input{Instruction: "hello"}, agent.Hooks{})
	if got := len(e.model.reqs[0].Tools); got != len(agent.ActionNames()) {
		t.Errorf("a chat request offered %d tools, want %d", got, len(agent.ActionNames()))
	}
}
