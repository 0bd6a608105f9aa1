package evalcmd

import (
	"bytes"
	"context"
	"go/parser"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

type memRuns map[string]*bot.Run

func (m memRuns) Runs(context.Context, ...bot.RunStatus) ([]*bot.Run, error) {
	var out []*bot.Run
	for _, id := range []string{"good", "bad", "none"} {
		if r, ok := m[id]; ok {
			c := *r
			c.Transcript = nil
			out = append(out, &c)
		}
	}
	return out, nil
}

func (m memRuns) Run(_ context.Context, id string) (*bot.Run, error) { return m[id], nil }

// TestFromFeedbackDraftsTheBadRuns: only the 👎 run is drafted; its seed
// is what the run read (projects with sections, tasks with project,
// section, labels, priority and due; the Inbox's tasks without a
// project), its turn the person's words and answer, the goal left to
// fill; secrets are redacted; and the draft is a Go expression.
func TestFromFeedbackDraftsTheBadRuns(t *testing.T) {
	tr := &agent.Transcript{V: 1, Instruction: "file the dentist task", Status: agent.StatusDone}
	tr.Known.InboxID = "p0"
	tr.Known.Projects = map[string]agent.Project{"p0": {ID: "p0", Name: "Inbox", IsInbox: true}, "p1": {ID: "p1", Name: "Health"}}
	tr.Known.Sections = map[string]agent.Section{"s1": {ID: "s1", ProjectID: "p1", Name: "Appointments"}}
	tr.Known.Tasks = map[string]agent.Task{
		"t1": {ID: "t1", Content: "Dentist \"Dr. Who\"", ProjectID: "p0", Priority: agent.P1, DueDate: "2026-06-19T10:00:00", Labels: []string{"errand"}},
		"t2": {ID: "t2", Content: "Flu shot", ProjectID: "p1", SectionID: "s1"},
		"t3": {ID: "t3", Content: "Mystery", ProjectID: "p9"},
	}
	raw, err := agent.MarshalTranscript(tr)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 6, 10, 7, 30, 0, 0, time.UTC)
	runs := memRuns{
		"good": {ID: "good", Instruction: "fine", Feedback: &bot.Feedback{Rating: bot.FeedbackGood, At: at}, Created: at},
		"bad": {ID: "bad", Instruction: "file the dentist task, key sk-secret123", Reply: "Health", Answer: "Moved it.\nAll done.", Transcript: raw,
			Feedback: &bot.Feedback{Rating: bot.FeedbackBad, At: at}, Created: at},
		"none": {ID: "none", Instruction: "nothing"},
	}
	var out bytes.Buffer
	n, err := FromFeedback(t.Context(), &out, runs, agent.NewRedactor("sk-secret123"))
	if err != nil || n != 1 {
		t.Fatalf("FromFeedback = %d, %v", n, err)
	}
	got := out.String()
	for _, want := range []string{
		`Name:  "feedback-bad"`,
		"Clock: time.Date(2026, 6, 10, 7, 30, 0, 0, time.UTC)",
		`{Name: "Health", Sections: []string{"Appointments"}}`,
		`Labels: []string{"errand"}`,
		`{Content: "Dentist \"Dr. Who\"", Labels: []string{"errand"}, Priority: "p1", Due: "2026-06-19T10:00:00"}`,
		`{Content: "Flu shot", Project: "Health", Section: "Appointments"}`,
		`{Content: "Mystery"}, // TODO: its project was not read`,
		`Answers: []string{"Health"}`,
		"// The bot answered: Moved it.\n// The bot answered: All done.",
		"Goal: []eval.Predicate{\n\t\t// TODO",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("draft lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "sk-secret123") || strings.Contains(got, "fine") || strings.Contains(got, "nothing") {
		t.Errorf("draft shows a secret or another run:\n%s", got)
	}
	code := regexp.MustCompile(`(?m)^//.*$`).ReplaceAllString(got, "")
	if _, err := parser.ParseExpr(code); err != nil {
		t.Errorf("draft is not a Go expression: %v\n%s", err, code)
	}
}
