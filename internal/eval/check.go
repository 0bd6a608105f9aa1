package eval

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// World is what a task is scored on: the account before and after, the
// user's clock and zone, and what the agent answered.
type World struct {
	Start, Final todoisttest.State
	Loc          *time.Location
	Now          time.Time
	// Answer joins the final answers of every turn.
	Answer string
}

// Predicate is one condition of a goal state. Check returns nil when it
// holds, else an error whose message is the difference, in one line.
type Predicate interface {
	Check(w *World) error
}

type predicate func(w *World) error

func (p predicate) Check(w *World) error { return p(w) }

func (w *World) projectName(id string) string {
	for _, p := range w.Final.Projects {
		if p.ID == id {
			return p.Name
		}
	}
	for _, p := range w.Start.Projects {
		if p.ID == id {
			return p.Name + " (deleted)"
		}
	}
	return "project " + id
}

func (w *World) inboxID() string {
	for _, p := range w.Final.Projects {
		if p.IsInbox {
			return p.ID
		}
	}
	return ""
}

func like(content, sel string) bool {
	return strings.Contains(strings.ToLower(content), strings.ToLower(sel))
}

// open returns the open tasks whose content holds sel (any case).
func (w *World) open(sel string) []todoisttest.Task {
	var out []todoisttest.Task
	for _, t := range w.Final.Tasks {
		if !t.Checked && like(t.Content, sel) {
			out = append(out, t)
		}
	}
	return out
}

// one returns the one open task like sel.
func (w *World) one(sel string) (todoisttest.Task, error) {
	ts := w.open(sel)
	for _, t := range ts {
		if strings.EqualFold(t.Content, sel) {
			return t, nil // an exact name wins over names that contain it
		}
	}
	switch len(ts) {
	case 1:
		return ts[0], nil
	case 0:
		for _, t := range w.Final.Tasks {
			if like(t.Content, sel) {
				return t, fmt.Errorf("%q was completed, want it open", t.Content)
			}
		}
		return todoisttest.Task{}, fmt.Errorf("no open task like %q", sel)
	}
	return todoisttest.Task{}, fmt.Errorf("%d open tasks like %q, want 1 (%s)", len(ts), sel, contents(ts, 3))
}

func contents(ts []todoisttest.Task, n int) string {
	var qs []string
	for i, t := range ts {
		if i == n {
			qs = append(qs, fmt.Sprintf("and %d more", len(ts)-n))
			break
		}
		qs = append(qs, fmt.Sprintf("%q", t.Content))
	}
	return strings.Join(qs, ", ")
}

// InProject: the one open task like sel is in the project named project
// (any case).
func InProject(sel, project string) Predicate {
	return predicate(func(w *World) error {
		t, err := w.one(sel)
		if err != nil {
			return err
		}
		if got := w.projectName(t.ProjectID); !strings.EqualFold(got, project) {
			return fmt.Errorf("%q is in %s, want %s", t.Content, got, project)
		}
		return nil
	})
}

// AllIn: every open task like sel is in the project named project (any
// case), and there is at least one.
func AllIn(sel, project string) Predicate {
	return predicate(func(w *World) error {
		ts := w.open(sel)
		if len(ts) == 0 {
			return fmt.Errorf("no open task like %q", sel)
		}
		for _, t := range ts {
			if got := w.projectName(t.ProjectID); !strings.EqualFold(got, project) {
				return fmt.Errorf("%q is in %s, want %s", t.Content, got, project)
			}
		}
		return nil
	})
}

// InSection: the one open task like sel is in that section of that project.
func InSection(sel, project, section string) Predicate {
	return predicate(func(w *World) error {
		if err := InProject(sel, project).Check(w); err != nil {
			return err
		}
		t, _ := w.one(sel)
		for _, s := range w.Final.Sections {
			if s.ID == t.SectionID {
				if !strings.EqualFold(s.Name, section) {
					return fmt.Errorf("%q is in section %s, want %s", t.Content, s.Name, section)
				}
				return nil
			}
		}
		return fmt.Errorf("%q is in no section of %s, want %s", t.Content, project, section)
	})
}

// Grouped: the open tasks like each selector are together in one project
// (not the Inbox), and different selectors are in different projects.
func Grouped(sels ...string) Predicate {
	return predicate(func(w *World) error {
		owner := map[string]string{} // project id → selector
		for _, sel := range sels {
			ts := w.open(sel)
			if len(ts) == 0 {
				return fmt.Errorf("no open task like %q", sel)
			}
			pid := ts[0].ProjectID
			for _, t := range ts {
				if t.ProjectID == w.inboxID() {
					return fmt.Errorf("%q is still in the Inbox", t.Content)
				}
				if t.ProjectID != pid {
					return fmt.Errorf("the %q tasks are split: %q is in %s, %q in %s", sel, ts[0].Content, w.projectName(pid), t.Content, w.projectName(t.ProjectID))
				}
			}
			if other, ok := owner[pid]; ok {
				return fmt.Errorf("the %q and %q tasks share %s, want separate projects", other, sel, w.projectName(pid))
			}
			owner[pid] = sel
		}
		return nil
	})
}

// InboxEmpty: no open task is left in the Inbox.
func InboxEmpty() Predicate {
	return predicate(func(w *World) error {
		var left []todoisttest.Task
		for _, t := range w.Final.Tasks {
			if !t.Checked && t.ProjectID == w.inboxID() {
				left = append(left, t)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("the Inbox still holds %d tasks (%s)", len(left), contents(left, 3))
		}
		return nil
	})
}

// Completed: a task like sel was completed (and not deleted).
func Completed(sel string) Predicate {
	return predicate(func(w *World) error {
		if ts := w.open(sel); len(ts) > 0 {
			return fmt.Errorf("%q is still open, want it completed", ts[0].Content)
		}
		for _, t := range w.Final.Tasks {
			if t.Checked && like(t.Content, sel) {
				return nil
			}
		}
		return fmt.Errorf("no task like %q exists (deleted?), want it completed", sel)
	})
}

// Gone: no open task like sel (completed or deleted).
func Gone(sel string) Predicate {
	return predicate(func(w *World) error {
		if ts := w.open(sel); len(ts) > 0 {
			return fmt.Errorf("%q is still open, want it gone", ts[0].Content)
		}
		return nil
	})
}

// Open: exactly one open task like sel.
func Open(sel string) Predicate {
	return predicate(func(w *World) error {
		_, err := w.one(sel)
		return err
	})
}

// localDue returns a due date as the user's wall date and "HH:MM"
// (empty for a full-day date).
func (w *World) localDue(d *todoisttest.Due) (date, clock string) {
	if d == nil {
		return "", ""
	}
	if len(d.Date) == len(time.DateOnly) {
		return d.Date, ""
	}
	if strings.HasSuffix(d.Date, "Z") { // fixed in time: show it in the user's zone
		t, err := time.Parse(time.RFC3339, d.Date)
		if err != nil {
			return d.Date, ""
		}
		t = t.In(w.Loc)
		return t.Format(time.DateOnly), t.Format("15:04")
	}
	t, err := time.Parse("2006-01-02T15:04:05", d.Date)
	if err != nil {
		return d.Date, ""
	}
	return t.Format(time.DateOnly), t.Format("15:04")
}

// Due: the one open task like sel is due on date ("2026-06-12") in the
// user's zone, at clock ("17:00") or, when clock is "", on that day (a
// time of day is then allowed).
func Due(sel, date, clock string) Predicate {
	return predicate(func(w *World) error {
		t, err := w.one(sel)
		if err != nil {
			return err
		}
		gd, gc := w.localDue(t.Due)
		want := strings.TrimSpace(date + " " + clock)
		if gd == "" {
			return fmt.Errorf("%q has no due date, want %s (%s)", t.Content, want, w.Loc)
		}
		if gd != date || (clock != "" && gc != clock) {
			return fmt.Errorf("%q is due %s, want %s (%s)", t.Content, strings.TrimSpace(gd+" "+gc), want, w.Loc)
		}
		return nil
	})
}

// Priority: the one open task like sel has one of the priorities ("p1").
func Priority(sel string, want ...string) Predicate {
	return predicate(func(w *World) error {
		t, err := w.one(sel)
		if err != nil {
			return err
		}
		if got := userPriority(t.Priority); !slices.Contains(want, got) {
			return fmt.Errorf("%q has priority %s, want %s", t.Content, got, strings.Join(want, " or "))
		}
		return nil
	})
}

// Sections: the project has exactly n sections named name (any case).
func Sections(project, name string, n int) Predicate {
	return predicate(func(w *World) error {
		got := 0
		for _, s := range w.Final.Sections {
			if strings.EqualFold(s.Name, name) && strings.EqualFold(w.projectName(s.ProjectID), project) {
				got++
			}
		}
		if got != n {
			return fmt.Errorf("%s has %d sections named %q, want %d", project, got, name, n)
		}
		return nil
	})
}

// NoDuplicateProjects: no two active projects share a name (any case).
func NoDuplicateProjects() Predicate {
	return predicate(func(w *World) error {
		seen := map[string]int{}
		for _, p := range w.Final.Projects {
			if p.IsArchived {
				continue
			}
			k := strings.ToLower(strings.TrimSpace(p.Name))
			if seen[k]++; seen[k] == 2 {
				return fmt.Errorf("two projects are named %q", p.Name)
			}
		}
		return nil
	})
}

// Unchanged: every task of the seed like one of sels is as it was
// (content, project, section, due, priority, labels, open).
func Unchanged(sels ...string) Predicate {
	return UnchangedWhere(func(t todoisttest.Task) bool {
		return slices.ContainsFunc(sels, func(s string) bool { return like(t.Content, s) })
	})
}

// UnchangedWhere: every task of the seed that keep selects is as it was.
func UnchangedWhere(keep func(todoisttest.Task) bool) Predicate {
	return predicate(func(w *World) error {
		final := map[string]todoisttest.Task{}
		for _, t := range w.Final.Tasks {
			final[t.ID] = t
		}
		for _, old := range w.Start.Tasks {
			if !keep(old) {
				continue
			}
			t, ok := final[old.ID]
			if !ok {
				return fmt.Errorf("%q was deleted, want it unchanged", old.Content)
			}
			if diff := w.taskDiff(old, t); diff != "" {
				return fmt.Errorf("%q changed (%s), want it unchanged", old.Content, diff)
			}
		}
		return nil
	})
}

func (w *World) taskDiff(a, b todoisttest.Task) string {
	var d []string
	if a.Content != b.Content {
		d = append(d, fmt.Sprintf("content %q → %q", a.Content, b.Content))
	}
	if a.ProjectID != b.ProjectID {
		d = append(d, fmt.Sprintf("project %s → %s", w.projectName(a.ProjectID), w.projectName(b.ProjectID)))
	}
	if a.SectionID != b.SectionID {
		d = append(d, "section changed")
	}
	ad, ac := w.localDue(a.Due)
	bd, bc := w.localDue(b.Due)
	if ad != bd || ac != bc {
		d = append(d, fmt.Sprintf("due %q → %q", strings.TrimSpace(ad+" "+ac), strings.TrimSpace(bd+" "+bc)))
	}
	if a.Priority != b.Priority {
		d = append(d, fmt.Sprintf("priority %s → %s", userPriority(a.Priority), userPriority(b.Priority)))
	}
	if !slices.Equal(a.Labels, b.Labels) {
		d = append(d, fmt.Sprintf("labels %v → %v", a.Labels, b.Labels))
	}
	if a.Checked != b.Checked {
		d = append(d, "completed")
	}
	return strings.Join(d, ", ")
}

// AnswerNames: the final answer mentions each name (any case).
func AnswerNames(names ...string) Predicate {
	return predicate(func(w *World) error {
		for _, n := range names {
			if !like(w.Answer, n) {
				return fmt.Errorf("the answer does not name %q", n)
			}
		}
		return nil
	})
}

// AnswerOmits: the final answer mentions none of the names (any case).
func AnswerOmits(names ...string) Predicate {
	return predicate(func(w *World) error {
		for _, n := range names {
			if like(w.Answer, n) {
				return fmt.Errorf("the answer names %q, which it should not", n)
			}
		}
		return nil
	})
}
