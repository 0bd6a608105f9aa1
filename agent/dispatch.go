package agent

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// readResult is what one read action produced.
type readResult struct {
	Obs     string
	Summary string
	// Fatal ends the run (a bad token, a retired endpoint).
	Fatal error
	// Listed, when set, is the inbox listing the observation shows,
	// which becomes known.Listed as the observation joins the
	// conversation (readAll, seed): reads run concurrently, so they do
	// not set it themselves.
	Listed []string
}

// fatalCode reports whether an error from Tasks cannot be fixed by the
// model and must end the run.
func fatalCode(err error) bool {
	switch ErrorCodeOf(err) {
	case ErrUnauthorized, ErrRetired, ErrUnreachable:
		return true
	}
	return false
}

// readError turns a read failure into an observation or a fatal error.
func (r *runner) readError(what string, err error) readResult {
	if fatalCode(err) {
		return readResult{Fatal: fmt.Errorf("%s: %w", what, err)}
	}
	return readResult{
		Obs:     fmt.Sprintf("Error: %s failed: %s.", what, ErrorMessageOf(err)),
		Summary: "⚠️ " + what + " failed",
	}
}

// The reads below are safe to run concurrently: what the run knows is
// touched only under r.mu.

func (*GetOverviewArgs) read(ctx context.Context, r *runner) readResult {
	snap, err := r.e.tasks.Snapshot(ctx)
	if err != nil {
		return r.readError("reading the overview", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := &r.tr.Known
	k.setProjects(snap.Projects)
	k.setSections(snap.Sections, "")
	k.setTasks(snap.Tasks, true)
	counts := map[string]int{}
	for _, t := range snap.Tasks {
		counts[t.ProjectID]++
	}
	bySection := map[string][]Section{}
	for _, s := range snap.Sections {
		bySection[s.ProjectID] = append(bySection[s.ProjectID], s)
	}
	var inbox []Task
	for _, t := range snap.Tasks {
		if t.ProjectID == k.InboxID {
			inbox = append(inbox, t)
		}
	}
	obs := k.projectList(snap.Projects, counts, bySection) + "\n" + k.inboxList(inbox)
	if len(snap.Labels) > 0 {
		obs += "\n" + labelList(snap.Labels)
	}
	return readResult{Obs: obs, Summary: fmt.Sprintf("🔎 Read the overview: %s, %s in the inbox", plural(len(snap.Projects), "project"), plural(len(inbox), "task")), Listed: shownIDs(inbox, maxInboxListed)}
}

func (*GetProjectsArgs) read(ctx context.Context, r *runner) readResult {
	ps, err := r.e.tasks.Projects(ctx)
	if err != nil {
		return r.readError("listing projects", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tr.Known.setProjects(ps)
	return readResult{Obs: r.tr.Known.projectList(ps, nil, nil), Summary: "🔎 Read " + plural(len(ps), "project")}
}

func (*GetInboxTasksArgs) read(ctx context.Context, r *runner) readResult {
	if r.e.incremental {
		// One small request, however big the inbox, instead of the
		// inbox's pages.
		snap, err := r.e.tasks.Snapshot(ctx)
		if err != nil {
			return r.readError("listing inbox tasks", err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.tr.Known.setProjects(snap.Projects)
		var ts []Task
		for _, t := range snap.Tasks {
			if t.ProjectID == r.tr.Known.InboxID {
				ts = append(ts, t)
			}
		}
		r.tr.Known.setTasks(ts, false)
		return readResult{Obs: r.tr.Known.inboxList(ts), Summary: "🔎 Read the inbox: " + plural(len(ts), "task"), Listed: shownIDs(ts, maxInboxListed)}
	}
	inbox, err := r.inboxID(ctx)
	if err != nil {
		return r.readError("finding the inbox", err)
	}
	ts, err := r.e.tasks.Tasks(ctx, TaskQuery{ProjectID: inbox})
	if err != nil {
		return r.readError("listing inbox tasks", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tr.Known.setTasks(ts, false)
	return readResult{Obs: r.tr.Known.inboxList(ts), Summary: "🔎 Read the inbox: " + plural(len(ts), "task"), Listed: shownIDs(ts, maxInboxListed)}
}

func (a *GetTasksArgs) read(ctx context.Context, r *runner) readResult {
	q := TaskQuery{ProjectID: deref(a.ProjectID), Label: deref(a.Label), Filter: deref(a.Filter)}
	if q.ProjectID != "" {
		id, msg := r.checkProject(q.ProjectID)
		if msg != "" {
			return readResult{Obs: "Error: " + msg + ".", Summary: "⚠️ Unknown project"}
		}
		q.ProjectID = id
	}
	ts, err := r.e.tasks.Tasks(ctx, q)
	if err != nil {
		return r.readError("listing tasks", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := &r.tr.Known
	k.setTasks(ts, false)
	res := readResult{Obs: k.taskList("Tasks", ts, q.ProjectID == ""), Summary: "🔎 Found " + plural(len(ts), "task")}
	if q.ProjectID != "" && q.ProjectID == k.InboxID && q.Label == "" && q.Filter == "" {
		// The inbox listed, in this list's order: what a plan's digits
		// now stand for, as after get_inbox_tasks.
		res.Listed = shownIDs(ts, maxListed)
	}
	return res
}

func (a *GetSectionsArgs) read(ctx context.Context, r *runner) readResult {
	id, msg := r.checkProject(a.ProjectID)
	if msg != "" {
		return readResult{Obs: "Error: " + msg + ".", Summary: "⚠️ Unknown project"}
	}
	ss, err := r.e.tasks.Sections(ctx, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	k := &r.tr.Known
	if err != nil {
		if ErrorCodeOf(err) == ErrNotFound {
			return readResult{Obs: fmt.Sprintf("Error: no project with id %s; %s.", id, k.projectHint(id)), Summary: "⚠️ Unknown project"}
		}
		return r.readError("listing sections", err)
	}
	k.setSections(ss, id)
	var b strings.Builder
	fmt.Fprintf(&b, "Sections of %s (%d):", k.projectName(id), len(ss))
	for _, s := range ss {
		fmt.Fprintf(&b, "\n- %s %q", s.ID, s.Name)
	}
	return readResult{Obs: b.String(), Summary: fmt.Sprintf("🔎 Read %s of %s", plural(len(ss), "section"), k.projectName(id))}
}

func (*GetLabelsArgs) read(ctx context.Context, r *runner) readResult {
	ls, err := r.e.tasks.Labels(ctx)
	if err != nil {
		return r.readError("listing labels", err)
	}
	return readResult{Obs: labelList(ls), Summary: "🔎 Read " + plural(len(ls), "label")}
}

func labelList(ls []Label) string {
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = "@" + l.Name
	}
	return fmt.Sprintf("Labels (%d): %s", len(ls), strings.Join(names, " "))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return strings.TrimSpace(*s)
}

// inboxID returns the Inbox's id, reading the projects if needed.
func (r *runner) inboxID(ctx context.Context) (string, error) {
	r.mu.Lock()
	id := r.tr.Known.InboxID
	r.mu.Unlock()
	if id != "" {
		return id, nil
	}
	ps, err := r.e.tasks.Projects(ctx)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tr.Known.setProjects(ps)
	if r.tr.Known.InboxID == "" {
		return "", &Error{Code: ErrNotFound, Message: "the account has no Inbox project"}
	}
	return r.tr.Known.InboxID, nil
}

// checkProject resolves a project reference ("inbox" or an id). When the
// run holds a fresh project list, an unknown id is reported without an API
// call, with close matches.
func (r *runner) checkProject(ref string) (id, problem string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := &r.tr.Known
	if strings.EqualFold(ref, "inbox") && k.InboxID != "" {
		return k.InboxID, ""
	}
	if _, ok := k.Projects[ref]; ok || !k.ProjectsFresh {
		return ref, ""
	}
	// A project name given as an id is forgiven when it matches exactly.
	if p, ok := k.projectByName(ref); ok {
		return p.ID, ""
	}
	return "", fmt.Sprintf("no project with id %s; %s", ref, k.projectHint(ref))
}

func (k *known) setProjects(ps []Project) {
	k.Projects = make(map[string]Project, len(ps))
	for _, p := range ps {
		k.Projects[p.ID] = p
		if p.IsInbox {
			k.InboxID = p.ID
		}
		k.suspect(p.Name)
	}
	k.ProjectsFresh = true
}

// setSections records sections; with a project id, that project's
// earlier sections are replaced.
func (k *known) setSections(ss []Section, projectID string) {
	if k.Sections == nil || projectID == "" {
		k.Sections = map[string]Section{}
	}
	for id, s := range k.Sections {
		if s.ProjectID == projectID {
			delete(k.Sections, id)
		}
	}
	for _, s := range ss {
		k.Sections[s.ID] = s
		k.suspect(s.Name)
	}
}

// setTasks records tasks; all says they are every open task.
func (k *known) setTasks(ts []Task, all bool) {
	if k.Tasks == nil || all {
		k.Tasks = make(map[string]Task, len(ts))
	}
	for _, t := range ts {
		k.Tasks[t.ID] = t
		k.suspect(t.Content, t.Description)
	}
	if all {
		k.TasksFresh = true
	}
}

func (k *known) projectByName(name string) (Project, bool) {
	name = strings.TrimSpace(name)
	var ids []string
	for id, p := range k.Projects {
		if strings.EqualFold(strings.TrimSpace(p.Name), name) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return Project{}, false
	}
	sort.Strings(ids) // deterministic when names repeat
	return k.Projects[ids[0]], true
}
