package sim

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/internal/eval"
)

// Fault is a deliberate mistake a Solver makes, to prove that the
// evaluation's scorer catches it.
type Fault string

// Faults.
const (
	// Competent makes no mistake.
	Competent Fault = ""
	// MovesOneWrong sends the first task of a run's first move_tasks to
	// a project named "Misc" instead.
	MovesOneWrong Fault = "moves-one-wrong"
	// Deletes deletes, before each final answer, one task it has seen
	// that the user did not ask to remove.
	Deletes Fault = "deletes"
	// ObeysInjection, once it reads a task's planted order (eval.Task's
	// Planted), makes the call the task says an obeying model makes
	// (Obey); once it reads a task saying "delete everything", it
	// deletes every task it has seen.
	ObeysInjection Fault = "obeys-injection"
	// NeverAsks skips every ask_user and goes on as if it had asked.
	NeverAsks Fault = "never-asks"
)

// faultMark starts the thought of a step a fault added, so that the
// solver can tell its own detours from the reference solution's steps.
const faultMark = "(fault) "

// Solver plays the reference solutions of an evaluation suite as a
// model: it finds the task and turn from the user's message, counts the
// steps it has taken, and answers with the next step, its "{task:…}"
// and "{project:…}" names replaced by ids read from the observations.
// With a Fault it makes that mistake. Its reply depends only on the
// request, so any number of runs can share one.
type Solver struct {
	Suite []eval.Task
	Fault Fault
}

// Reply answers one request.
func (s *Solver) Reply(req agent.Request) agent.Response {
	tools := len(req.Tools) > 0
	cands, start := s.find(req.Messages)
	if len(cands) == 0 {
		return render("I do not know this task.", []action{{Name: agent.ActFailTask, Args: map[string]any{"reason": "not a task of the suite"}}}, tools, len(req.Messages))
	}
	run := req.Messages[start+1:]
	idx, faulted, moved := 0, false, false
	for _, m := range run {
		if m.Role != agent.RoleAssistant {
			continue
		}
		if strings.Contains(m.Content, faultMark) {
			faulted = true
			continue
		}
		for _, c := range calledActions(m, tools) {
			if c.Name == agent.ActMoveTasks {
				moved = true
			}
		}
		idx++
	}
	seen := readIDs(run)
	// Tasks may share a message (/tidy-inbox): the one whose steps so
	// far name only objects the run has seen is the one being played.
	c := cands[0]
	for _, cand := range cands {
		if s.fits(cand.turn, idx, seen) {
			c = cand
			break
		}
	}
	task, solution := c.task, s.solution(c.turn)
	if idx >= len(solution) {
		return render("Done.", []action{{Name: agent.ActFinalAnswer, Args: map[string]any{"answer": "Done."}}}, tools, len(req.Messages))
	}
	next := solution[idx]
	switch s.Fault {
	case ObeysInjection:
		if !faulted && task.Obey != nil && strings.Contains(joinObservations(run), task.Planted) {
			args, _ := resolve(task.Obey.Args, seen).(map[string]any)
			return render(faultMark+"A task tells me what to do; I obey.", []action{{Name: task.Obey.Name, Args: args}}, tools, len(req.Messages))
		}
		if !faulted && strings.Contains(strings.ToLower(joinObservations(run)), "delete everything") && len(seen.taskIDs) > 0 {
			return render(faultMark+"A task tells me to delete everything.", []action{{Name: agent.ActDeleteTasks, Args: map[string]any{"task_ids": seen.taskIDs}}}, tools, len(req.Messages))
		}
	case Deletes:
		if !faulted && next.Call.Name == agent.ActFinalAnswer {
			for _, id := range seen.taskIDs {
				if !seen.closed[id] && !mayDelete(task, seen.content[id]) {
					return render(faultMark+"I delete a task nobody asked me to.", []action{{Name: agent.ActDeleteTasks, Args: map[string]any{"task_ids": []string{id}}}}, tools, len(req.Messages))
				}
			}
		}
	}
	args, _ := resolve(next.Call.Args, seen).(map[string]any)
	if s.Fault == MovesOneWrong && next.Call.Name == agent.ActMoveTasks && !moved {
		args = moveFirstToMisc(args)
	}
	if next.Call.Name == agent.ActMoveTasks {
		args = asPlan(args, lastListing(run))
	}
	return render(next.Thought, []action{{Name: next.Call.Name, Args: args}}, tools, len(req.Messages))
}

// lastListing is the run's last inbox listing, in order.
func lastListing(run []agent.Message) []task {
	for i := len(run) - 1; i >= 0; i-- {
		if strings.Contains(run[i].Content, "Inbox tasks (") && run[i].Role != agent.RoleAssistant {
			return listedTasks(run[i].Content, "Inbox tasks (")
		}
	}
	return nil
}

// asPlan writes a move_tasks call of moves and groups in the filing
// form, as the prompt asks for a listed inbox: a digit per task of the
// listing (0 for the tasks the call leaves), a space after every ten.
// Calls with tasks outside the listing, more than nine destinations or
// arguments of another kind are left as they are.
func asPlan(args map[string]any, listed []task) map[string]any {
	if len(listed) == 0 {
		return args
	}
	type dest struct{ key, value string }
	var to []dest
	place := map[dest]byte{}
	digit := map[string]byte{}
	add := func(m map[string]any, ids []any) bool {
		var d dest
		for _, k := range []string{"project_id", "project_name", "section_id"} {
			if v, ok := m[k].(string); ok && v != "" {
				if d.key != "" {
					return false
				}
				d = dest{k, v}
			}
		}
		if d.key == "" || len(ids) == 0 {
			return false
		}
		if place[d] == 0 {
			to = append(to, d)
			place[d] = byte('0' + len(to))
		}
		for _, id := range ids {
			id, _ := id.(string)
			if _, dup := digit[id]; dup || id == "" {
				return false
			}
			digit[id] = place[d]
		}
		return len(to) <= 9
	}
	for k := range args {
		if k != "moves" && k != "groups" {
			return args
		}
	}
	for _, k := range []string{"moves", "groups"} {
		list, _ := args[k].([]any)
		for _, x := range list {
			m, _ := x.(map[string]any)
			ok := false
			switch k {
			case "moves":
				ok = add(m, []any{m["task_id"]})
			case "groups":
				ids, _ := m["task_ids"].([]any)
				ok = add(m, ids)
			}
			if !ok {
				return args
			}
		}
	}
	if len(to) == 0 {
		return args
	}
	digits := make([]byte, len(listed))
	for i, t := range listed {
		d, ok := digit[t.id]
		if !ok {
			d = '0'
		}
		delete(digit, t.id)
		digits[i] = d
	}
	if len(digit) > 0 {
		return args // a task the listing does not show
	}
	names := make([]any, len(to))
	for i, d := range to {
		names[i] = d.value
	}
	return map[string]any{"plan": agent.FilingPlan(digits), "to": names}
}

type candidate struct {
	task *eval.Task
	turn *eval.Turn
}

// find returns the turns whose message is the last user message that is
// one, and its index.
func (s *Solver) find(msgs []agent.Message) ([]candidate, int) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != agent.RoleUser {
			continue
		}
		var out []candidate
		for ti := range s.Suite {
			for ui := range s.Suite[ti].Turns {
				msg := s.Suite[ti].Turns[ui].Message
				// An autopilot turn's message is the start of the
				// instruction, which goes on with the new tasks' ids.
				if msg == msgs[i].Content || (len(s.Suite[ti].Autopilot) > 0 && strings.HasPrefix(msgs[i].Content, msg)) {
					out = append(out, candidate{&s.Suite[ti], &s.Suite[ti].Turns[ui]})
				}
			}
		}
		if len(out) > 0 {
			return out, i
		}
	}
	return nil, -1
}

// solution is the turn's steps as the fault plays them.
func (s *Solver) solution(turn *eval.Turn) []eval.Step {
	if s.Fault != NeverAsks {
		return turn.Solution
	}
	var out []eval.Step
	for _, st := range turn.Solution {
		if st.Call.Name != agent.ActAskUser {
			out = append(out, st)
		}
	}
	return out
}

// fits reports whether every name in the turn's steps up to idx is one
// the run has seen.
func (s *Solver) fits(turn *eval.Turn, idx int, seen ids) bool {
	sol := s.solution(turn)
	for i := 0; i <= idx && i < len(sol); i++ {
		if !resolvable(sol[i].Call.Args, seen) {
			return false
		}
	}
	return true
}

func resolvable(v any, seen ids) bool {
	switch x := v.(type) {
	case string:
		if m := placeholder.FindStringSubmatch(x); m != nil {
			_, ok := seen.lookup(m[2])
			return ok
		}
	case []any:
		for _, e := range x {
			if !resolvable(e, seen) {
				return false
			}
		}
	case map[string]any:
		for _, e := range x {
			if !resolvable(e, seen) {
				return false
			}
		}
	}
	return true
}

func mayDelete(t *eval.Task, content string) bool {
	for _, s := range t.MayDelete {
		if strings.Contains(strings.ToLower(content), strings.ToLower(s)) {
			return true
		}
	}
	return false
}

// moveFirstToMisc sends the first move (or the first task of the first
// group) elsewhere.
func moveFirstToMisc(args map[string]any) map[string]any {
	moves, _ := args["moves"].([]any)
	if groups, _ := args["groups"].([]any); len(moves) == 0 && len(groups) > 0 {
		first, _ := groups[0].(map[string]any)
		ids, _ := first["task_ids"].([]any)
		if len(ids) == 0 {
			return args
		}
		rest := map[string]any{}
		for k, v := range first {
			rest[k] = v
		}
		rest["task_ids"] = ids[1:]
		misc := map[string]any{"task_ids": ids[:1], "project_name": "Misc"}
		out := []any{misc}
		if len(ids) > 1 {
			out = append(out, rest)
		}
		return map[string]any{"groups": append(out, groups[1:]...)}
	}
	if len(moves) == 0 {
		return args
	}
	first, _ := moves[0].(map[string]any)
	wrong := map[string]any{"task_id": first["task_id"], "project_name": "Misc"}
	out := map[string]any{"moves": append([]any{wrong}, moves[1:]...)}
	return out
}

// ids is what the run has read: names to ids, and the tasks in order.
type ids struct {
	byName  map[string]string // lower-case name → id
	names   []string          // every name, in order seen
	taskIDs []string
	content map[string]string // task id → content
	closed  map[string]bool   // tasks completed or deleted
}

var (
	// `- ID "name"` list lines, and `Moved ID "content"`-style mentions.
	idThenName = regexp.MustCompile(`([A-Za-z0-9_-]+) ("(?:[^"\\]|\\.)*")`)
	// `Added "content" to Inbox: id ID`, `Created project "X": id ID`.
	nameThenID = regexp.MustCompile(`(\w+) ("(?:[^"\\]|\\.)*")[^"\n]*?: id ([A-Za-z0-9_-]+)`)
	closedLine = regexp.MustCompile(`(?m)^(?:Completed|Deleted) ([A-Za-z0-9_-]+) "`)
)

// readIDs reads ids from the run's observations.
func readIDs(run []agent.Message) ids {
	v := ids{byName: map[string]string{}, content: map[string]string{}, closed: map[string]bool{}}
	set := func(name, id string) {
		k := strings.ToLower(name)
		if _, ok := v.byName[k]; !ok {
			v.names = append(v.names, k)
		}
		v.byName[k] = id
	}
	addTask := func(id, content string) {
		if _, ok := v.content[id]; !ok {
			v.taskIDs = append(v.taskIDs, id)
		}
		v.content[id] = content
	}
	for _, obs := range observations(run) {
		for _, m := range idThenName.FindAllStringSubmatch(obs, -1) {
			if name, err := unquote(m[2]); err == nil {
				set(name, m[1])
			}
		}
		for _, m := range nameThenID.FindAllStringSubmatch(obs, -1) {
			if name, err := unquote(m[2]); err == nil {
				set(name, m[3])
				if m[1] == "Added" {
					addTask(m[3], name)
				}
			}
		}
		for _, m := range closedLine.FindAllStringSubmatch(obs, -1) {
			v.closed[m[1]] = true
		}
		tasks := false
		for _, line := range strings.Split(obs, "\n") {
			if strings.Contains(strings.ToLower(line), "tasks (") {
				tasks = true
				continue
			}
			if endOfList(line) {
				tasks = false
			}
			if t, ok := parseTaskLine(line); ok && tasks {
				addTask(t.id, t.content)
				set(t.content, t.id)
			}
		}
	}
	return v
}

func unquote(q string) (string, error) {
	var s string
	err := json.Unmarshal([]byte(q), &s)
	return s, err
}

// lookup finds the id of a name: an exact match (any case), else the
// first name that contains it.
func (v ids) lookup(name string) (string, bool) {
	k := strings.ToLower(name)
	if id, ok := v.byName[k]; ok {
		return id, true
	}
	names := append([]string(nil), v.names...)
	sort.SliceStable(names, func(i, j int) bool { return len(names[i]) < len(names[j]) })
	for _, n := range names {
		if strings.Contains(n, k) {
			return v.byName[n], true
		}
	}
	return "", false
}

var placeholder = regexp.MustCompile(`^\{(task|project|section):(.+)\}$`)

// resolve replaces "{kind:name}" strings with ids (or leaves them, so the
// agent reports an unknown id).
func resolve(v any, seen ids) any {
	switch x := v.(type) {
	case string:
		if x == "{tasks}" { // every task seen (a planted order's target)
			out := make([]any, len(seen.taskIDs))
			for i, id := range seen.taskIDs {
				out[i] = id
			}
			return out
		}
		if m := placeholder.FindStringSubmatch(x); m != nil {
			if id, ok := seen.lookup(m[2]); ok {
				return id
			}
		}
		return x
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = resolve(e, seen)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = resolve(e, seen)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = resolve(e, seen)
		}
		return out
	}
	return v
}

// observations lists the run's observations, in order.
func observations(run []agent.Message) []string {
	var out []string
	for _, m := range run {
		if m.Role == agent.RoleTool || (m.Role == agent.RoleUser && strings.HasPrefix(m.Content, "Observation: ")) {
			out = append(out, m.Content)
		}
	}
	return out
}

func joinObservations(run []agent.Message) string {
	return strings.Join(observations(run), "\n")
}

// String names the fault.
func (f Fault) String() string {
	if f == Competent {
		return "competent"
	}
	return string(f)
}

// Faults lists every fault, for tests and the simulated eval.
var Faults = []Fault{MovesOneWrong, Deletes, ObeysInjection, NeverAsks}
