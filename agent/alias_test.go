package agent_test

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
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
		mu      sync.Mutex
		step    int
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
	e.model.next = newModel(t, func(req agent.Request) agent.Response {
		mu.Lock()
		defer mu.Unlock()
		step++
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
	})
	out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "file the second one under Work"}, agent.Hooks{})
	if out.Status != agent.StatusAsking {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if len(taskRef) > 4 || len(workRef) > 4 || taskRef == "" || workRef == "" {
		t.Fatalf("the listings named the task %q and the project %q: want short aliases", taskRef, workRef)
	}
	b, err := agent.MarshalTranscript(out.Transcript)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := agent.UnmarshalTranscript(b)
	if err != nil {
		t.Fatal(err)
	}
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
