package agent_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// listing reads the compact inbox listing from the last message: the
// alias and content of each task, in order.
func listing(t *testing.T, req agent.Request) (refs, contents []string) {
	t.Helper()
	last := req.Messages[len(req.Messages)-1].Content
	i := strings.Index(last, "Inbox tasks (")
	if i < 0 {
		t.Fatalf("no inbox listing in:\n%s", last)
	}
	for _, line := range strings.Split(last[i:], "\n")[1:] {
		ref, content, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "- ") {
			break
		}
		refs, contents = append(refs, ref), append(contents, content)
	}
	return refs, contents
}

// planFor writes a plan for contents: digit(content) each, a space after
// every ten.
func planFor(contents []string, digit func(string) byte) string {
	digits := make([]byte, len(contents))
	for i, c := range contents {
		digits[i] = digit(c)
	}
	return agent.FilingPlan(digits)
}

// TestFilingPlanFilesTheListing: move_tasks' filing form (a digit per
// listed task) files a 25-task inbox into an existing project named by
// its alias and a new one named by name, leaves the tasks marked 0, and
// journals one move per task with its inverse; the final answer left to
// the engine says exactly what was done; undo puts every task back. All
// through the real client against the fake Todoist, in one write
// request.
func TestFilingPlanFilesTheListing(t *testing.T) {
	e := newE2E(t, nil)
	e.todo.SeedInbox(25, 5)
	e.todo.AddProject(todoisttest.Project{Name: "Work"})
	digit := func(content string) byte {
		switch {
		case strings.Contains(content, todoisttest.GroupKeyword(0)):
			return '1'
		case strings.Contains(content, todoisttest.GroupKeyword(1)):
			return '2'
		}
		return '0'
	}
	var plan string
	e.model.next = newModel(t, func(req agent.Request) agent.Response {
		_, contents := listing(t, req)
		plan = planFor(contents, digit)
		workRef := regexp.MustCompile(`(?m)^- (\S+) "Work"`).FindStringSubmatch(req.Messages[len(req.Messages)-1].Content)
		if workRef == nil || len(workRef[1]) > 4 {
			t.Fatalf("no short alias for Work in:\n%s", req.Messages[len(req.Messages)-1].Content)
		}
		return toolReply(tc(agent.ActMoveTasks, `{"plan":"`+plan+`","to":["`+workRef[1]+`","Garden"]}`), tc(agent.ActFinalAnswer, `{}`))
	})
	eng := agent.New(e.model, e.tasks, agent.Config{})
	out := eng.Start(t.Context(), agent.Input{Instruction: "Tidy my inbox", Overview: true}, agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if len(plan) != 25+2 {
		t.Fatalf("plan %q: want 25 digits in groups of ten", plan)
	}
	where := e.where()
	if len(where["Work"]) != 5 || len(where["Garden"]) != 5 || len(where["Inbox"]) != 15 {
		t.Fatalf("after the plan: %v", where)
	}
	for _, c := range where["Work"] {
		if !strings.Contains(c, todoisttest.GroupKeyword(0)) {
			t.Errorf("%q went to Work", c)
		}
	}
	if want := "Moved 10 tasks: 5 to Work, 5 to Garden (new)."; out.Answer != want {
		t.Errorf("answer %q, want %q", out.Answer, want)
	}
	if got := len(out.Transcript.Journal); got != 11 {
		t.Errorf("journal has %d entries, want 11 (the project and ten moves)", got)
	}
	if got := e.todo.AppliedCommands(); got != 11 {
		t.Errorf("%d commands applied, want 11", got)
	}
	if rep, err := eng.Undo(t.Context(), out.Transcript.Journal); err != nil || len(rep.NotUndone) > 0 {
		t.Fatalf("undo: %v, not undone %v", err, rep.NotUndone)
	}
	if where := e.where(); len(where["Inbox"]) != 25 {
		t.Errorf("after undo: %v", where)
	}
}

// TestFilingPlanMistakesAreRepaired: a plan that does not fit the
// listing is refused before anything is written, with what is wrong, and
// the final answer of the same reply is not accepted; the model's
// corrected plan then files the inbox.
func TestFilingPlanMistakesAreRepaired(t *testing.T) {
	for name, tt := range map[string]struct {
		args, want string
		overview   bool
	}{
		"a digit short":        {`{"plan":"1111111111 1111","to":["A"]}`, "14 digits for the 15 tasks", true},
		"a group of nine":      {`{"plan":"111111111 111111","to":["A"]}`, "group 1 (t1–t10) has 9 digits", true},
		"a digit beyond to":    {`{"plan":"1111111111 11113","to":["A","B"]}`, "to destination 3", true},
		"not a digit":          {`{"plan":"111111111x 11111","to":["A"]}`, `plan holds 'x'`, true},
		"no destinations":      {`{"plan":"1111111111 11111"}`, "plan and to go together", true},
		"nothing moved":        {`{"plan":"0000000000 00000","to":["A"]}`, "every digit is 0", true},
		"no listing to file":   {`{"plan":"1111111111 11111","to":["A"]}`, "no listing with tasks was shown", false},
		"an empty destination": {`{"plan":"1111111111 11111","to":[" "]}`, "to[0] is empty", true},
	} {
		t.Run(name, func(t *testing.T) {
			e := newE2E(t, nil)
			e.todo.SeedInbox(15, 3)
			e.model.next = newModel(t, replies(
				toolReply(tc(agent.ActMoveTasks, tt.args), tc(agent.ActFinalAnswer, `{}`)),
				toolReply(tc(agent.ActGetInboxTasks, `{}`)),
				toolReply(tc(agent.ActMoveTasks, `{"plan":"1111111111 11111","to":["A"]}`), tc(agent.ActFinalAnswer, `{"answer":"Filed."}`)),
			))
			out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "Tidy my inbox", Overview: tt.overview, Policy: agent.PolicyCommand}, agent.Hooks{})
			if out.Status != agent.StatusDone || out.Answer != "Filed." {
				t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
			}
			second := e.model.reqs[1].Messages
			var obs []string
			for _, m := range second[len(second)-2:] {
				obs = append(obs, m.Content)
			}
			if !strings.Contains(obs[0], tt.want) || !strings.Contains(obs[1], "Not accepted") {
				t.Errorf("observations after the bad plan:\n%s\nwant %q, then the answer refused", strings.Join(obs, "\n"), tt.want)
			}
			if where := e.where(); len(where["A"]) != 15 {
				t.Errorf("after the corrected plan: %v", where)
			}
			if got := e.todo.AppliedCommands(); got != 16 {
				t.Errorf("%d commands applied, want 16 (the project and 15 moves): the bad plan wrote something", got)
			}
		})
	}
}

// TestFilingPlanSurvivesResume: the listing a plan's digits stand for is
// kept with the run, so a plan sent after a wait for the user (the
// transcript saved, decoded and resumed by a new engine, as after a
// restart) files the tasks the model saw listed before the wait.
func TestFilingPlanSurvivesResume(t *testing.T) {
	e := newE2E(t, nil)
	tasks := e.todo.SeedInbox(4, 2)
	e.model.next = newModel(t, steps(func(step int, req agent.Request) agent.Response {
		if step == 1 {
			return toolReply(tc(agent.ActAskUser, `{"question":"Where do the first and third go?"}`))
		}
		return toolReply(tc(agent.ActMoveTasks, `{"plan":"1010","to":["Errands"]}`), tc(agent.ActFinalAnswer, `{}`))
	}))
	out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "Tidy my inbox", Overview: true}, agent.Hooks{})
	if out.Status != agent.StatusAsking {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	tr := restarted(t, out.Transcript)
	// Another task arrives meanwhile: the plan still means the listing.
	e.todo.AddTask(todoisttest.Task{Content: "Arrived later"})
	out = agent.New(e.model, e.tasks, agent.Config{}).Resume(context.Background(), tr, "Errands", agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("resumed: outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	where := e.where()
	if got := where["Errands"]; len(got) != 2 || got[0] != tasks[0].Content || got[1] != tasks[2].Content {
		t.Errorf("Errands holds %v, want the first and third listed", got)
	}
	if want := `moved "` + tasks[2].Content + `" to Errands.`; !strings.HasSuffix(out.Answer, want) {
		t.Errorf("answer %q, want it to end %q", out.Answer, want)
	}
}

// TestReportedAnswerNeedsWrites: a final answer left to the engine when
// the run changed nothing is not accepted (there is nothing to report);
// the model then answers in its own words.
func TestReportedAnswerNeedsWrites(t *testing.T) {
	e := newE2E(t, nil)
	e.model.next = newModel(t, replies(
		toolReply(tc(agent.ActFinalAnswer, `{}`)),
		toolReply(tc(agent.ActFinalAnswer, `{"answer":null}`)),
		toolReply(tc(agent.ActFinalAnswer, `{"answer":"Your inbox is empty."}`)),
	))
	out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "Tidy my inbox"}, agent.Hooks{})
	if out.Status != agent.StatusDone || out.Answer != "Your inbox is empty." {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if obs := e.model.lastMessage(1); !strings.Contains(obs, "nothing was changed") {
		t.Errorf("observation %q", obs)
	}
}

// TestFilingPlanUnknownAliasIsNotAName: a destination written as an
// alias the run never gave ("p9": a slip of the model's count, or an
// alias from another run) is refused before anything is written, as an
// unknown project_id is in moves; it is not taken for the name of a new
// project to file the tasks into.
func TestFilingPlanUnknownAliasIsNotAName(t *testing.T) {
	e := newE2E(t, nil)
	e.todo.SeedInbox(3, 1)
	e.model.next = newModel(t, replies(
		toolReply(tc(agent.ActMoveTasks, `{"plan":"111","to":["p9"]}`), tc(agent.ActFinalAnswer, `{}`)),
		toolReply(tc(agent.ActMoveTasks, `{"plan":"111","to":["Errands"]}`), tc(agent.ActFinalAnswer, `{}`)),
	))
	out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "Tidy my inbox", Overview: true}, agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if _, ok := e.todo.ProjectByName("p9"); ok {
		t.Errorf("a project named p9 was created: %v", e.where())
	}
	if where := e.where(); len(where["Errands"]) != 3 {
		t.Errorf("after the corrected plan: %v", where)
	}
	if len(e.model.reqs) < 2 {
		t.Fatalf("%d model calls: the plan to p9 was not sent back", len(e.model.reqs))
	}
	second := e.model.reqs[1].Messages
	if obs := second[len(second)-2].Content; !strings.Contains(obs, "p9") {
		t.Errorf("observation after the plan to p9: %s", obs)
	}
}

// TestReportedAnswerRefusedIsNotALoop: a model that keeps leaving the
// answer out when nothing was written is stopped as any repetition
// without progress is, not asked again until the step limit.
func TestReportedAnswerRefusedIsNotALoop(t *testing.T) {
	e := newE2E(t, func(agent.Request) agent.Response { return toolReply(tc(agent.ActFinalAnswer, `{}`)) })
	out := agent.New(e.model, e.tasks, agent.Config{MaxSteps: 20}).Start(t.Context(), agent.Input{Instruction: "what's due today?"}, agent.Hooks{})
	if out.Status != agent.StatusStopped || !strings.Contains(out.Answer, "Nothing was changed.") {
		t.Errorf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if e.model.calls > 3 {
		t.Errorf("%d model calls for an answer refused each time, want at most 3", e.model.calls)
	}
}

// plainTasks is the client with snapshots that are not incremental:
// get_inbox_tasks then lists the inbox through the task list.
type plainTasks struct{ *todoist.Client }

func (plainTasks) IncrementalSnapshots() bool { return false }

// TestFilingPlanMeansTheLastListingShown: when one reply lists the
// inbox twice (get_overview and get_inbox_tasks, read concurrently, in
// orders that differ), a plan means the listing the model saw last, the
// later call's, whichever read finished last.
func TestFilingPlanMeansTheLastListingShown(t *testing.T) {
	e := newE2E(t, nil)
	// The overview lists by task order (Gamma, Beta, Alpha), the task
	// list as the tasks were added (Alpha, Beta, Gamma).
	for i, c := range []string{"Alpha", "Beta", "Gamma"} {
		e.todo.AddTask(todoisttest.Task{Content: c, ChildOrder: 3 - i})
	}
	e.todo.SetLatency("/sync", 200*time.Millisecond) // the overview ends last
	e.model.next = newModel(t, steps(func(step int, req agent.Request) agent.Response {
		if step == 1 {
			return toolReply(tc(agent.ActGetOverview, `{}`), tc(agent.ActGetInboxTasks, `{}`))
		}
		_, contents := listing(t, req)
		plan := planFor(contents, func(c string) byte {
			if c == "Alpha" {
				return '1'
			}
			return '0'
		})
		return toolReply(tc(agent.ActMoveTasks, `{"plan":"`+plan+`","to":["Errands"]}`), tc(agent.ActFinalAnswer, `{}`))
	}))
	out := agent.New(e.model, plainTasks{e.tasks}, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "file Alpha into Errands"}, agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if got := e.where()["Errands"]; len(got) != 1 || got[0] != "Alpha" {
		t.Errorf("Errands holds %v, want [Alpha]", got)
	}
}

// TestFilingPlanSentAsTextKeepsTheModelsCall: a tools-protocol reply
// that comes as text is kept in the conversation as the call the model
// made (its plan, its aliases), not as the groups of Todoist ids the
// plan stands for.
func TestFilingPlanSentAsTextKeepsTheModelsCall(t *testing.T) {
	e := newE2E(t, nil)
	tasks := e.todo.SeedInbox(3, 1)
	e.model.next = newModel(t, replies(
		agent.Response{Content: `{"thought":"file","action":{"type":"move_tasks","plan":"110","to":["Errands"]}}`},
		toolReply(tc(agent.ActFinalAnswer, `{}`)),
	))
	out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "Tidy my inbox", Overview: true}, agent.Hooks{})
	if out.Status != agent.StatusDone || len(e.where()["Errands"]) != 2 {
		t.Fatalf("outcome %s %q %v; %v", out.Status, out.Answer, out.Err, e.where())
	}
	msgs := e.model.reqs[1].Messages
	var args string
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if c.Name == agent.ActMoveTasks {
				args = c.Arguments
			}
		}
	}
	if !strings.Contains(args, `"plan":"110"`) || strings.Contains(args, tasks[0].ID) {
		t.Errorf("the move as the conversation keeps it: %s", args)
	}
}

// TestFilingPlanLastGroupAtMostTen: where spaces split a plan, the last
// group holds at most ten digits too: one longer lost a space, and a
// digit dropped and another doubled within it would go unseen.
func TestFilingPlanLastGroupAtMostTen(t *testing.T) {
	e := newE2E(t, nil)
	e.todo.SeedInbox(25, 5)
	e.model.next = newModel(t, replies(
		toolReply(tc(agent.ActMoveTasks, `{"plan":"1111111111 111111111111111","to":["A"]}`), tc(agent.ActFinalAnswer, `{}`)),
		toolReply(tc(agent.ActMoveTasks, `{"plan":"1111111111 1111111111 11111","to":["A"]}`), tc(agent.ActFinalAnswer, `{"answer":"Filed."}`)),
	))
	out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "Tidy my inbox", Overview: true}, agent.Hooks{})
	if out.Status != agent.StatusDone || out.Answer != "Filed." {
		t.Fatalf("outcome %s %q %v: the plan whose last group has 15 digits was taken", out.Status, out.Answer, out.Err)
	}
	second := e.model.reqs[1].Messages
	if obs := second[len(second)-2].Content; !strings.Contains(obs, "group 2") {
		t.Errorf("observation after the bad plan: %s", obs)
	}
}

// TestReportedAnswerInTheRunsLanguage: the engine's report is English,
// so a run told to answer in another language (the person's /settings
// language) does not take an answer left out: the model writes it.
func TestReportedAnswerInTheRunsLanguage(t *testing.T) {
	for _, tt := range []struct {
		lang, want string
	}{
		{"Dutch", "Klaar: 3 taken verplaatst."},
		{"en-GB", `Moved 3 tasks: 3 to Errands (new).`},
	} {
		t.Run(tt.lang, func(t *testing.T) {
			e := newE2E(t, nil)
			e.todo.SeedInbox(3, 1)
			e.model.next = newModel(t, replies(
				toolReply(tc(agent.ActMoveTasks, `{"plan":"111","to":["Errands"]}`), tc(agent.ActFinalAnswer, `{}`)),
				toolReply(tc(agent.ActFinalAnswer, `{"answer":"Klaar: 3 taken verplaatst."}`)),
			))
			out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "Ruim mijn inbox op", Overview: true, Language: tt.lang}, agent.Hooks{})
			if out.Status != agent.StatusDone || out.Answer != tt.want {
				t.Errorf("outcome %s %q %v, want the answer %q", out.Status, out.Answer, out.Err, tt.want)
			}
		})
	}
}

// TestFilingPlanAfterTheInboxListedByGetTasks: get_tasks on the Inbox
// lists the inbox too (in the task list's order, which need not be the
// overview's), so a plan sent after it means that listing, not the
// overview's before it.
func TestFilingPlanAfterTheInboxListedByGetTasks(t *testing.T) {
	e := newE2E(t, nil)
	// The overview lists by task order (Gamma, Beta, Alpha), the task
	// list as the tasks were added (Alpha, Beta, Gamma).
	for i, c := range []string{"Alpha", "Beta", "Gamma"} {
		e.todo.AddTask(todoisttest.Task{Content: c, ChildOrder: 3 - i})
	}
	var shown []string
	e.model.next = newModel(t, func(req agent.Request) agent.Response {
		last := req.Messages[len(req.Messages)-1].Content
		if !strings.HasPrefix(last, "Tasks (") {
			return toolReply(tc(agent.ActGetTasks, `{"project_id":"inbox"}`))
		}
		shown = regexp.MustCompile(`(?m)^- \S+ "(\w+)"`).FindAllString(last, -1)
		var b strings.Builder
		for _, line := range shown {
			if strings.Contains(line, `"Alpha"`) {
				b.WriteByte('1')
			} else {
				b.WriteByte('0')
			}
		}
		return toolReply(tc(agent.ActMoveTasks, `{"plan":"`+b.String()+`","to":["Errands"]}`), tc(agent.ActFinalAnswer, `{}`))
	})
	out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "file Alpha into Errands", Overview: true}, agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if got := e.where()["Errands"]; len(got) != 1 || got[0] != "Alpha" {
		t.Errorf("Errands holds %v, want [Alpha] (get_tasks showed %q)", got, shown)
	}
}

// TestOtherLanguageAsksForTheAnswer: a run answering in another
// language than English is told to write final_answer's answer itself
// (the engine's report is English), and a run in English is not.
func TestOtherLanguageAsksForTheAnswer(t *testing.T) {
	for lang, want := range map[string]bool{"Nederlands": true, "English": false, "en-GB": false} {
		e := newE2E(t, nil)
		e.model.next = newModel(t, replies(toolReply(tc(agent.ActFinalAnswer, `{"answer":"Klaar."}`))))
		out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "hallo", Language: lang}, agent.Hooks{})
		if out.Status != agent.StatusDone {
			t.Fatalf("%s: outcome %s %q %v", lang, out.Status, out.Answer, out.Err)
		}
		asked := false
		for _, m := range e.model.reqs[0].Messages {
			asked = asked || m.Role == agent.RoleSystem && strings.Contains(m.Content, "Always give final_answer's answer")
		}
		if asked != want {
			t.Errorf("%s: told to give the answer: %v, want %v", lang, asked, want)
		}
	}
}
