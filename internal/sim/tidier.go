// Package sim is a simulated model: deterministic scripts that answer the
// agent the way a competent model would, for the demo, the benchmark and
// end-to-end tests. Nothing here is a real model.
package sim

import (
	"encoding/json"
	"fmt"
	"sort"
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

// Tidier tidies an inbox: it reads the overview unless the conversation
// already shows it (a prefetched read), files every inbox task into a
// project by keyword with move_tasks, grouped by project_name (100 tasks
// a call, every listed task in one reply), and answers in the same reply as the last
// moves: the engine accepts the answer only when the moves succeeded. An
// inbox listed only in part (more than the observation shows) is read
// again after its listed tasks are filed. When they did not (the answer is
// refused, or, in the json protocol, a move's observation reports a
// failure), it reads the inbox again and files what is left. Its reply
// depends only on the request, so any number of runs can share one.
type Tidier struct {
	Groups []Group
	// Check makes it read the inbox after its last moves and answer only
	// once the inbox shows empty, as the talk's instruction asks: a step
	// after the writes, for tests that need one (a crash after a write).
	Check bool
}

// batch is how many moves one move_tasks call carries.
const batch = 100

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
		// The whole listing in one plan (a digit a task) when nothing
		// listed has moved since and there are at most nine
		// destinations; else every task listed, 100 a call, grouped by
		// destination (each project named once a call). The json
		// protocol sends one call a reply.
		if args, ok := t.plan(st); ok {
			thought = ""
			calls = append(calls, action{Name: agent.ActMoveTasks, Args: args})
		}
		for i := 0; len(calls) == 0 && i < len(st.pending); i += batch {
			calls = append(calls, action{Name: agent.ActMoveTasks, Args: map[string]any{"groups": t.groups(st.pending[i:min(i+batch, len(st.pending))])}})
			if !tools {
				break
			}
		}
		switch {
		case !tools:
		case st.more || t.Check:
			// The listing was cut short (or the run checks): read what
			// is left.
			calls = append(calls, action{Name: agent.ActGetInboxTasks, Args: map[string]any{}})
		default:
			for _, task := range st.pending {
				st.moved[task.id] = task.content
			}
			// The engine reports the moves itself, unless the prompt
			// asks for the answer (a language of the person's).
			args := map[string]any{}
			if ownAnswer(req) {
				args["answer"] = t.answer(st.moved)
			}
			calls = append(calls, action{Name: agent.ActFinalAnswer, Args: args})
		}
	case !st.verified && (st.more || st.failed || st.refused || t.Check):
		thought = "I read what is left in the inbox."
		calls = []action{{Name: agent.ActGetInboxTasks, Args: map[string]any{}}}
	default:
		thought = "Everything is filed."
		args := map[string]any{} // the engine reports the moves
		if len(st.moved) == 0 || ownAnswer(req) {
			args["answer"] = t.answer(st.moved)
		}
		calls = []action{{Name: agent.ActFinalAnswer, Args: args}}
	}
	return render(thought, calls, tools, len(req.Messages))
}

// ownAnswer reports whether the prompt asks the model to give
// final_answer's answer itself (agent.LanguageMessage).
func ownAnswer(req agent.Request) bool {
	for _, m := range req.Messages {
		if m.Role == agent.RoleSystem && strings.Contains(m.Content, "Always give final_answer's answer") {
			return true
		}
	}
	return false
}

// plan files the listing st.inbox in move_tasks' filing form: a digit a
// listed task (1-9: the destination's place in to). It reports false when some listed task has moved since the
// listing or the tasks go to more than nine places.
func (t *Tidier) plan(st state) (map[string]any, bool) {
	if len(st.pending) != len(st.inbox) {
		return nil, false
	}
	var to []string
	place := map[string]int{}
	digits := make([]byte, len(st.inbox))
	for i, task := range st.inbox {
		p := t.Project(task.content)
		if place[p] == 0 {
			to = append(to, p)
			place[p] = len(to)
		}
		if len(to) > 9 {
			return nil, false
		}
		digits[i] = byte('0' + place[p])
	}
	return map[string]any{"plan": agent.FilingPlan(digits), "to": to}, true
}

// planned returns the tasks a plan moved: the listed ones whose digit
// is not 0.
func planned(plan string, listed []task) []string {
	var ids []string
	i := 0
	for _, c := range plan {
		if c == ' ' {
			continue
		}
		if c != '0' && i < len(listed) {
			ids = append(ids, listed[i].id)
		}
		i++
	}
	return ids
}

// groups groups tasks by their project, in the order the projects first
// appear.
func (t *Tidier) groups(tasks []task) []any {
	var order []string
	ids := map[string][]string{}
	for _, task := range tasks {
		p := t.Project(task.content)
		if _, ok := ids[p]; !ok {
			order = append(order, p)
		}
		ids[p] = append(ids[p], task.id)
	}
	out := make([]any, len(order))
	for i, p := range order {
		out[i] = map[string]any{"project_name": p, "task_ids": ids[p]}
	}
	return out
}

// answer says what the moves did.
func (t *Tidier) answer(moved map[string]string) string {
	if len(moved) == 0 {
		return "Your inbox is already empty."
	}
	projects := map[string]bool{}
	for _, content := range moved {
		projects[t.Project(content)] = true
	}
	names := make([]string, 0, len(projects))
	for p := range projects {
		names = append(names, p)
	}
	sort.Strings(names)
	return fmt.Sprintf("Tidied your inbox: moved %d tasks into %d projects (%s).", len(moved), len(names), strings.Join(names, ", "))
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
	inbox    []task // the inbox as the last read showed it
	pending  []task // inbox tasks not moved since that read
	// moved maps each task moved successfully so far to its content.
	moved    map[string]string
	more     bool // the last read listed only part of the inbox
	failed   bool // a move since the last read reported a failure
	refused  bool // a final answer was refused
	verified bool // the last read showed an empty inbox
}

// state reads where the run is from the conversation.
func (t *Tidier) state(msgs []agent.Message, tools bool) state {
	st := state{moved: map[string]string{}}
	var since map[string]bool // moved since the last read
	content := map[string]string{}
	for i, m := range msgs {
		if m.Role != agent.RoleAssistant {
			continue
		}
		obs := observationAfter(msgs, i)
		for _, c := range calledActions(m, tools) {
			switch c.Name {
			case agent.ActGetOverview, agent.ActGetInboxTasks:
				if !strings.Contains(obs, "Inbox tasks (") {
					continue
				}
				st.overview = true
				st.inbox = listedTasks(obs, "Inbox tasks (")
				for _, task := range st.inbox {
					content[task.id] = task.content
				}
				since, st.failed, st.refused = map[string]bool{}, false, false
				st.verified = strings.Contains(obs, "Inbox tasks (0)")
				st.more = strings.Contains(obs[strings.Index(obs, "Inbox tasks ("):], "… and ")
			case agent.ActMoveTasks:
				var a agent.MoveTasksArgs
				b, _ := json.Marshal(c.Args)
				_ = json.Unmarshal(b, &a)
				failed := strings.Contains(obs, "✗") || strings.Contains(obs, "Error")
				st.failed = st.failed || failed
				var moved []string
				for _, mv := range a.Moves {
					moved = append(moved, mv.TaskID)
				}
				for _, g := range a.Groups {
					moved = append(moved, g.TaskIDs...)
				}
				moved = append(moved, planned(a.Plan, st.inbox)...)
				for _, id := range moved {
					if since != nil {
						since[id] = true
					}
					if !failed {
						st.moved[id] = content[id]
					}
				}
				st.verified = false
			case agent.ActFinalAnswer:
				st.refused = true // still asked: it was refused
			}
		}
	}
	for _, task := range st.inbox {
		if !since[task.id] {
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
