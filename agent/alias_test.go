package agent_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// TestAliasesSurviveResume: the model sees short aliases, not Todoist's
// 16-character ids; an alias given before a wait for the user still
// names the same task after the transcript is saved, decoded and resumed
// by a new engine (a restart); an alias the run never gave is an
// observation the model can repair.
func TestAliasesSurviveResume(t *testing.T) {
	e := newE2E(t, nil)
	tasks := e.todo.SeedInbox(3, 1)
	work := e.todo.AddProject(todoisttest.Project{Name: "Work"})
	var (
		taskRef string // what the listing called tasks[1]
		workRef string
	)
	ref := func(msgs []agent.Message, quoted string) string {
		// A project line quotes its name; the compact inbox listing
		// shows a task's content bare.
		re := regexp.MustCompile(`(?m)^(?:- (\S+) ` + regexp.QuoteMeta(fmt.Sprintf("%q", quoted)) + `|(\S+) ` + regexp.QuoteMeta(quoted) + `$)`)
		for _, m := range msgs {
			if s := re.FindStringSubmatch(m.Content); s != nil {
				return s[1] + s[2]
			}
		}
		return ""
	}
	e.model.next = newModel(t, steps(func(step int, req agent.Request) agent.Response {
		switch step {
		case 1:
			return toolReply(tc(agent.ActGetInboxTasks, `{}`), tc(agent.ActGetProjects, `{}`))
		case 2:
			taskRef, workRef = ref(req.Messages, tasks[1].Content), ref(req.Messages, "Work")
			return toolReply(tc(agent.ActAskUser, `{"question":"Which one goes to Work?"}`))
		case 3:
			return toolReply(tc(agent.ActMoveTasks, fmt.Sprintf(`{"moves":[{"task_id":%q,"project_id":%q},{"task_id":"t99","project_id":%q}]}`, taskRef, workRef, workRef)))
		}
		return toolReply(tc(agent.ActFinalAnswer, `{"answer":"Moved it."}`))
	}))
	out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "file " + tasks[1].Content + " under Work"}, agent.Hooks{})
	if out.Status != agent.StatusAsking {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if len(taskRef) > 4 || len(workRef) > 4 || taskRef == "" || workRef == "" {
		t.Fatalf("the listings named the task %q and the project %q: want short aliases", taskRef, workRef)
	}
	tr := restarted(t, out.Transcript)
	out = agent.New(e.model, e.tasks, agent.Config{}).Resume(t.Context(), tr, "the second", agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("resumed: outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if got, _ := e.todo.Task(tasks[1].ID); got.ProjectID != work.ID {
		t.Errorf("%s is in project %s, want Work (%s)", taskRef, got.ProjectID, work.ID)
	}
	obs := e.model.lastMessage(3)
	if !strings.Contains(obs, "Moved "+taskRef+" ") || !strings.Contains(obs, "t99") {
		t.Errorf("move observation:\n%s", obs)
	}
	for i, req := range e.model.reqs {
		for _, m := range req.Messages {
			for _, task := range tasks {
				if strings.Contains(m.Content, task.ID) {
					t.Errorf("call %d shows the model the raw id %s:\n%s", i, task.ID, m.Content)
				}
			}
		}
	}
}

// TestAliasesSurviveACrash: an inbox tidy crashes right after its first
// write reached Todoist (the response lost, the process gone); resumed
// from the last saved transcript by a new engine, the write is not
// applied twice, the inbox read again names the remaining tasks by the
// aliases the model saw before the crash, and the model's next moves by
// those aliases reach the right tasks.
func TestAliasesSurviveACrash(t *testing.T) {
	e := newE2E(t, nil)
	tasks := e.todo.SeedInbox(4, 2)
	var (
		before   string // the first prompt's inbox listing
		afterObs string // the inbox read after the resume
	)
	e.model.next = newModel(t, steps(func(step int, req agent.Request) agent.Response {
		last := req.Messages[len(req.Messages)-1].Content
		switch step {
		case 1:
			before = last
			return toolReply(tc(agent.ActMoveTasks, `{"groups":[{"task_ids":["t1","t3"],"project_name":"A"}]}`), tc(agent.ActGetInboxTasks, `{}`))
		case 2:
			afterObs = last
			return toolReply(tc(agent.ActMoveTasks, `{"groups":[{"task_ids":["t2","t4"],"project_name":"B"}]}`), tc(agent.ActFinalAnswer, `{"answer":"Filed four."}`))
		}
		return toolReply(tc(agent.ActFailTask, `{"reason":"out of script"}`))
	}))
	ctx, crashing, lossy := crashingTasks(t, e)
	var saved []byte
	out := agent.New(e.model, crashing, agent.Config{}).Start(ctx, agent.Input{Instruction: "Tidy my inbox", Overview: true}, agent.Hooks{Save: func(_ context.Context, tr *agent.Transcript) error {
		saved, _ = agent.MarshalTranscript(tr)
		return nil
	}})
	if out.Status != agent.StatusInterrupted || !lossy.tripped {
		t.Fatalf("outcome %s (tripped %v)", out.Status, lossy.tripped)
	}
	for i, task := range tasks {
		if want := fmt.Sprintf("\nt%d %s", i+1, task.Content); !strings.Contains(before, want) {
			t.Fatalf("the first prompt does not list %q:\n%s", want, before)
		}
	}
	applied := e.todo.AppliedCommands()
	tr, err := agent.UnmarshalTranscript(saved)
	if err != nil {
		t.Fatal(err)
	}
	out = agent.New(e.model, e.tasks, agent.Config{}).Resume(t.Context(), tr, "", agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("resumed: outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if want := fmt.Sprintf("Inbox tasks (2):\nt2 %s\nt4 %s", tasks[1].Content, tasks[3].Content); afterObs != want {
		t.Errorf("the inbox after the resume reads\n%s\nwant\n%s", afterObs, want)
	}
	if got := e.todo.AppliedCommands(); got != applied+3 {
		t.Errorf("%d commands applied after the resume, want %d (the project and two moves): a write was applied twice", got-applied, 3)
	}
	where := e.where()
	if a, b := where["A"], where["B"]; len(a) != 2 || len(b) != 2 || a[0] != tasks[0].Content || a[1] != tasks[2].Content || b[0] != tasks[1].Content || b[1] != tasks[3].Content {
		t.Errorf("after the tidy: %v", where)
	}
}
