// Package inspector shows what one agent run thought, did and spent: a web
// page (server-rendered, behind signed links) and the same timeline as
// text for the terminal.
package inspector

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

// Source is what the inspector reads; store implements it.
type Source interface {
	// Run returns a run, or an error wrapping bot.ErrNotFound.
	Run(ctx context.Context, id string) (*bot.Run, error)
	// Runs returns the runs with any of the given statuses (all when none
	// is given), oldest first.
	Runs(ctx context.Context, statuses ...bot.RunStatus) ([]*bot.Run, error)
}

// clipAt is how much of an observation or argument list shows before it
// must be expanded.
const clipAt = 240

// View is one run as the page and the terminal show it. Every text in it
// has been redacted.
type View struct {
	ID           string
	Conversation string
	Status       string
	Instruction  string
	Answer       string
	// Question is what a waiting run asks.
	Question string
	Created  time.Time
	Steps    []Step
	Writes   []WriteView
	Undone   bool
	// Feedback is the asker's rating of the answer: "👍", "👎" or "".
	Feedback string
	Totals   Totals
	// Timeline is the per-step time drawing's geometry.
	Timeline Timeline
}

// Totals sum a run.
type Totals struct {
	ModelCalls       int
	PromptTokens     int
	CompletionTokens int
	Model            time.Duration
	Todoist          time.Duration
	TodoistRequests  int
	Wait             time.Duration
}

// Step is one model call and what followed from it.
type Step struct {
	N       int
	Thought string
	Actions []ActionView
	// Notes are messages the engine added that answer no action (a
	// repair prompt quoting an unusable reply).
	Notes    []Clip
	Model    []CallView
	Todoist  []CallView
	Wait     time.Duration
	ModelDur time.Duration
	TaskDur  time.Duration
}

// ActionView is one action the model asked for, with what came of it.
type ActionView struct {
	Name  string
	Args  Clip
	Write bool
	// Question, Options and Answer are set for ask_user.
	Question    string
	Options     []string
	Answer      string
	Observation Clip
	HasResult   bool
	// Confirmed is set on a gated write the user said yes to; Declined
	// on one they refused.
	Confirmed, Declined bool
}

// Clip is a text shown clipped, with the rest behind <details>.
type Clip struct {
	Short string
	Full  string
}

// Clipped reports whether Short leaves something out.
func (c Clip) Clipped() bool { return c.Short != c.Full }

// CallView is one timed call.
type CallView struct {
	Op               string
	Dur              time.Duration
	PromptTokens     int
	CompletionTokens int
	Failed           bool
}

// WriteView is one applied write.
type WriteView struct {
	Summary string
	Kind    string
	NewID   string
	Undone  bool
}

func clip(s string) Clip {
	c := Clip{Short: s, Full: s}
	if r := []rune(s); len(r) > clipAt {
		c.Short = string(r[:clipAt]) + "…"
	}
	return c
}

// Build makes the view of r, redacting every text with red (nil: none).
func Build(r *bot.Run, red *agent.Redactor) (*View, error) {
	v := &View{ID: r.ID, Conversation: conversation(red.String(r.ThreadKey)), Status: string(r.Status), Instruction: red.String(r.Instruction),
		Answer: red.String(r.Answer), Created: r.Created, Undone: r.Undone}
	if r.Waiting != nil {
		v.Question = red.String(r.Waiting.Question)
	}
	v.Feedback = Rating(r)
	if len(r.Transcript) == 0 {
		v.Timeline = timeline(nil)
		return v, nil
	}
	tr, err := agent.UnmarshalTranscript(r.Transcript)
	if err != nil {
		return nil, fmt.Errorf("inspector: run %s: %w", r.ID, err)
	}
	red.Transcript(tr)
	if v.Instruction == "" {
		v.Instruction = tr.Instruction
	}
	v.Steps = steps(tr, red)
	for _, a := range tr.Journal {
		v.Writes = append(v.Writes, WriteView{Summary: red.String(a.Summary), Kind: string(a.Write.Kind), NewID: a.NewID, Undone: r.Undone})
	}
	byStep := map[int]int{}
	for i := range v.Steps {
		byStep[v.Steps[i].N] = i
	}
	for _, sp := range tr.Spans {
		i, ok := byStep[sp.Step]
		if !ok { // a step whose reply is not in the conversation
			v.Steps = append(v.Steps, Step{N: sp.Step})
			i = len(v.Steps) - 1
			byStep[sp.Step] = i
		}
		st := &v.Steps[i]
		cv := CallView{Op: sp.Op, Dur: sp.Dur, Failed: sp.Failed}
		switch sp.Kind {
		case agent.SpanModel:
			if sp.Usage != nil {
				cv.PromptTokens, cv.CompletionTokens = sp.Usage.PromptTokens, sp.Usage.CompletionTokens
			}
			st.Model = append(st.Model, cv)
			st.ModelDur += sp.Dur
			v.Totals.Model += sp.Dur
		case agent.SpanTasks:
			st.Todoist = append(st.Todoist, cv)
			st.TaskDur += sp.Dur
			v.Totals.Todoist += sp.Dur
			v.Totals.TodoistRequests++
		case agent.SpanWait:
			st.Wait += sp.Dur
			v.Totals.Wait += sp.Dur
		}
	}
	sort.SliceStable(v.Steps, func(a, b int) bool { return v.Steps[a].N < v.Steps[b].N })
	for i := range v.Steps {
		gates(&v.Steps[i])
	}
	v.Totals.ModelCalls, v.Totals.PromptTokens, v.Totals.CompletionTokens = tr.Usage.Calls, tr.Usage.PromptTokens, tr.Usage.CompletionTokens
	v.Timeline = timeline(v.Steps)
	return v, nil
}

// steps splits the conversation into the run's steps: each model call
// added one assistant message, so the run's steps are the last tr.Steps
// assistant messages and what follows each.
func steps(tr *agent.Transcript, red *agent.Redactor) []Step {
	var idx []int
	for i, m := range tr.Messages {
		if m.Role == agent.RoleAssistant {
			idx = append(idx, i)
		}
	}
	if tr.Steps < len(idx) {
		idx = idx[len(idx)-tr.Steps:]
	}
	var out []Step
	for k, i := range idx {
		end := len(tr.Messages)
		if k+1 < len(idx) {
			end = idx[k+1]
		}
		st := Step{N: k + 1}
		m := tr.Messages[i]
		var actions []*ActionView
		byID := map[string]*ActionView{}
		if len(m.ToolCalls) > 0 {
			st.Thought = red.String(m.Content)
			for _, tc := range m.ToolCalls {
				a := action(tc.Name, []byte(tc.Arguments), red)
				actions = append(actions, a)
				byID[tc.ID] = a
			}
		} else if thought, name, args, ok := envelope(m.Content); ok {
			st.Thought = red.String(thought)
			actions = append(actions, action(name, args, red))
		} else {
			st.Thought = red.String(m.Content)
		}
		next := 0 // json protocol: observations answer actions in order
		for _, o := range tr.Messages[i+1 : end] {
			text := red.String(o.Content)
			var a *ActionView
			switch {
			case o.Role == agent.RoleTool:
				a = byID[o.ToolCallID]
			case o.Role == agent.RoleUser && strings.HasPrefix(text, "Observation: ") && next < len(actions):
				a = actions[next]
				next++
				text = strings.TrimPrefix(text, "Observation: ")
			}
			if a == nil {
				st.Notes = append(st.Notes, clip(text))
				continue
			}
			a.HasResult = true
			a.Observation = clip(text)
			if a.Name == agent.ActAskUser {
				a.Answer = strings.TrimPrefix(text, "The user answered: ")
			}
		}
		for _, a := range actions {
			st.Actions = append(st.Actions, *a)
		}
		out = append(out, st)
	}
	return out
}

// gates marks the writes of a step that waited for the user without
// asking a question: the wait was a confirmation.
func gates(st *Step) {
	if st.Wait == 0 {
		return
	}
	for _, a := range st.Actions {
		if a.Name == agent.ActAskUser {
			return
		}
	}
	for i := range st.Actions {
		a := &st.Actions[i]
		if !a.Write || !a.HasResult {
			continue
		}
		if strings.HasPrefix(a.Observation.Full, "The user said no") || strings.HasPrefix(a.Observation.Full, "The user did not confirm") {
			a.Declined = true
		} else {
			a.Confirmed = true
		}
	}
}

// action describes one call.
func action(name string, args []byte, red *agent.Redactor) *ActionView {
	a := &ActionView{Name: red.String(name), Write: agent.IsWrite(name)}
	var pretty bytes.Buffer
	if json.Indent(&pretty, args, "", "  ") == nil {
		a.Args = clip(red.String(pretty.String()))
	} else {
		a.Args = clip(red.String(string(args)))
	}
	if name == agent.ActAskUser {
		var q agent.AskUserArgs
		_ = json.Unmarshal(args, &q)
		a.Question = red.String(q.Question)
		for _, o := range q.Options {
			a.Options = append(a.Options, red.String(o))
		}
	}
	return a
}

// envelope reads a json-protocol reply: {"thought", "action": {"type", …}}.
func envelope(content string) (thought, name string, args []byte, ok bool) {
	var env struct {
		Thought string                     `json:"thought"`
		Action  map[string]json.RawMessage `json:"action"`
	}
	if json.Unmarshal([]byte(strings.TrimSpace(content)), &env) != nil || env.Action == nil {
		return "", "", nil, false
	}
	_ = json.Unmarshal(env.Action["type"], &name)
	delete(env.Action, "type")
	args, _ = json.Marshal(env.Action)
	return env.Thought, name, args, name != ""
}

// conversation is how a run's conversation is shown: its thread key
// without the empty parts a key ends in ("console:local:", a DM with no
// thread, shows as "console:local").
func conversation(threadKey string) string {
	return strings.TrimRight(threadKey, ":")
}

// Rating is r's feedback as shown: "👍", "👎", or "" before any.
func Rating(r *bot.Run) string {
	switch {
	case r.Feedback == nil:
		return ""
	case r.Feedback.Rating == bot.FeedbackGood:
		return "👍"
	case r.Feedback.Rating == bot.FeedbackBad:
		return "👎"
	}
	return ""
}
