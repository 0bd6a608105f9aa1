package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Report is the score of a run of the suite.
type Report struct {
	// Model and Protocol name what was measured; Simulated is set when
	// the model is a script, not a real model.
	Model     string       `json:"model,omitempty"`
	Protocol  string       `json:"protocol,omitempty"`
	Simulated bool         `json:"simulated,omitempty"`
	K         int          `json:"k"`
	Tasks     []TaskResult `json:"tasks"`
	Total     Total        `json:"total"`
	// Err is set when the run was cut short because the model never
	// answered (unreachable, a wrong key or model name): the figures
	// are then meaningless.
	Err error `json:"-"`
}

// TaskResult is one task's score over its K attempts.
type TaskResult struct {
	Name  string `json:"name"`
	About string `json:"about"`
	// Pass1 is the share of attempts that solved the task; PassK is 1
	// when every attempt did, else 0.
	Pass1            float64       `json:"pass_1"`
	PassK            float64       `json:"pass_k"`
	Calls            int           `json:"model_calls"`
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
	Wall             time.Duration `json:"wall_ns"`
	Attempts         []Attempt     `json:"attempts"`
}

// Attempt is one play of a task.
type Attempt struct {
	Pass bool `json:"pass"`
	// Reason says in one line why the attempt failed: the state
	// difference or the forbidden action.
	Reason           string        `json:"reason,omitempty"`
	Calls            int           `json:"model_calls"`
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
	Wall             time.Duration `json:"wall_ns"`

	// noModel is set when the model never answered in this attempt.
	noModel string
}

// Total sums a report: pass^1 and pass^k are the means over tasks.
type Total struct {
	Tasks            int           `json:"tasks"`
	Attempts         int           `json:"attempts"`
	Pass1            float64       `json:"pass_1"`
	PassK            float64       `json:"pass_k"`
	Calls            int           `json:"model_calls"`
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
	Wall             time.Duration `json:"wall_ns"`
}

// score fills in the per-task and total figures from the attempts.
func (r *Report) score(wall time.Duration) {
	r.Total = Total{Tasks: len(r.Tasks), Wall: wall}
	for i := range r.Tasks {
		t := &r.Tasks[i]
		passes := 0
		for _, a := range t.Attempts {
			if a.Pass {
				passes++
			}
			t.Calls += a.Calls
			t.PromptTokens += a.PromptTokens
			t.CompletionTokens += a.CompletionTokens
			t.Wall += a.Wall
		}
		t.Pass1 = float64(passes) / float64(len(t.Attempts))
		if passes == len(t.Attempts) {
			t.PassK = 1
		}
		r.Total.Attempts += len(t.Attempts)
		r.Total.Pass1 += t.Pass1
		r.Total.PassK += t.PassK
		r.Total.Calls += t.Calls
		r.Total.PromptTokens += t.PromptTokens
		r.Total.CompletionTokens += t.CompletionTokens
	}
	if n := float64(len(r.Tasks)); n > 0 {
		r.Total.Pass1 /= n
		r.Total.PassK /= n
	}
}

// Failed returns the names of the tasks with a failed attempt.
func (r Report) Failed() []string {
	var out []string
	for _, t := range r.Tasks {
		if t.PassK < 1 {
			out = append(out, t.Name)
		}
	}
	return out
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as a table, then one line per failed
// attempt with its reason.
func (r Report) WriteTable(w io.Writer) error {
	model := r.Model
	if r.Simulated {
		model += " (SIMULATED: a scripted model, not a real one)"
	}
	if _, err := fmt.Fprintf(w, "tidybot eval: model %s, protocol %s, k=%d, %d tasks against a fake Todoist\n\n", model, r.Protocol, r.K, len(r.Tasks)); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "task\tpass^1\tpass^%d\tmodel calls\tprompt tokens\tcompletion tokens\twall\n", r.K)
	for _, t := range r.Tasks {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%d\t%d\t%d\t%s\n", t.Name, t.Pass1, t.PassK, t.Calls, t.PromptTokens, t.CompletionTokens, t.Wall.Round(time.Millisecond))
	}
	fmt.Fprintf(tw, "TOTAL (%d tasks × %d)\t%.2f\t%.2f\t%d\t%d\t%d\t%s\n", r.Total.Tasks, r.K, r.Total.Pass1, r.Total.PassK, r.Total.Calls, r.Total.PromptTokens, r.Total.CompletionTokens, r.Total.Wall.Round(time.Millisecond))
	if err := tw.Flush(); err != nil {
		return err
	}
	first := true
	for _, t := range r.Tasks {
		for i, a := range t.Attempts {
			if a.Pass {
				continue
			}
			if first {
				if _, err := fmt.Fprintln(w, "\nFailures:"); err != nil {
					return err
				}
				first = false
			}
			if _, err := fmt.Fprintf(w, "  %s #%d: %s\n", t.Name, i+1, a.Reason); err != nil {
				return err
			}
		}
	}
	return nil
}
