package agent

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The filing form of move_tasks. Naming every task of a 50-task inbox
// costs about four tokens a task ("t17",), most of a tidy's completion
// tokens, which a person waits for at a model's generation rate. The
// filing form names each task by its place in the last inbox listing
// instead: plan holds one digit a task, in the listing's order, digit k
// sending it to the k-th entry of to (0: leave it), so 50 tasks cost
// about 25 tokens. A model that loses count would file tasks into the
// wrong projects, so the form is checked before anything runs: the plan
// must hold exactly one digit per listed task, and where it is split by
// spaces, into groups of exactly ten (the last may be shorter), so that
// a digit dropped or doubled is caught within its ten. Every move is
// journaled and undone per task, as a grouped move is.

// filingGroup is the size of the groups a plan's spaces separate.
const filingGroup = 10

// FilingPlan writes digits, one per listed task, as move_tasks' plan
// asks for them: a space after every ten.
func FilingPlan(digits []byte) string {
	var b strings.Builder
	for i, d := range digits {
		if i > 0 && i%filingGroup == 0 {
			b.WriteByte(' ')
		}
		b.WriteByte(d)
	}
	return b.String()
}

// expandFiling turns a move_tasks call's plan and to into groups of task
// ids (to's aliases expanded), leaving other calls and calls without a
// plan unchanged. An error says what is wrong with the plan, for the
// model to repair.
func (k *known) expandFiling(name string, args json.RawMessage) (json.RawMessage, error) {
	if name != ActMoveTasks || !strings.Contains(string(args), `"plan"`) {
		return args, nil
	}
	var a MoveTasksArgs
	if err := json.Unmarshal(args, &a); err != nil || a.Plan == "" && len(a.To) == 0 {
		return args, nil
	}
	groups, err := k.filingGroups(a.Plan, a.To)
	if err != nil {
		return args, err
	}
	a.Groups = append(a.Groups, groups...)
	a.Plan, a.To = "", nil
	b, err := json.Marshal(a)
	if err != nil {
		return args, fmt.Errorf("encode the plan's moves: %w", err)
	}
	return b, nil
}

// filingGroups returns the moves plan and to stand for, grouped by
// destination in to's order.
func (k *known) filingGroups(plan string, to []string) ([]MoveGroup, error) {
	if plan == "" || len(to) == 0 {
		return nil, fmt.Errorf("move_tasks' plan and to go together: plan gives a digit per listed task, to the destinations of digits 1-%d", len(to))
	}
	if len(k.Listed) == 0 {
		return nil, fmt.Errorf("plan files the last inbox listing, and no listing with tasks was shown: call get_inbox_tasks first")
	}
	var digits []byte
	fields := strings.Fields(plan)
	for i, f := range fields {
		if len(fields) > 1 && (i < len(fields)-1 && len(f) != filingGroup || len(f) > filingGroup) {
			return nil, fmt.Errorf("plan's group %d (%s–%s) has %d digits, not %d: every group but the last holds ten, one per listed task, and the last at most ten",
				i+1, k.listedRef(i*filingGroup), k.listedRef(i*filingGroup+filingGroup-1), len(f), filingGroup)
		}
		for j := 0; j < len(f); j++ {
			if f[j] < '0' || f[j] > '9' {
				return nil, fmt.Errorf("plan holds %q: only digits 0-9 and spaces", f[j])
			}
		}
		digits = append(digits, f...)
	}
	if len(digits) != len(k.Listed) {
		return nil, fmt.Errorf("plan has %d digits for the %d tasks of the last inbox listing (%s–%s): give exactly one per task, in the listing's order",
			len(digits), len(k.Listed), k.listedRef(0), k.listedRef(len(k.Listed)-1))
	}
	dests := make([]MoveGroup, len(to))
	for i, d := range to {
		g := &dests[i]
		ref := strings.TrimSpace(d)
		if id := k.unalias(ref); id != "" {
			ref = id
		}
		switch _, sec := k.Sections[ref]; {
		case ref == "":
			return nil, fmt.Errorf("to[%d] is empty: give a project or section id, or a project name", i)
		case sec:
			g.SectionID = strp(ref)
		case k.isID(ref):
			g.ProjectID = strp(ref)
		case aliasShaped(ref):
			// A name would create a project called "p9": an alias the
			// run never gave is a wrong id, as in moves.
			if _, named := k.projectByName(ref); !named {
				return nil, fmt.Errorf("to[%d] is %s, an id no observation of this run gave: use the ids shown, or a project's name", i, ref)
			}
			g.ProjectName = strp(ref)
		default:
			g.ProjectName = strp(ref)
		}
	}
	for i, c := range digits {
		if c == '0' {
			continue
		}
		n := int(c - '0')
		if n > len(to) {
			return nil, fmt.Errorf("plan sends %s to destination %d, and to names only %d", k.listedRef(i), n, len(to))
		}
		dests[n-1].TaskIDs = append(dests[n-1].TaskIDs, k.Listed[i])
	}
	var out []MoveGroup
	for _, g := range dests {
		if len(g.TaskIDs) > 0 {
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("plan moves nothing: every digit is 0")
	}
	return out, nil
}

// aliasShaped reports whether s has the form of an alias: t, p or s,
// then digits.
func aliasShaped(s string) bool {
	if len(s) < 2 || !strings.ContainsRune("tps", rune(s[0])) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// listedRef names the i-th listed task as the model saw it.
func (k *known) listedRef(i int) string {
	i = min(max(i, 0), len(k.Listed)-1)
	id := k.Listed[i]
	if a := k.index().byID[id]; a != "" {
		return a
	}
	return id
}
