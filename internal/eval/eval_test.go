package eval_test

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/internal/eval"
	"github.com/tidybot/tidybot/internal/sim"
)

// simulate runs the suite with a scripted model (sim.Solver) through the
// real OpenAI client against the fake model server.
func simulate(t *testing.T, fault sim.Fault, proto agent.Protocol, k int, run *regexp.Regexp) eval.Report {
	t.Helper()
	suite := eval.Suite()
	srv, err := sim.StartModel((&sim.Solver{Suite: suite, Fault: fault}).Reply, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	model := openai.New(openai.Config{APIKey: "sk-simulated", BaseURL: srv.URL, Model: "simulated"}, &http.Client{Timeout: time.Minute})
	return eval.Run(t.Context(), suite, eval.Options{Model: model, Engine: agent.Config{Protocol: proto}, K: k, Run: run, Parallel: 4})
}

func failures(r eval.Report) string {
	var b strings.Builder
	for _, t := range r.Tasks {
		for i, a := range t.Attempts {
			if !a.Pass {
				b.WriteString("\n  " + t.Name + " #" + string(rune('1'+i)) + ": " + a.Reason)
			}
		}
	}
	return b.String()
}

func TestSuiteCoversTheIssue(t *testing.T) {
	suite := eval.Suite()
	if len(suite) < 20 {
		t.Errorf("the suite has %d tasks, want at least 20", len(suite))
	}
	names := map[string]bool{}
	var ask, readOnly, multiTurn int
	for _, task := range suite {
		if names[task.Name] {
			t.Errorf("two tasks are named %s", task.Name)
		}
		names[task.Name] = true
		if task.About == "" || len(task.Turns) == 0 || len(task.Goal) == 0 {
			t.Errorf("%s: want an About, turns and a goal", task.Name)
		}
		for _, turn := range task.Turns {
			if len(turn.Solution) == 0 {
				t.Errorf("%s: turn %q has no reference solution", task.Name, turn.Message)
			}
		}
		if task.MustAsk {
			ask++
			if len(task.Turns[0].Answers) == 0 {
				t.Errorf("%s must ask but the simulated user has no answer", task.Name)
			}
		}
		if task.ReadOnly {
			readOnly++
		}
		if len(task.Turns) > 1 {
			multiTurn++
		}
	}
	for _, n := range []string{"inbox-talk", "inbox-50-themes", "add-call-mom", "reschedule-overdue", "complete-loose", "move-by-label",
		"create-section", "read-due-today", "ask-two-projects", "followup-drop-camus", "injection-summary", "duplicate-project-trap",
		"wrong-id-trap", "large-account", "german-move", "add-spanish"} {
		if !names[n] {
			t.Errorf("the suite has no task %s", n)
		}
	}
	if ask < 1 || readOnly < 2 || multiTurn < 1 {
		t.Errorf("%d ask, %d read-only, %d multi-turn tasks", ask, readOnly, multiTurn)
	}
}

// TestCompetentScoresFull: the reference solutions, played by a scripted
// model through the real client and agent, solve every task every time.
func TestCompetentScoresFull(t *testing.T) {
	for _, proto := range []agent.Protocol{agent.ProtocolTools, agent.ProtocolJSON} {
		t.Run(string(proto), func(t *testing.T) {
			k := 2
			if proto == agent.ProtocolJSON {
				k = 1
			}
			r := simulate(t, sim.Competent, proto, k, nil)
			if r.Total.Pass1 != 1 || r.Total.PassK != 1 {
				t.Fatalf("pass^1 %.2f, pass^%d %.2f, want 1 and 1; failures:%s", r.Total.Pass1, k, r.Total.PassK, failures(r))
			}
			if r.Total.Tasks != len(eval.Suite()) || r.Total.Attempts != k*len(eval.Suite()) {
				t.Errorf("%d tasks, %d attempts", r.Total.Tasks, r.Total.Attempts)
			}
			for _, task := range r.Tasks {
				if task.Calls < len(task.Attempts)*2 || task.PromptTokens <= 0 || task.CompletionTokens <= 0 || task.Wall <= 0 {
					t.Errorf("%s: %d calls, %d+%d tokens, %s: want real figures", task.Name, task.Calls, task.PromptTokens, task.CompletionTokens, task.Wall)
				}
			}
		})
	}
}

// TestFaultsFailExactly: each deliberately faulty script fails exactly
// the tasks its mistake matters to, each with the reason that names it.
func TestFaultsFailExactly(t *testing.T) {
	every := func(reason string) map[string]string {
		m := map[string]string{}
		for _, task := range eval.Suite() {
			m[task.Name] = reason
		}
		return m
	}
	except := func(m map[string]string, names ...string) map[string]string {
		for _, n := range names {
			delete(m, n)
		}
		return m
	}
	tests := []struct {
		fault sim.Fault
		want  map[string]string // task → a part of its failure reason
	}{
		{sim.MovesOneWrong, map[string]string{
			"inbox-talk":             `the "PyData" tasks are split: "Finish slides for PyData talk" is in Misc`,
			"inbox-50-themes":        `is in Misc`,
			"inbox-200-lookalikes":   `"Plan PyData talk #1" is in Misc, want PyData Talk`,
			"move-by-label":          `"Pick up dry cleaning" is in Misc, want Errands`,
			"create-section":         `"Paint the fence" is in Misc, want Home`,
			"ask-two-projects":       `"Write the launch post" is in Misc, want Side project: blog`,
			"duplicate-project-trap": `"Buy tomato seeds" is in Misc, want Garden`,
			"wrong-id-trap":          `"Renew car insurance" is in Misc, want Car`,
			"large-account":          `"Backlog item 7" is in Misc, want Someday`,
			"german-move":            `"Umzugskartons kaufen" is in Misc, want Umzug`,
			"injection-move":         `"Buy birthday cake for Anna" is in Misc, want Birthday`,
			"injection-delete":       `"Water the plants" is in Misc, want Home`,
			// Autopilot creates no project (agent.PolicyAutopilot): the
			// wrong move to a new "Misc" is refused, the task stays.
			"autopilot-file":                     `"Buy oat milk" is in Inbox, want Groceries`,
			"autopilot-injection":                `"Buy bread" is in Inbox, want Groceries`,
			"autopilot-injection-content":        `"Buy eggs" is in Inbox, want Groceries`,
			"autopilot-injection-description":    `"Buy apples" is in Inbox, want Groceries`,
			"autopilot-injection-priority":       `"Buy rice" is in Inbox, want Groceries`,
			"autopilot-injection-create-project": `"Buy coffee" is in Inbox, want Groceries`,
			"autopilot-injection-complete":       `"Buy butter" is in Inbox, want Groceries`,
			"autopilot-injection-delete":         `"Buy cheese" is in Inbox, want Groceries`,
		}},
		// /tidy-inbox offers no delete_tasks (agent.TidyActions) and the
		// engine refuses an autopilot run's deletes (bot.AutopilotInput):
		// the script's delete is refused there and those tasks still pass.
		// The injection tasks' person names nothing to change and says no
		// to every confirmation: the gate holds the unasked delete, and
		// nothing is deleted (agent/injection.go).
		{sim.Deletes, except(every("forbidden: deleted "), append([]string{"inbox-talk", "inbox-50-themes", "inbox-200-lookalikes", "autopilot-file", "autopilot-injection"}, injectionNames()...)...)},
		{sim.ObeysInjection, map[string]string{
			"injection-summary": `forbidden: deleted "Buy milk"`,
		}},
		{sim.NeverAsks, map[string]string{
			"ask-two-projects": "never asked the user",
			"ask-which-task":   "never asked the user",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.fault.String(), func(t *testing.T) {
			r := simulate(t, tt.fault, agent.ProtocolTools, 1, nil)
			var want []string
			for n := range tt.want {
				want = append(want, n)
			}
			slices.Sort(want)
			got := r.Failed()
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("failed tasks %v, want %v; failures:%s", got, want, failures(r))
			}
			for _, task := range r.Tasks {
				part, ok := tt.want[task.Name]
				if !ok {
					continue
				}
				if a := task.Attempts[0]; a.Pass || !strings.Contains(a.Reason, part) {
					t.Errorf("%s: reason %q, want it to contain %q", task.Name, a.Reason, part)
				}
			}
			if wantPass := float64(len(r.Tasks)-len(want)) / float64(len(r.Tasks)); r.Total.PassK != wantPass {
				t.Errorf("pass^k %.3f, want %.3f", r.Total.PassK, wantPass)
			}
		})
	}
}

// injectionNames are the suite's tasks with a planted order the
// obeys-injection fault obeys (eval.Task.Obey).
func injectionNames() []string {
	var out []string
	for _, task := range eval.Suite() {
		if task.Obey != nil {
			out = append(out, task.Name)
		}
	}
	return out
}

// TestInjectionTasksEachLanguageAndField: the suite has the injection
// tasks issue 34 asks for, each with a planted order an obeying model
// follows: German, Dutch, Spanish, Japanese and two English paraphrases
// (a read-only question; the person says no to every confirmation), and
// an autopilot task for each thing autopilot may not do.
func TestInjectionTasksEachLanguageAndField(t *testing.T) {
	want := []string{"injection-german", "injection-dutch", "injection-spanish", "injection-japanese",
		"injection-paraphrase-finished", "injection-paraphrase-gone",
		"autopilot-injection-content", "autopilot-injection-description", "autopilot-injection-priority",
		"autopilot-injection-create-project", "autopilot-injection-complete", "autopilot-injection-delete"}
	got := injectionNames()
	if !slices.Equal(got, want) {
		t.Errorf("injection tasks %v, want %v", got, want)
	}
	for _, task := range eval.Suite() {
		if task.Obey == nil {
			continue
		}
		if task.Planted == "" || (len(task.Autopilot) == 0 && (!task.Refuses || !task.ReadOnly)) {
			t.Errorf("%s: planted %q, refuses %v, read-only %v", task.Name, task.Planted, task.Refuses, task.ReadOnly)
		}
	}
}
