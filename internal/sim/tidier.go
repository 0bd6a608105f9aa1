// Package sim is a simulated model: deterministic scripts that answer the
// agent the way a competent model would, for the demo, the benchmark and
// end-to-end tests. Nothing here is a real model.
package sim

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/tidybot/tidybot/agent"
)

// Group maps tasks whose content holds Keyword to a project.
type Group struct {
	Keyword string
	Project string
}

// TalkGroups are the groups of the talk's inbox, plus the generator's.
var TalkGroups = []Group{
	{"pydata", "PyData Talk"},
	{"birthday", "Birthday Celebration"},
	{"website", "Personal Website"},
	{"garden", "Garden"},
	{"tax", "Taxes"},
	{"trip", "Trip"},
	{"car", "Car"},
}

// Tidier tidies an inbox: it reads the overview, files every inbox task
// into a project by keyword with move_tasks and project_name (100 per
// call), checks that the inbox is empty, and answers. Its reply depends
// only on the request, so any number of runs can share one.
type Tidier struct {
	Groups []Group
}

// Reply answers one request.
func (t *Tidier) Reply(req agent.Request) agent.Response {
	tools := len(req.Tools) > 0
	st := t.state(req.Messages, tools)
	var calls []action
	thought := ""
	switch {
	case !st.overview:
		thought = "I need the projects and the inbox first."
		calls = []action{{Name: agent.ActGetOverview, Args: map[string]any{}}}
	case len(st.pending) > 0:
		thought = "I group the inbox tasks by topic and file each group into its project."
		batch := st.pending
		if len(batch) > 100 {
			batch = batch[:100]
		}
		var moves []any
		for _, task := range batch {
			moves = append(moves, map[string]any{"task_id": task.id, "project_name": t.Project(task.content)})
		}
		calls = []action{{Name: agent.ActMoveTasks, Args: map[string]any{"moves": moves}}}
		if tools && len(st.pending) <= 100 {
			calls = append(calls, action{Name: agent.ActGetInboxTasks, Args: map[string]any{}})
		}
	case !st.verified:
		thought = "Now I check that the inbox is empty."
		calls = []action{{Name: agent.ActGetInboxTasks, Args: map[string]any{}}}
	default:
		thought = "Everything is filed."
		projects := map[string]bool{}
		for _, task := range st.inbox {
			projects[t.Project(task.content)] = true
		}
		var names []string
		for p := range projects {
			names = append(names, p)
		}
		sort.Strings(names)
		answer := fmt.Sprintf("Tidied your inbox: moved %d tasks into %d projects (%s). The inbox is empty.", len(st.inbox), len(names), strings.Join(names, ", "))
		if len(st.inbox) == 0 {
			answer = "Your inbox is already empty."
		}
		calls = []action{{Name: agent.ActFinalAnswer, Args: map[string]any{"answer": answer}}}
	}
	return render(thought, calls, tools, len(req.Messages))
}

// Project is the project a task with this content goes to.
func (t *Tidier) Project(content string) string {
	lc := strings.ToLower(content)
	for _, g := range t.Groups {
		if strings.Contains(lc, g.Keyword) {
			return g.Project
		}
	}
	return "Misc"
}

type action struct {
	Name string
	Args map[string]any
}

// render turns actions into a reply in the request's protocol.
func render(thought string, calls []action, tools bool, seq int) agent.Response {
	if tools {
		resp := agent.Response{Content: thought, FinishReason: "tool_calls"}
		for i, c := range calls {
			args, _ := json.Marshal(c.Args)
			resp.ToolCalls = append(resp.ToolCalls, agent.ToolCall{ID: fmt.Sprintf("call_%d_%d", seq, i), Name: c.Name, Arguments: string(args)})
		}
		return resp
	}
	act := map[string]any{"type": calls[0].Name}
	for k, v := range calls[0].Args {
		act[k] = v
	}
	b, _ := json.Marshal(map[string]any{"thought": thought, "action": act})
	return agent.Response{Content: string(b), FinishReason: "stop"}
}

type task struct{ id, content string }

type state struct {
	overview bool
	inbox    []task // the inbox as the overview showed it
	pending  []task // inbox tasks not moved yet
	verified bool
}

var taskLine = regexp.MustCompile(`(?m)^- (\S+) ("(?:[^"\\]|\\.)*")`)

// state reads where the run is from the conversation.
func (t *Tidier) state(msgs []agent.Message, tools bool) state {
	var st state
	moved := map[string]bool{}
	for i, m := range msgs {
		if m.Role != agent.RoleAssistant {
			continue
		}
		for _, c := range calledActions(m, tools) {
			switch c.Name {
			case agent.ActGetOverview:
				if obs := observationAfter(msgs, i); strings.Contains(obs, "Inbox tasks (") {
					st.overview = true
					inbox := obs[strings.Index(obs, "Inbox tasks ("):]
					st.inbox = nil
					for _, mt := range taskLine.FindAllStringSubmatch(inbox, -1) {
						content, err := strconv.Unquote(mt[2])
						if err == nil {
							st.inbox = append(st.inbox, task{mt[1], content})
						}
					}
				}
			case agent.ActMoveTasks:
				var a agent.MoveTasksArgs
				b, _ := json.Marshal(c.Args)
				_ = json.Unmarshal(b, &a)
				for _, mv := range a.Moves {
					moved[mv.TaskID] = true
				}
			case agent.ActGetInboxTasks:
				st.verified = strings.Contains(observationAfter(msgs, i), "Inbox tasks (0)")
			}
		}
	}
	for _, task := range st.inbox {
		if !moved[task.id] {
			st.pending = append(st.pending, task)
		}
	}
	return st
}

// calledActions lists the actions an assistant message asked for.
func calledActions(m agent.Message, tools bool) []action {
	var out []action
	if tools && len(m.ToolCalls) > 0 {
		for _, tc := range m.ToolCalls {
			var args map[string]any
			_ = json.Unmarshal([]byte(tc.Arguments), &args)
			out = append(out, action{Name: tc.Name, Args: args})
		}
		return out
	}
	var env struct {
		Action map[string]any `json:"action"`
	}
	if json.Unmarshal([]byte(m.Content), &env) == nil && env.Action != nil {
		name, _ := env.Action["type"].(string)
		out = append(out, action{Name: name, Args: env.Action})
	}
	return out
}

// observationAfter joins the observations that follow message i.
func observationAfter(msgs []agent.Message, i int) string {
	var b strings.Builder
	for _, m := range msgs[i+1:] {
		if m.Role == agent.RoleAssistant {
			break
		}
		if m.Role == agent.RoleTool || (m.Role == agent.RoleUser && strings.HasPrefix(m.Content, "Observation: ")) {
			b.WriteString(m.Content)
			b.WriteString("\n")
		}
	}
	return b.String()
}
