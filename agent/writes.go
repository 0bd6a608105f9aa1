package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// plan is a write action turned into writes, with what the observation
// and the journal need for each.
type plan struct {
	Action string     `json:"action"`
	Items  []planItem `json:"items"`
	// Notes are lines for the observation that need no write (an existing
	// project reused, an id rejected locally).
	Notes []string `json:"notes,omitempty"`
	// Rejected counts items rejected locally.
	Rejected int `json:"rejected,omitempty"`
}

// planItem belongs to the write at the same index.
type planItem struct {
	// Ref is the id or name the model sent, repeated when it fails.
	Ref     string  `json:"ref"`
	Obs     string  `json:"obs"`
	Summary string  `json:"summary"`
	Inverse []Write `json:"inverse,omitempty"`
	// Dest names a move's destination, for the progress summary.
	Dest string `json:"dest,omitempty"`
}

// NewUUID returns a random RFC 4122 version 4 UUID, for Write.UUID.
func NewUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func strp(s string) *string { return &s }

// planner is what a write action plans with: what the run knows (read
// more with run.ensureProjects and run.ensureTasks) and the plan being
// built with its writes. The runner's lock is held while a planner is in
// use.
type planner struct {
	run    *runner
	known  *known
	plan   *plan
	writes []Write
	// existing says the run's policy lets the action create nothing
	// (Rule.Existing): its projects, sections and labels must exist.
	existing bool
}

// add appends a write to the plan with a fresh uuid; item says what
// becomes of it once applied, its inverse included.
func (pl *planner) add(w Write, item planItem) {
	w.UUID = NewUUID()
	pl.writes = append(pl.writes, w)
	pl.plan.Items = append(pl.plan.Items, item)
}

// reject reports an item that was not sent, and why.
func (pl *planner) reject(ref, why string) {
	pl.plan.Notes = append(pl.plan.Notes, fmt.Sprintf("✗ %s: %s", ref, why))
	pl.plan.Rejected++
}

// note adds a line to the observation for an item that needs no write.
func (pl *planner) note(format string, args ...any) {
	pl.plan.Notes = append(pl.plan.Notes, fmt.Sprintf(format, args...))
}

// project resolves a project reference ("inbox" or an id) and reports
// whether it may be used: an id is refused only when the run holds a
// fresh project list without it.
func (pl *planner) project(ref string) (string, bool) {
	if strings.EqualFold(ref, "inbox") && pl.known.InboxID != "" {
		return pl.known.InboxID, true
	}
	_, ok := pl.known.Projects[ref]
	return ref, ok || !pl.known.ProjectsFresh
}

// noProject is why a project reference was rejected.
func (pl *planner) noProject(id string) string {
	return "no project with id " + id + "; " + pl.known.projectHint(id)
}

// noTask is why a task id was rejected.
func (pl *planner) noTask(id string) string {
	return "no task with id " + id + "; " + pl.known.taskHint(id)
}

// eachTask reads the tasks ids name, rejects the ones that do not exist
// and calls fn with the index and the task of each other.
func (pl *planner) eachTask(ctx context.Context, ids []string, fn func(i int, t Task)) error {
	missing, err := pl.run.ensureTasks(ctx, ids)
	if err != nil {
		return err
	}
	for i, id := range ids {
		if missing[id] {
			pl.reject(id, pl.noTask(id))
			continue
		}
		fn(i, pl.known.Tasks[id])
	}
	return nil
}

// taskNames names tasks for a question, reading the unknown ones first (a
// failed read leaves their ids): "\"Buy cake\", \"Call mum\" and 3 more".
func (pl *planner) taskNames(ctx context.Context, ids []string) string {
	_, _ = pl.run.ensureTasks(ctx, ids)
	var out []string
	for i, id := range ids {
		if i == 5 {
			out = append(out, fmt.Sprintf("and %d more", len(ids)-5))
			break
		}
		if t, ok := pl.known.Tasks[id]; ok {
			out = append(out, fmt.Sprintf("%q", t.Content))
		} else {
			out = append(out, id)
		}
	}
	return strings.Join(out, ", ")
}

// ensureProjects reads the project list if the run does not hold one.
func (r *runner) ensureProjects(ctx context.Context) error {
	if r.tr.Known.ProjectsFresh {
		return nil
	}
	ps, err := r.e.tasks.Projects(ctx)
	if err != nil {
		return fmt.Errorf("list projects: %w", err)
	}
	r.tr.Known.setProjects(ps)
	return nil
}

// ensureTasks makes sure the run knows the given tasks (for names and
// undo), reading the unknown ones in one request. It returns the ids that
// do not exist.
func (r *runner) ensureTasks(ctx context.Context, ids []string) (missing map[string]bool, err error) {
	k := &r.tr.Known
	var unknown []string
	for _, id := range ids {
		if _, ok := k.Tasks[id]; !ok {
			unknown = append(unknown, id)
		}
	}
	missing = map[string]bool{}
	if len(unknown) == 0 {
		return missing, nil
	}
	if k.TasksFresh {
		for _, id := range unknown {
			missing[id] = true
		}
		return missing, nil
	}
	ts, err := r.e.tasks.Tasks(ctx, TaskQuery{IDs: unknown})
	if err != nil {
		return nil, fmt.Errorf("read tasks: %w", err)
	}
	k.setTasks(ts, false)
	for _, id := range unknown {
		if _, ok := k.Tasks[id]; !ok {
			missing[id] = true
		}
	}
	return missing, nil
}

// planWrite turns a write action into writes. Ids the run knows to be
// wrong are rejected here, without an API call.
func (r *runner) planWrite(ctx context.Context, name string, w writer) (*plan, []Write, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pl := &planner{run: r, known: &r.tr.Known, plan: &plan{Action: name}, existing: r.createsNothing(name)}
	if err := w.plan(ctx, pl); err != nil {
		return nil, nil, err
	}
	return pl.plan, pl.writes, nil
}

// gate returns the confirmation a write waits for, or an empty label
// when it needs none: the confirmation setting gates it, or it changes
// or creates what the person never named (unasked: whatever the
// setting).
func (r *runner) gate(ctx context.Context, name string, w writer) (label, question string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	odd := r.unasked(ctx, w)
	if !r.gated(w) && len(odd) == 0 {
		return "", ""
	}
	label, question = w.gate(ctx, &planner{run: r, known: &r.tr.Known, plan: &plan{Action: name}})
	if len(odd) > 0 {
		question = injectionQuestion(&r.tr.Known, question, odd)
	}
	return label, question
}

func (a *CreateProjectArgs) plan(ctx context.Context, pl *planner) error {
	if err := pl.run.ensureProjects(ctx); err != nil {
		return err
	}
	name := strings.TrimSpace(a.Name)
	if ex, ok := pl.known.projectByName(name); ok {
		pl.note("Project %q already exists: id %s. Nothing was created; use that id.", ex.Name, ex.ID)
		return nil
	}
	w := Write{Kind: AddProject, TempID: "tmp-" + NewUUID(), Name: name}
	if parent := deref(a.ParentID); parent != "" {
		if _, ok := pl.known.Projects[parent]; !ok {
			pl.reject(parent, pl.noProject(parent))
			return nil
		}
		w.ParentID = parent
	}
	pl.add(w, planItem{Ref: name, Obs: fmt.Sprintf("Created project %q: id %s", name, w.TempID), Summary: fmt.Sprintf("created project %q", name),
		Inverse: []Write{{Kind: DeleteProject, ID: w.TempID}}, Dest: name})
	return nil
}

func (a *CreateProjectArgs) gate(context.Context, *planner) (label, question string) {
	return "Create project", fmt.Sprintf("Create the project %q?", a.Name)
}

func (*CreateProjectArgs) progress(t tally) string {
	if len(t.created) > 0 {
		return "📁 Created " + strings.Join(t.created, ", ")
	}
	if t.failed == 0 {
		return "📁 Found the existing project"
	}
	return ""
}

func (a *CreateSectionArgs) plan(_ context.Context, pl *planner) error {
	proj, ok := pl.project(a.ProjectID)
	if !ok {
		pl.reject(proj, pl.noProject(proj))
		return nil
	}
	k := pl.known
	for _, s := range k.Sections {
		if s.ProjectID == proj && strings.EqualFold(s.Name, strings.TrimSpace(a.Name)) {
			pl.note("Section %q already exists in %s: id %s. Nothing was created.", s.Name, k.projectName(proj), s.ID)
			return nil
		}
	}
	w := Write{Kind: AddSection, TempID: "tmp-" + NewUUID(), Name: strings.TrimSpace(a.Name), ProjectID: proj}
	pl.add(w, planItem{Ref: a.Name, Obs: fmt.Sprintf("Created section %q in %s: id %s", w.Name, k.projectName(proj), w.TempID),
		Summary: fmt.Sprintf("created section %q in %s", w.Name, k.projectName(proj)), Inverse: []Write{{Kind: DeleteSection, ID: w.TempID}}})
	return nil
}

func (a *CreateSectionArgs) gate(context.Context, *planner) (label, question string) {
	return "Create section", fmt.Sprintf("Create the section %q?", a.Name)
}

func (*CreateSectionArgs) progress(t tally) string {
	if t.counts[AddSection] > 0 {
		return "📂 Created a section"
	}
	return ""
}

func (a *MoveTasksArgs) gate(context.Context, *planner) (label, question string) {
	n := len(a.all())
	return "Move " + plural(n, "task"), "Move " + plural(n, "task") + "?"
}

func (*MoveTasksArgs) progress(t tally) string {
	var parts []string
	if len(t.created) > 0 {
		parts = append(parts, "📁 Created "+strings.Join(t.created, ", "))
	}
	if n := t.counts[MoveTask]; n > 0 {
		s := "➡️ Moved " + plural(n, "task")
		if t.dests > 1 {
			s += " into " + plural(t.dests, "project")
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " · ")
}

func (a *AddTasksArgs) plan(_ context.Context, pl *planner) error {
	k := pl.known
	for _, t := range a.Tasks {
		w := Write{Kind: AddTask, TempID: "tmp-" + NewUUID(), Content: strp(t.Content), Description: t.Description, DueString: t.DueString, Labels: labelsPtr(t.Labels)}
		if t.Priority != nil {
			w.Priority = Priority(*t.Priority)
		}
		if sec := deref(t.SectionID); sec != "" {
			w.SectionID = sec
		}
		dest := "the Inbox"
		if ref := deref(t.ProjectID); ref != "" {
			proj, ok := pl.project(ref)
			if !ok {
				pl.reject(fmt.Sprintf("%q", t.Content), pl.noProject(proj))
				continue
			}
			w.ProjectID = proj
			dest = k.projectName(proj)
		}
		pl.add(w, planItem{Ref: t.Content, Obs: fmt.Sprintf("Added %q to %s: id %s", t.Content, dest, w.TempID),
			Summary: fmt.Sprintf("added %q to %s", t.Content, dest), Inverse: []Write{{Kind: DeleteTask, ID: w.TempID}}, Dest: dest})
	}
	return nil
}

func (a *AddTasksArgs) gate(context.Context, *planner) (label, question string) {
	return "Add " + plural(len(a.Tasks), "task"), "Add " + plural(len(a.Tasks), "task") + "?"
}

func (*AddTasksArgs) progress(t tally) string {
	if n := t.counts[AddTask]; n > 0 {
		return "➕ Added " + plural(n, "task")
	}
	return ""
}

func (a *UpdateTasksArgs) plan(ctx context.Context, pl *planner) error {
	ids := make([]string, len(a.Updates))
	for i, u := range a.Updates {
		ids[i] = u.TaskID
	}
	var labels map[string]bool
	if pl.existing && slices.ContainsFunc(a.Updates, func(u TaskUpdate) bool { return u.Labels != nil }) {
		var err error
		if labels, err = pl.run.existingLabels(ctx); err != nil {
			return err
		}
	}
	return pl.eachTask(ctx, ids, func(i int, old Task) {
		u := a.Updates[i]
		if labels != nil {
			for _, l := range u.Labels {
				if !labels[strings.ToLower(strings.TrimSpace(l))] && !slices.Contains(old.Labels, l) {
					pl.reject(u.TaskID, fmt.Sprintf("there is no label %q, and this run uses only labels that exist (it creates none)", l))
					return
				}
			}
		}
		w := Write{Kind: UpdateTask, ID: u.TaskID, Content: u.Content, Description: u.Description, DueString: u.DueString, Labels: labelsPtr(u.Labels)}
		// The inverse restores every field the update changes.
		inv := Write{Kind: UpdateTask, ID: u.TaskID}
		var changed []string
		if u.Content != nil {
			inv.Content = strp(old.Content)
			changed = append(changed, "title")
		}
		if u.Description != nil {
			inv.Description = strp(old.Description)
			changed = append(changed, "description")
		}
		if u.DueString != nil {
			restoreDue(&inv, old)
			changed = append(changed, "due date")
		}
		if u.Priority != nil {
			w.Priority = Priority(*u.Priority)
			inv.Priority = old.Priority
			if inv.Priority == "" {
				inv.Priority = P4
			}
			changed = append(changed, "priority")
		}
		if u.Labels != nil {
			inv.Labels = labelsPtr(append([]string{}, old.Labels...))
			changed = append(changed, "labels")
		}
		if len(changed) == 0 {
			pl.note("%s %q: nothing to change.", u.TaskID, old.Content)
			return
		}
		pl.add(w, planItem{Ref: u.TaskID, Obs: fmt.Sprintf("Updated %s %q: %s", u.TaskID, old.Content, strings.Join(changed, ", ")),
			Summary: fmt.Sprintf("changed the %s of %q", strings.Join(changed, ", "), old.Content), Inverse: []Write{inv}})
	})
}

func (a *UpdateTasksArgs) gate(context.Context, *planner) (label, question string) {
	return "Update " + plural(len(a.Updates), "task"), "Change " + plural(len(a.Updates), "task") + "?"
}

func (*UpdateTasksArgs) progress(t tally) string {
	if n := t.counts[UpdateTask]; n > 0 {
		return "✏️ Updated " + plural(n, "task")
	}
	return ""
}

func (a *CompleteTasksArgs) plan(ctx context.Context, pl *planner) error {
	return pl.eachTask(ctx, a.TaskIDs, func(_ int, t Task) {
		obs := fmt.Sprintf("Completed %s %q", t.ID, t.Content)
		if t.IsRecurring {
			// Closing a recurring task moves it to its next date.
			obs += " (recurring: moved to its next date)"
		}
		pl.add(Write{Kind: CloseTask, ID: t.ID}, planItem{Ref: t.ID, Obs: obs, Summary: fmt.Sprintf("completed %q", t.Content), Inverse: completeInverse(t)})
	})
}

func (a *CompleteTasksArgs) gate(ctx context.Context, pl *planner) (label, question string) {
	return "Complete " + plural(len(a.TaskIDs), "task"), "Mark " + pl.taskNames(ctx, a.TaskIDs) + " done?"
}

func (*CompleteTasksArgs) progress(t tally) string {
	if n := t.counts[CloseTask]; n > 0 {
		return "✅ Completed " + plural(n, "task")
	}
	return ""
}

func (a *DeleteTasksArgs) plan(ctx context.Context, pl *planner) error {
	return pl.eachTask(ctx, a.TaskIDs, func(_ int, t Task) {
		// No inverse: a deleted task cannot come back.
		pl.add(Write{Kind: DeleteTask, ID: t.ID}, planItem{Ref: t.ID, Obs: fmt.Sprintf("Deleted %s %q", t.ID, t.Content), Summary: fmt.Sprintf("deleted %q (cannot be undone)", t.Content)})
	})
}

func (a *DeleteTasksArgs) gate(ctx context.Context, pl *planner) (label, question string) {
	return "Delete " + plural(len(a.TaskIDs), "task"), "Delete " + pl.taskNames(ctx, a.TaskIDs) + "? This cannot be undone."
}

func (*DeleteTasksArgs) progress(t tally) string {
	if n := t.counts[DeleteTask]; n > 0 {
		return "🗑️ Deleted " + plural(n, "task")
	}
	return ""
}

func labelsPtr(ls []string) *[]string {
	if ls == nil {
		return nil
	}
	return &ls
}

// plan plans move_tasks: project names are found case-insensitively or
// created in the same request, through temp ids. A group is planned as
// one move per task, so each has its own observation line, journal entry
// and inverse, as a single move has.
func (a *MoveTasksArgs) plan(ctx context.Context, pl *planner) error {
	moves := a.all()
	if len(moves) == 0 {
		return &Error{Code: ErrInvalid, Message: "move_tasks needs at least one task: give moves, or groups with task_ids"}
	}
	needProjects := false
	ids := make([]string, len(moves))
	for i, m := range moves {
		ids[i] = m.TaskID
		if deref(m.ProjectName) != "" || deref(m.ProjectID) != "" {
			needProjects = true
		}
	}
	if needProjects {
		if err := pl.run.ensureProjects(ctx); err != nil {
			return err
		}
	}
	created := newProjects{ids: map[string]string{}, names: map[string]string{}}
	return pl.eachTask(ctx, ids, func(i int, t Task) {
		m := moves[i]
		w := Write{Kind: MoveTask, ID: m.TaskID}
		dest, ok := pl.destination(m, t, &w, created)
		if !ok {
			return
		}
		back := Write{Kind: MoveTask, ID: t.ID, ProjectID: t.ProjectID}
		if t.SectionID != "" {
			back = Write{Kind: MoveTask, ID: t.ID, SectionID: t.SectionID}
		}
		pl.add(w, planItem{Ref: m.TaskID, Obs: fmt.Sprintf("Moved %s %q to %s", t.ID, t.Content, dest),
			Summary: fmt.Sprintf("moved %q to %s", t.Content, dest), Inverse: []Write{back}, Dest: dest})
	})
}

// newProjects are the projects a move_tasks plan creates, by lower-cased
// name: their temp ids and the name first used for each.
type newProjects struct{ ids, names map[string]string }

// destination resolves where move m takes task t, setting w's section or
// project, and names it. It reports false when the move was rejected or
// needs no write (then the plan says why).
func (pl *planner) destination(m Move, t Task, w *Write, created newProjects) (string, bool) {
	k := pl.known
	switch sec, proj, name := deref(m.SectionID), deref(m.ProjectID), deref(m.ProjectName); {
	case sec != "":
		s, ok := k.Sections[sec]
		if !ok && k.TasksFresh && len(k.Sections) > 0 {
			pl.reject(m.TaskID, "no section with id "+sec+"; call get_sections for valid ids")
			return "", false
		}
		if !ok && pl.existing {
			pl.reject(m.TaskID, "no section with id "+sec+" is known, and this run moves only into sections that exist; call get_sections for valid ids")
			return "", false
		}
		if sec == t.SectionID {
			pl.note("%s %q is already in that section.", t.ID, t.Content)
			return "", false
		}
		w.SectionID = sec
		if ok {
			return k.projectName(s.ProjectID) + " / " + s.Name, true
		}
		return "section " + sec, true
	case proj != "":
		if strings.EqualFold(proj, "inbox") && k.InboxID != "" {
			proj = k.InboxID
		}
		if _, ok := k.Projects[proj]; !ok {
			if byName, ok := k.projectByName(proj); ok {
				proj = byName.ID
			} else {
				pl.reject(m.TaskID, pl.noProject(proj))
				return "", false
			}
		}
		if proj == t.ProjectID && t.SectionID == "" {
			pl.note("%s %q is already in %s.", t.ID, t.Content, k.projectName(proj))
			return "", false
		}
		w.ProjectID = proj
		return k.projectName(proj), true
	case name != "":
		return pl.namedProject(m, t, w, name, created)
	default:
		pl.reject(m.TaskID, "no destination: give project_id, project_name or section_id")
		return "", false
	}
}

// namedProject moves to the project called name, planning to create it
// (once per name) when the user has none.
func (pl *planner) namedProject(m Move, t Task, w *Write, name string, created newProjects) (string, bool) {
	if first, ok := created.names[strings.ToLower(name)]; ok {
		name = first
	}
	if ex, ok := pl.known.projectByName(name); ok {
		if ex.ID == t.ProjectID && t.SectionID == "" {
			pl.note("%s %q is already in %s.", t.ID, t.Content, ex.Name)
			return "", false
		}
		w.ProjectID = ex.ID
		return ex.Name, true
	}
	if pl.existing {
		pl.reject(m.TaskID, fmt.Sprintf("there is no project %q, and this run moves only into projects that exist (it creates none); %s", name, pl.known.projectHint(name)))
		return "", false
	}
	tmp, ok := created.ids[strings.ToLower(name)]
	if !ok {
		tmp = "tmp-" + NewUUID()
		created.ids[strings.ToLower(name)] = tmp
		created.names[strings.ToLower(name)] = name
		pl.add(Write{Kind: AddProject, TempID: tmp, Name: name}, planItem{Ref: name,
			Obs: fmt.Sprintf("Created project %q: id %s", name, tmp), Summary: fmt.Sprintf("created project %q", name),
			Inverse: []Write{{Kind: DeleteProject, ID: tmp}}})
	}
	w.ProjectID = tmp
	return name, true
}

// applyResults records what became of a plan's writes: the observation,
// the journal and what the run knows. It returns the observation and the
// progress summary.
func (r *runner) applyResults(p *plan, ws []Write, results []WriteResult) (obs, summary string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := &r.tr.Known
	// Temp ids become real ids everywhere.
	ids := map[string]string{}
	for i, res := range results {
		if i < len(ws) && ws[i].TempID != "" && res.NewID != "" && res.Err == nil {
			ids[ws[i].TempID] = res.NewID
		}
	}
	sub := func(s string) string {
		if real, ok := ids[s]; ok {
			return real
		}
		return s
	}
	subText := func(s string) string {
		for tmp, real := range ids {
			s = strings.ReplaceAll(s, tmp, real)
		}
		return s
	}
	var lines []string
	failed, done := 0, 0
	dests := map[string]bool{}
	var createdNames []string
	counts := map[WriteKind]int{}
	for i, w := range ws {
		item := p.Items[i]
		var res WriteResult
		if i < len(results) {
			res = results[i]
		} else {
			res.Err = &Error{Code: ErrServer, Message: "no result for this write"}
		}
		if res.Err != nil {
			failed++
			msg := ErrorMessageOf(res.Err)
			if ErrorCodeOf(res.Err) == ErrNotFound {
				switch {
				case strings.Contains(msg, "project"):
					msg += "; " + k.projectHint(w.ProjectID)
				case strings.Contains(msg, "task") || strings.Contains(msg, "item"):
					msg += "; " + k.taskHint(w.ID)
				}
			}
			lines = append(lines, fmt.Sprintf("✗ %s: %s", item.Ref, msg))
			continue
		}
		done++
		counts[w.Kind]++
		w.ID, w.ProjectID, w.SectionID, w.ParentID = sub(w.ID), sub(w.ProjectID), sub(w.SectionID), sub(w.ParentID)
		newID := sub(w.TempID)
		if newID == w.TempID {
			newID = res.NewID
		}
		inv := make([]Write, len(item.Inverse))
		for j, iw := range item.Inverse {
			iw.ID, iw.ProjectID, iw.SectionID = sub(iw.ID), sub(iw.ProjectID), sub(iw.SectionID)
			inv[j] = iw
		}
		lines = append(lines, "✓ "+subText(item.Obs))
		r.tr.Journal = append(r.tr.Journal, Applied{Write: w, NewID: newID, Inverse: inv, Summary: item.Summary, Dest: item.Dest})
		if item.Dest != "" {
			dests[item.Dest] = true
		}
		k.update(w, newID)
		if w.Kind == AddProject {
			createdNames = append(createdNames, w.Name)
		}
	}
	lines = append(lines, p.Notes...)
	obs = strings.Join(lines, "\n")
	if failed+p.Rejected > 0 {
		obs += fmt.Sprintf("\n%d of %d failed; fix those and retry only them.", failed+p.Rejected, len(ws)+p.Rejected)
	}
	return obs, progressLine(p.Action, tally{counts: counts, dests: len(dests), created: createdNames, failed: failed + p.Rejected})
}

// update records an applied write in what the run knows.
func (k *known) update(w Write, newID string) {
	switch w.Kind {
	case AddProject:
		if k.Projects == nil {
			k.Projects = map[string]Project{}
		}
		k.Projects[newID] = Project{ID: newID, Name: w.Name, ParentID: w.ParentID}
	case AddSection:
		if k.Sections == nil {
			k.Sections = map[string]Section{}
		}
		k.Sections[newID] = Section{ID: newID, ProjectID: w.ProjectID, Name: w.Name}
	case AddTask:
		if k.Tasks == nil {
			k.Tasks = map[string]Task{}
		}
		t := Task{ID: newID, ProjectID: w.ProjectID, SectionID: w.SectionID, Priority: w.Priority}
		if t.ProjectID == "" && t.SectionID == "" {
			t.ProjectID = k.InboxID
		}
		if t.ProjectID == "" && t.SectionID == "" {
			// Added to an Inbox the run has not read: where it is is
			// unknown, so a later move reads it rather than record an
			// undo with no destination.
			return
		}
		if w.Content != nil {
			t.Content = *w.Content
		}
		if w.Labels != nil {
			t.Labels = *w.Labels
		}
		k.Tasks[newID] = t
	case MoveTask:
		t, ok := k.Tasks[w.ID]
		if !ok {
			return
		}
		if w.SectionID != "" {
			t.SectionID = w.SectionID
			if s, ok := k.Sections[w.SectionID]; ok {
				t.ProjectID = s.ProjectID
			}
		} else {
			t.ProjectID, t.SectionID = w.ProjectID, ""
		}
		k.Tasks[w.ID] = t
	case UpdateTask:
		t, ok := k.Tasks[w.ID]
		if !ok {
			return
		}
		if w.Content != nil {
			t.Content = *w.Content
		}
		if w.Description != nil {
			t.Description = *w.Description
		}
		if w.DueString != nil {
			t.Due = *w.DueString
			if t.Due == "no date" {
				t.Due = ""
			}
		}
		if w.Priority != "" {
			t.Priority = w.Priority
		}
		if w.Labels != nil {
			t.Labels = *w.Labels
		}
		k.Tasks[w.ID] = t
	case CloseTask, DeleteTask:
		delete(k.Tasks, w.ID)
	}
}

// tally is what became of a write action's plan, for its progress line.
type tally struct {
	counts map[WriteKind]int
	// dests counts the distinct destinations of what was applied.
	dests int
	// created names the projects created, sorted.
	created []string
	failed  int
}

// progressLine is the one line the chat shows for a write step: the
// action's own part, then what failed.
func progressLine(name string, t tally) string {
	sort.Strings(t.created)
	var parts []string
	if a, ok := decode(call{Name: name}); ok {
		if w, ok := a.(writer); ok {
			if s := w.progress(t); s != "" {
				parts = append(parts, s)
			}
		}
	}
	if t.failed > 0 {
		parts = append(parts, fmt.Sprintf("⚠️ %d failed", t.failed))
	}
	if len(parts) == 0 {
		return "✔️ Nothing to change"
	}
	return strings.Join(parts, " · ")
}
