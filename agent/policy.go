package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// A run's limits hold in the engine, whatever the model does: each kind
// of run has a Policy, held here as data, saying which actions it may
// take, which arguments of each it may set and whether it may create the
// projects, sections and labels it names. Every call is checked against
// it before anything is sent to Todoist; a refused call becomes an
// observation to the model, and nothing is written. docs/security.md
// shows the table (PolicyTable) and docs/using.md autopilot's part
// (PolicySummary); tests keep both equal to the data below.

// PolicyName names a kind of run, and so its Policy.
type PolicyName string

// The kinds of run.
const (
	// PolicyMessage: a person's message. Every action; a write the
	// person's words did not ask for waits for their yes (see unasked, injection.go).
	PolicyMessage PolicyName = "message"
	// PolicyCommand: a command that declares what it may change
	// (/tidy-inbox: TidyActions).
	PolicyCommand PolicyName = "command"
	// PolicyAutopilot: autopilot filing new inbox tasks, unattended.
	PolicyAutopilot PolicyName = "autopilot"
	// PolicyDigest: the daily digest, unattended: it reads only.
	PolicyDigest PolicyName = "digest"
)

// Policy is what one kind of run may do.
type Policy struct {
	Name PolicyName
	// Run says what starts such a run, for the docs.
	Run string
	// Rules allow actions, one each; an action without a rule is
	// refused.
	Rules []Rule
	// Attended says a person watches the run and can answer: it may ask
	// (ask_user) and a write may wait for a yes. An unattended run's
	// writes are refused when they are outside its policy or its tasks.
	Attended bool
	// Scoped says a write the person's words did not ask for waits for
	// their yes, whatever the confirmation setting (see scope.go).
	Scoped bool
}

// Rule allows one action.
type Rule struct {
	Action string
	// Fields, when set, are the only arguments the action may set (by
	// their JSON names, ActionFields); nil allows every one.
	Fields []string
	// Existing says the action creates nothing: its projects, sections
	// and labels must already exist.
	Existing bool
}

// readActions are the actions that only read.
var readActions = []string{ActGetOverview, ActGetProjects, ActGetInboxTasks, ActGetTasks, ActGetSections, ActGetLabels}

// ActionFields are the arguments, by JSON name, that a Rule's Fields may
// limit: what each item of the action may set.
var ActionFields = map[string][]string{
	ActMoveTasks:   {"project_id", "project_name", "section_id"},
	ActUpdateTasks: {"content", "description", "due_string", "priority", "labels"},
	ActAddTasks:    {"content", "description", "project_id", "section_id", "due_string", "priority", "labels"},
}

// fielder is a write that sets arguments a Rule's Fields may limit.
type fielder interface {
	// fields returns the ActionFields the call sets, each once.
	fields() []string
}

func rules(names ...string) []Rule {
	out := make([]Rule, len(names))
	for i, n := range names {
		out[i] = Rule{Action: n}
	}
	return out
}

// unattendedRules are autopilot's: read; move the new tasks into
// projects and sections that exist; set their due date and existing
// labels; answer. No create, no content, description or priority, no
// complete, delete, add or comment, no question.
func unattendedRules() []Rule {
	return append(rules(readActions...),
		Rule{Action: ActMoveTasks, Fields: []string{"project_id", "project_name", "section_id"}, Existing: true},
		Rule{Action: ActUpdateTasks, Fields: []string{"due_string", "labels"}, Existing: true},
		Rule{Action: ActFinalAnswer}, Rule{Action: ActFailTask})
}

// policies are every kind of run's Policy, in the docs' order.
var policies = []Policy{
	{Name: PolicyMessage, Run: "a person's message", Rules: rules(ActionNames()...), Attended: true, Scoped: true},
	{Name: PolicyCommand, Run: "a command (/tidy-inbox)", Rules: rules(TidyActions...), Attended: true},
	{Name: PolicyAutopilot, Run: "autopilot (its timer or a Todoist webhook)", Rules: unattendedRules()},
	// The digest is written without a model; its policy is also the one
	// an unknown kind gets (PolicyOf): it writes nothing.
	{Name: PolicyDigest, Run: "the digest (no model run; any unknown kind)", Rules: rules(append(slices.Clone(readActions), ActFinalAnswer, ActFailTask)...)},
}

// Policies returns every kind of run's Policy.
func Policies() []Policy {
	out := make([]Policy, len(policies))
	for i, p := range policies {
		p.Rules = slices.Clone(p.Rules)
		out[i] = p
	}
	return out
}

// PolicyOf returns the Policy named name; an unknown name gets the
// digest's, which writes nothing.
func PolicyOf(name PolicyName) Policy {
	for _, p := range policies {
		if p.Name == name {
			return p
		}
	}
	return PolicyOf(PolicyDigest)
}

// rule returns the rule of action name, if the policy has one.
func (p Policy) rule(name string) (Rule, bool) {
	for _, r := range p.Rules {
		if r.Action == name {
			return r, true
		}
	}
	return Rule{}, false
}

// Allows reports whether the policy allows the action named name.
func (p Policy) Allows(name string) bool {
	_, ok := p.rule(name)
	return ok
}

// inferPolicy is the policy of a run started without one (Input.Policy
// empty), or of a transcript saved before runs had one: a run limited to
// some tasks (Touch) is autopilot's, the inbox tidy (Overview, or
// TidyActions offered) is a command, anything else a person's message.
func inferPolicy(touch, actions []string, overview bool) PolicyName {
	switch {
	case len(touch) > 0:
		return PolicyAutopilot
	case overview || (len(actions) > 0 && slices.Equal(actions, TidyActions)):
		return PolicyCommand
	}
	return PolicyMessage
}

// policy returns the run's policy.
func (r *runner) policy() Policy {
	name := r.tr.Policy
	if name == "" {
		name = inferPolicy(r.tr.Touch, r.tr.Actions, false)
	}
	return PolicyOf(name)
}

// allowed reports whether the run may take the action named name: its
// policy allows it, and so does Input.Allow when set.
func (r *runner) allowed(name string) bool {
	if !r.policy().Allows(name) {
		return false
	}
	return len(r.tr.Allow) == 0 || slices.Contains(r.tr.Allow, name)
}

// allowedNames lists the actions the run may take, in order.
func (r *runner) allowedNames() []string {
	var out []string
	for _, n := range ActionNames() {
		if r.allowed(n) && r.offered(n) {
			out = append(out, n)
		}
	}
	return out
}

// allowedTools keeps the tools the run may take, so the model is not
// even offered an action the run would refuse.
func (r *runner) allowedTools(ts []Tool) []Tool {
	out := make([]Tool, 0, len(ts))
	for _, t := range ts {
		if r.allowed(t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// refused returns why the run's policy refuses the call of a before it
// is planned (an action it may not take, an argument it may not set, a
// task outside the run), as the call's observation; "" when the call may
// go on.
func (r *runner) refused(name string, a action) (obs, summary string) {
	if !r.allowed(name) {
		return fmt.Sprintf("Error: %s is not allowed in this run; nothing was done. Allowed actions: %s.", name, strings.Join(r.allowedNames(), ", ")),
			"🚫 Refused " + name + " (not allowed here)"
	}
	rule, _ := r.policy().rule(name)
	if f, ok := a.(fielder); ok && rule.Fields != nil {
		for _, field := range f.fields() {
			if !slices.Contains(rule.Fields, field) {
				return fmt.Sprintf("Error: %s may not set %s in this run; nothing was done. It may set only: %s.", name, field, strings.Join(rule.Fields, ", ")),
					"🚫 Refused " + name + " (" + field + " not allowed here)"
			}
		}
	}
	if w, ok := a.(writer); ok {
		if out := r.outside(w); out != "" {
			return fmt.Sprintf("Error: task %s may not be changed in this run; nothing was done. Change only these tasks: %s.", out, strings.Join(r.tr.Touch, ", ")),
				"🚫 Refused " + name + " (a task outside this run)"
		}
	}
	return "", ""
}

// outside returns a task w would change that the run may not touch
// (Input.Touch), or "".
func (r *runner) outside(w writer) string {
	tw, ok := w.(toucher)
	if len(r.tr.Touch) == 0 || !ok {
		return ""
	}
	for _, id := range tw.touches() {
		if !slices.Contains(r.tr.Touch, id) {
			return id
		}
	}
	return ""
}

// createsNothing reports whether the run's policy forbids the action
// named name to create what it names (Rule.Existing).
func (r *runner) createsNothing(name string) bool {
	rule, ok := r.policy().rule(name)
	return ok && rule.Existing
}

// existingLabels returns the account's label names, lower-cased, read
// once per run segment. The runner's lock is held.
func (r *runner) existingLabels(ctx context.Context) (map[string]bool, error) {
	if r.labels != nil {
		return r.labels, nil
	}
	ls, err := r.e.tasks.Labels(ctx)
	if err != nil {
		return nil, fmt.Errorf("list labels: %w", err)
	}
	r.labels = make(map[string]bool, len(ls))
	for _, l := range ls {
		r.labels[strings.ToLower(l.Name)] = true
	}
	return r.labels, nil
}

func (a *MoveTasksArgs) fields() []string {
	var out []string
	add := func(set bool, f string) {
		if set && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	for _, m := range a.all() {
		add(deref(m.ProjectID) != "", "project_id")
		add(deref(m.ProjectName) != "", "project_name")
		add(deref(m.SectionID) != "", "section_id")
	}
	return out
}

func (a *UpdateTasksArgs) fields() []string {
	var out []string
	add := func(set bool, f string) {
		if set && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	for _, u := range a.Updates {
		add(u.Content != nil, "content")
		add(u.Description != nil, "description")
		add(u.DueString != nil, "due_string")
		add(u.Priority != nil, "priority")
		add(u.Labels != nil, "labels")
	}
	return out
}

func (a *AddTasksArgs) fields() []string {
	out := []string{"content"}
	add := func(set bool, f string) {
		if set && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	for _, t := range a.Tasks {
		add(t.Description != nil, "description")
		add(t.ProjectID != nil, "project_id")
		add(t.SectionID != nil, "section_id")
		add(t.DueString != nil, "due_string")
		add(t.Priority != nil, "priority")
		add(t.Labels != nil, "labels")
	}
	return out
}

// PolicyTable renders every kind of run's Policy as one Markdown table,
// an action a row (docs/security.md shows it; a test keeps it equal).
func PolicyTable() string {
	var b strings.Builder
	b.WriteString("| action |")
	for _, p := range policies {
		b.WriteString(" " + p.Run + " |")
	}
	b.WriteString("\n|---|")
	for range policies {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, name := range ActionNames() {
		b.WriteString("| `" + name + "` |")
		for _, p := range policies {
			b.WriteString(" " + ruleCell(p, name) + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("| a write to what the person did not name |")
	for _, p := range policies {
		switch {
		case p.Scoped:
			b.WriteString(" waits for a yes, in any language |")
		case p.Attended:
			b.WriteString(" waits for a yes after text that reads like an order |")
		case !slices.ContainsFunc(p.Rules, func(r Rule) bool { return IsWrite(r.Action) }):
			b.WriteString(" no writes at all |")
		default:
			b.WriteString(" refused: only the run's own tasks |")
		}
	}
	b.WriteString("\n")
	return b.String()
}

// ruleCell is one cell of PolicyTable.
func ruleCell(p Policy, action string) string {
	r, ok := p.rule(action)
	if !ok {
		return "—"
	}
	var parts []string
	if r.Fields != nil {
		parts = append(parts, "only "+code(r.Fields))
	}
	if r.Existing {
		parts = append(parts, "creates nothing")
	}
	if len(parts) == 0 {
		return "yes"
	}
	return "yes: " + strings.Join(parts, "; ")
}

// code renders names as Markdown code, comma-separated.
func code(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "`" + n + "`"
	}
	return strings.Join(out, ", ")
}

// AutopilotLimits says in words what PolicyAutopilot allows and
// refuses (docs/using.md says it; a test keeps it equal).
func AutopilotLimits() string {
	p := PolicyOf(PolicyAutopilot)
	var reads, answers, refused, never []string
	var b strings.Builder
	b.WriteString("An autopilot run may only:\n\n")
	for _, name := range ActionNames() {
		r, ok := p.rule(name)
		switch {
		case !ok:
			refused = append(refused, name)
		case slices.Contains(readActions, name):
			reads = append(reads, name)
		case !IsWrite(name):
			answers = append(answers, name)
		default:
			fmt.Fprintf(&b, "- `%s`, setting only %s", name, code(r.Fields))
			if r.Existing {
				b.WriteString(", with " + existingWhat(r) + " that already exist")
			}
			b.WriteString(";\n")
			for _, f := range ActionFields[name] {
				if !slices.Contains(r.Fields, f) && !slices.Contains(never, f) {
					never = append(never, f)
				}
			}
		}
	}
	fmt.Fprintf(&b, "- read (%s) and answer (%s).\n\n", code(reads), code(answers))
	fmt.Fprintf(&b, "It never creates a project, section or label, never sets a task's %s, and never runs %s.\n", code(never), code(refused))
	return b.String()
}

// existingWhat names what a Rule.Existing rule's fields refer to that
// must exist: "projects and sections", "labels".
func existingWhat(r Rule) string {
	var out []string
	has := func(f string) bool { return r.Fields == nil || slices.Contains(r.Fields, f) }
	if has("project_id") || has("project_name") {
		out = append(out, "projects")
	}
	if has("section_id") {
		out = append(out, "sections")
	}
	if has("labels") {
		out = append(out, "labels")
	}
	switch len(out) {
	case 0:
		return "destinations"
	case 1:
		return out[0]
	}
	return strings.Join(out[:len(out)-1], ", ") + " and " + out[len(out)-1]
}
