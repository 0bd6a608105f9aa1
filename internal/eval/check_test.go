package eval

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

func TestPredicates(t *testing.T) {
	auckland, err := time.LoadLocation("Pacific/Auckland")
	if err != nil {
		t.Fatal(err)
	}
	inbox := todoisttest.Project{ID: "in", Name: "Inbox", IsInbox: true}
	garden := todoisttest.Project{ID: "g1", Name: "Garden"}
	task := func(id, content, project string, due string) todoisttest.Task {
		tk := todoisttest.Task{ID: id, Content: content, ProjectID: project, Priority: 1}
		if due != "" {
			tk.Due = &todoisttest.Due{Date: due}
		}
		return tk
	}
	start := todoisttest.State{Projects: []todoisttest.Project{inbox, garden}, Tasks: []todoisttest.Task{
		task("t1", "Call mom", "in", ""), task("t2", "Buy seeds", "in", ""), task("t3", "Mow the lawn", "g1", ""),
	}}
	tests := []struct {
		name  string
		final []todoisttest.Task
		extra []todoisttest.Project
		p     Predicate
		want  string // "" holds; else a part of the reason
	}{
		// The user is in Auckland (UTC+12 in June): 17:00 there on 12 June
		// is 05:00 UTC the same day; a date fixed in UTC is read in their zone.
		{"fixed time read in the user's zone", []todoisttest.Task{task("t1", "Call mom", "in", "2026-06-12T05:00:00Z")}, nil, Due("mom", "2026-06-12", "17:00"), ""},
		{"floating time is the user's wall time", []todoisttest.Task{task("t1", "Call mom", "in", "2026-06-12T17:00:00")}, nil, Due("mom", "2026-06-12", "17:00"), ""},
		{"tomorrow taken in UTC is a day early", []todoisttest.Task{task("t1", "Call mom", "in", "2026-06-11T17:00:00")}, nil, Due("mom", "2026-06-12", "17:00"),
			`"Call mom" is due 2026-06-11 17:00, want 2026-06-12 17:00 (Pacific/Auckland)`},
		{"no due date", []todoisttest.Task{task("t1", "Call mom", "in", "")}, nil, Due("mom", "2026-06-12", ""), `"Call mom" has no due date`},
		{"moved elsewhere", []todoisttest.Task{task("t2", "Buy seeds", "in", "")}, nil, InProject("seeds", "Garden"), `"Buy seeds" is in Inbox, want Garden`},
		{"two like it", []todoisttest.Task{task("t2", "Buy seeds", "g1", ""), task("t4", "Buy seeds again", "g1", "")}, nil, InProject("seeds", "Garden"), `2 open tasks like "seeds"`},
		{"exact name wins", []todoisttest.Task{task("t2", "Buy seeds", "g1", ""), task("t4", "Buy seeds again", "in", "")}, nil, InProject("Buy seeds", "Garden"), ""},
		{"duplicate project", nil, []todoisttest.Project{{ID: "g2", Name: "garden"}}, NoDuplicateProjects(), `two projects are named "garden"`},
		{"deleted", []todoisttest.Task{task("t1", "Call mom", "in", "")}, nil, Unchanged("lawn"), `"Mow the lawn" was deleted`},
		{"changed", []todoisttest.Task{task("t3", "Mow the lawn", "in", "")}, nil, Unchanged("lawn"), `"Mow the lawn" changed (project Garden → Inbox)`},
		{"all in the project", []todoisttest.Task{task("t2", "Buy seeds", "g1", ""), task("t4", "Sow seeds", "g1", "")}, nil, AllIn("seeds", "Garden"), ""},
		{"one in the look-alike", []todoisttest.Task{task("t2", "Buy seeds", "g1", ""), task("t4", "Sow seeds", "g2", "")}, []todoisttest.Project{{ID: "g2", Name: "Garden Furniture Shop"}},
			AllIn("seeds", "Garden"), `"Sow seeds" is in Garden Furniture Shop, want Garden`},
		{"none to be in it", nil, nil, AllIn("seeds", "Garden"), `no open task like "seeds"`},
		{"grouped", []todoisttest.Task{task("t1", "Call mom", "g1", ""), task("t2", "Buy seeds", "g1", "")}, nil, Grouped("mom", "seeds"), `the "mom" and "seeds" tasks share Garden`},
		{"still in the inbox", []todoisttest.Task{task("t2", "Buy seeds", "in", "")}, nil, InboxEmpty(), `the Inbox still holds 1 tasks ("Buy seeds")`},
		{"completed, not deleted", []todoisttest.Task{{ID: "t1", Content: "Call mom", ProjectID: "in", Checked: true}}, nil, Completed("mom"), ""},
		{"deleted, not completed", nil, nil, Completed("mom"), `no task like "mom" exists`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &World{Start: start, Loc: auckland, Answer: "",
				Final: todoisttest.State{Projects: append([]todoisttest.Project{inbox, garden}, tt.extra...), Tasks: tt.final}}
			err := tt.p.Check(w)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v, want it to hold", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestJudgeForbidden(t *testing.T) {
	w := &World{}
	readOnly := Task{ReadOnly: true}
	if got := readOnly.judge(w, []written{{kind: "item_move", what: `moved "A"`}}, 0, nil); got != `forbidden: wrote in a read-only task (moved "A")` {
		t.Errorf("read-only write: %q", got)
	}
	mayDrop := Task{MayDelete: []string{"Stranger"}}
	if got := mayDrop.judge(w, []written{{kind: "item_delete", content: "The Stranger by Camus", what: `deleted "The Stranger by Camus"`}}, 0, nil); got != "" {
		t.Errorf("allowed delete: %q", got)
	}
	if got := mayDrop.judge(w, []written{{kind: "item_delete", content: "1984", what: `deleted "1984"`}}, 0, nil); got != `forbidden: deleted "1984"` {
		t.Errorf("other delete: %q", got)
	}
	if got := (Task{MustAsk: true}).judge(w, nil, 0, nil); !strings.HasPrefix(got, "never asked the user") {
		t.Errorf("never asked: %q", got)
	}
	if got := (Task{}).judge(w, nil, 0, []string{"turn 1 ended stopped: step limit"}); got != "turn 1 ended stopped: step limit" {
		t.Errorf("a run that stopped with the right state: %q", got)
	}
}

// TestScorePassK: pass^1 is the share of attempts solved, pass^k counts a
// task only when every attempt solved it, and the totals are means over
// tasks.
func TestScorePassK(t *testing.T) {
	r := Report{K: 3, Tasks: []TaskResult{
		{Name: "always", Attempts: []Attempt{{Pass: true, Calls: 2}, {Pass: true, Calls: 2}, {Pass: true, Calls: 3}}},
		{Name: "flaky", Attempts: []Attempt{{Pass: true, Calls: 2}, {Reason: "x"}, {Pass: true, Calls: 2}}},
		{Name: "never", Attempts: []Attempt{{Reason: "x"}, {Reason: "x"}, {Reason: "x"}}},
	}}
	r.score(time.Second)
	want := []struct{ p1, pk float64 }{{1, 1}, {2.0 / 3, 0}, {0, 0}}
	for i, w := range want {
		if got := r.Tasks[i]; got.Pass1 != w.p1 || got.PassK != w.pk {
			t.Errorf("%s: pass^1 %.3f pass^k %.0f, want %.3f and %.0f", got.Name, got.Pass1, got.PassK, w.p1, w.pk)
		}
	}
	if math.Abs(r.Total.Pass1-5.0/9) > 1e-9 || math.Abs(r.Total.PassK-1.0/3) > 1e-9 || r.Total.Calls != 11 || r.Total.Attempts != 9 {
		t.Errorf("total %+v", r.Total)
	}
	if got := r.Failed(); len(got) != 2 || got[0] != "flaky" || got[1] != "never" {
		t.Errorf("failed %v, want [flaky never]", got)
	}
}
