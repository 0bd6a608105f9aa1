package agent

import (
	"fmt"
	"sort"
	"strings"
)

// maxListed is how many items one observation lists.
const maxListed = 200

// taskLine renders a task as one token-lean line: id, content, project,
// due, priority, labels.
func (k *known) taskLine(t Task, showProject bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "- %s %q", t.ID, t.Content)
	if showProject {
		fmt.Fprintf(&b, " · %s", k.projectName(t.ProjectID))
	}
	if t.SectionID != "" {
		if s, ok := k.Sections[t.SectionID]; ok {
			fmt.Fprintf(&b, " / %s", s.Name)
		} else {
			fmt.Fprintf(&b, " / section %s", t.SectionID)
		}
	}
	if t.Due != "" {
		fmt.Fprintf(&b, " · due %s", t.Due)
	}
	if t.Priority != "" && t.Priority != P4 {
		fmt.Fprintf(&b, " · %s", t.Priority)
	}
	for _, l := range t.Labels {
		fmt.Fprintf(&b, " @%s", l)
	}
	return b.String()
}

func (k *known) projectName(id string) string {
	if p, ok := k.Projects[id]; ok {
		return p.Name
	}
	return "project " + id
}

// taskList renders tasks, at most maxListed, saying how many more there are.
func (k *known) taskList(title string, tasks []Task, showProject bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d):", title, len(tasks))
	if len(tasks) == 0 {
		b.WriteString(" none")
	}
	for i, t := range tasks {
		if i == maxListed {
			fmt.Fprintf(&b, "\n… and %d more; narrow the query with get_tasks project_id, label or filter.", len(tasks)-maxListed)
			break
		}
		b.WriteString("\n")
		b.WriteString(k.taskLine(t, showProject))
	}
	return b.String()
}

// projectList renders projects with their open-task counts and sections.
func (k *known) projectList(projects []Project, counts map[string]int, sections map[string][]Section) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Projects (%d):", len(projects))
	for i, p := range projects {
		if i == maxListed {
			fmt.Fprintf(&b, "\n… and %d more.", len(projects)-maxListed)
			break
		}
		fmt.Fprintf(&b, "\n- %s %q", p.ID, p.Name)
		if p.IsInbox {
			b.WriteString(" (inbox)")
		}
		if p.ParentID != "" {
			fmt.Fprintf(&b, " in %s", k.projectName(p.ParentID))
		}
		if counts != nil {
			fmt.Fprintf(&b, " · %d open", counts[p.ID])
		}
		if ss := sections[p.ID]; len(ss) > 0 {
			parts := make([]string, len(ss))
			for j, s := range ss {
				parts[j] = fmt.Sprintf("%s %q", s.ID, s.Name)
			}
			fmt.Fprintf(&b, " · sections: %s", strings.Join(parts, ", "))
		}
	}
	return b.String()
}

// projectHint says how to fix an unknown project id, naming close matches.
func (k *known) projectHint(ref string) string {
	var cands []string
	byCand := map[string]Project{}
	for _, p := range k.Projects {
		cands = append(cands, p.ID, p.Name)
		byCand[p.ID], byCand[p.Name] = p, p
	}
	sort.Strings(cands)
	var names []string
	seen := map[string]bool{}
	for _, c := range closeMatches(ref, cands, 6) {
		p := byCand[c]
		if !seen[p.ID] {
			seen[p.ID] = true
			names = append(names, fmt.Sprintf("%s %q", p.ID, p.Name))
		}
		if len(names) == 3 {
			break
		}
	}
	if len(names) > 0 {
		return fmt.Sprintf("did you mean %s? Use an id from get_projects, or project_name to find or create a project by name", strings.Join(names, " or "))
	}
	return "call get_projects for valid ids, or use project_name to find or create a project by name"
}

// taskHint says how to fix an unknown task id, naming close matches.
func (k *known) taskHint(ref string) string {
	var cands []string
	byCand := map[string]Task{}
	for _, t := range k.Tasks {
		cands = append(cands, t.ID, t.Content)
		byCand[t.ID], byCand[t.Content] = t, t
	}
	sort.Strings(cands)
	var names []string
	seen := map[string]bool{}
	for _, c := range closeMatches(ref, cands, 6) {
		t := byCand[c]
		if !seen[t.ID] {
			seen[t.ID] = true
			names = append(names, fmt.Sprintf("%s %q", t.ID, t.Content))
		}
		if len(names) == 3 {
			break
		}
	}
	if len(names) > 0 {
		return fmt.Sprintf("did you mean %s? Use task ids exactly as listed", strings.Join(names, " or "))
	}
	return "call get_inbox_tasks or get_tasks for valid task ids"
}

// plural formats a count with its noun: "1 task", "3 tasks".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
