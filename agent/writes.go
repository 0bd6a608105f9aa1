package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

// add appends a write to the plan with a fresh uuid.
func (p *plan) add(ws *[]Write, w Write, item planItem) {
	w.UUID = NewUUID()
	*ws = append(*ws, w)
	p.Items = append(p.Items, item)
}

func (p *plan) reject(ref, why string) {
	p.Notes = append(p.Notes, fmt.Sprintf("✗ %s: %s", ref, why))
	p.Rejected++
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
func (r *runner) planWrite(ctx context.Context, c call) (*plan, []Write, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := &r.tr.Known
	p := &plan{Action: c.Name}
	var ws []Write
	var err error
	switch c.Name {
	case ActCreateProject:
		var a CreateProjectArgs
		_ = json.Unmarshal(c.Args, &a)
		if err = r.ensureProjects(ctx); err != nil {
			break
		}
		name := strings.TrimSpace(a.Name)
		if ex, ok := k.projectByName(name); ok {
			p.Notes = append(p.Notes, fmt.Sprintf("Project %q already exists: id %s. Nothing was created; use that id.", ex.Name, ex.ID))
			break
		}
		w := Write{Kind: AddProject, TempID: "tmp-" + NewUUID(), Name: name}
		if parent := deref(a.ParentID); parent != "" {
			if _, ok := k.Projects[parent]; !ok {
				p.reject(parent, "no project with id "+parent+"; "+k.projectHint(parent))
				break
			}
			w.ParentID = parent
		}
		p.add(&ws, w, planItem{Ref: name, Obs: fmt.Sprintf("Created project %q: id %s", name, w.TempID), Summary: fmt.Sprintf("created project %q", name),
			Inverse: []Write{{Kind: DeleteProject, ID: w.TempID}}, Dest: name})

	case ActCreateSection:
		var a CreateSectionArgs
		_ = json.Unmarshal(c.Args, &a)
		proj := a.ProjectID
		if strings.EqualFold(proj, "inbox") && k.InboxID != "" {
			proj = k.InboxID
		}
		if _, ok := k.Projects[proj]; !ok && k.ProjectsFresh {
			p.reject(proj, "no project with id "+proj+"; "+k.projectHint(proj))
			break
		}
		for _, s := range k.Sections {
			if s.ProjectID == proj && strings.EqualFold(s.Name, strings.TrimSpace(a.Name)) {
				p.Notes = append(p.Notes, fmt.Sprintf("Section %q already exists in %s: id %s. Nothing was created.", s.Name, k.projectName(proj), s.ID))
				return p, nil, nil
			}
		}
		w := Write{Kind: AddSection, TempID: "tmp-" + NewUUID(), Name: strings.TrimSpace(a.Name), ProjectID: proj}
		p.add(&ws, w, planItem{Ref: a.Name, Obs: fmt.Sprintf("Created section %q in %s: id %s", w.Name, k.projectName(proj), w.TempID),
			Summary: fmt.Sprintf("created section %q in %s", w.Name, k.projectName(proj))})

	case ActMoveTasks:
		var a MoveTasksArgs
		_ = json.Unmarshal(c.Args, &a)
		err = r.planMoves(ctx, p, &ws, a.Moves)

	case ActAddTasks:
		var a AddTasksArgs
		_ = json.Unmarshal(c.Args, &a)
		for _, t := range a.Tasks {
			w := Write{Kind: AddTask, TempID: "tmp-" + NewUUID(), Content: strp(t.Content), Description: t.Description, DueString: t.DueString, Labels: labelsPtr(t.Labels)}
			if t.Priority != nil {
				w.Priority = Priority(*t.Priority)
			}
			if sec := deref(t.SectionID); sec != "" {
				w.SectionID = sec
			}
			dest := "the Inbox"
			if proj := deref(t.ProjectID); proj != "" {
				if strings.EqualFold(proj, "inbox") && k.InboxID != "" {
					proj = k.InboxID
				}
				if _, ok := k.Projects[proj]; !ok && k.ProjectsFresh {
					p.reject(fmt.Sprintf("%q", t.Content), "no project with id "+proj+"; "+k.projectHint(proj))
					continue
				}
				w.ProjectID = proj
				dest = k.projectName(proj)
			}
			p.add(&ws, w, planItem{Ref: t.Content, Obs: fmt.Sprintf("Added %q to %s: id %s", t.Content, dest, w.TempID),
				Summary: fmt.Sprintf("added %q to %s", t.Content, dest), Inverse: []Write{{Kind: DeleteTask, ID: w.TempID}}, Dest: dest})
		}

	case ActUpdateTasks:
		var a UpdateTasksArgs
		_ = json.Unmarshal(c.Args, &a)
		ids := make([]string, len(a.Updates))
		for i, u := range a.Updates {
			ids[i] = u.TaskID
		}
		var missing map[string]bool
		if missing, err = r.ensureTasks(ctx, ids); err != nil {
			break
		}
		for _, u := range a.Updates {
			if missing[u.TaskID] {
				p.reject(u.TaskID, "no task with id "+u.TaskID+"; "+k.taskHint(u.TaskID))
				continue
			}
			old := k.Tasks[u.TaskID]
			w := Write{Kind: UpdateTask, ID: u.TaskID, Content: u.Content, Description: u.Description, DueString: u.DueString, Labels: labelsPtr(u.Labels)}
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
				p.Notes = append(p.Notes, fmt.Sprintf("%s %q: nothing to change.", u.TaskID, old.Content))
				continue
			}
			p.add(&ws, w, planItem{Ref: u.TaskID, Obs: fmt.Sprintf("Updated %s %q: %s", u.TaskID, old.Content, strings.Join(changed, ", ")),
				Summary: fmt.Sprintf("changed the %s of %q", strings.Join(changed, ", "), old.Content), Inverse: []Write{inv}})
		}

	case ActCompleteTasks, ActDeleteTasks:
		var a CompleteTasksArgs // both take task_ids
		_ = json.Unmarshal(c.Args, &a)
		var missing map[string]bool
		if missing, err = r.ensureTasks(ctx, a.TaskIDs); err != nil {
			break
		}
		for _, id := range a.TaskIDs {
			if missing[id] {
				p.reject(id, "no task with id "+id+"; "+k.taskHint(id))
				continue
			}
			t := k.Tasks[id]
			if c.Name == ActDeleteTasks {
				p.add(&ws, Write{Kind: DeleteTask, ID: id}, planItem{Ref: id, Obs: fmt.Sprintf("Deleted %s %q", id, t.Content), Summary: fmt.Sprintf("deleted %q (cannot be undone)", t.Content)})
				continue
			}
			inv := completeInverse(t)
			obs := fmt.Sprintf("Completed %s %q", id, t.Content)
			if t.IsRecurring {
				// Closing a recurring task moves it to its next date.
				obs += " (recurring: moved to its next date)"
			}
			p.add(&ws, Write{Kind: CloseTask, ID: id}, planItem{Ref: id, Obs: obs, Summary: fmt.Sprintf("completed %q", t.Content), Inverse: inv})
		}
	default:
		return nil, nil, fmt.Errorf("%s is not a write action", c.Name)
	}
	if err != nil {
		return nil, nil, err
	}
	return p, ws, nil
}

func labelsPtr(ls []string) *[]string {
	if ls == nil {
		return nil
	}
	return &ls
}

// planMoves plans move_tasks: project names are found case-insensitively
// or created in the same request, through temp ids.
func (r *runner) planMoves(ctx context.Context, p *plan, ws *[]Write, moves []Move) error {
	k := &r.tr.Known
	needProjects := false
	ids := make([]string, len(moves))
	for i, m := range moves {
		ids[i] = m.TaskID
		if deref(m.ProjectName) != "" || deref(m.ProjectID) != "" {
			needProjects = true
		}
	}
	if needProjects {
		if err := r.ensureProjects(ctx); err != nil {
			return err
		}
	}
	missing, err := r.ensureTasks(ctx, ids)
	if err != nil {
		return err
	}
	created := map[string]string{}      // lower name → temp id
	createdNames := map[string]string{} // lower name → the name used
	for _, m := range moves {
		if missing[m.TaskID] {
			p.reject(m.TaskID, "no task with id "+m.TaskID+"; "+k.taskHint(m.TaskID))
			continue
		}
		t := k.Tasks[m.TaskID]
		w := Write{Kind: MoveTask, ID: m.TaskID}
		var dest string
		switch sec, proj, name := deref(m.SectionID), deref(m.ProjectID), deref(m.ProjectName); {
		case sec != "":
			s, ok := k.Sections[sec]
			if !ok && k.TasksFresh && len(k.Sections) > 0 {
				p.reject(m.TaskID, "no section with id "+sec+"; call get_sections for valid ids")
				continue
			}
			if sec == t.SectionID {
				p.Notes = append(p.Notes, fmt.Sprintf("%s %q is already in that section.", t.ID, t.Content))
				continue
			}
			w.SectionID = sec
			dest = "section " + sec
			if ok {
				dest = k.projectName(s.ProjectID) + " / " + s.Name
			}
		case proj != "":
			if strings.EqualFold(proj, "inbox") && k.InboxID != "" {
				proj = k.InboxID
			}
			if _, ok := k.Projects[proj]; !ok {
				if byName, ok := k.projectByName(proj); ok {
					proj = byName.ID
				} else {
					p.reject(m.TaskID, "no project with id "+proj+"; "+k.projectHint(proj))
					continue
				}
			}
			if proj == t.ProjectID && t.SectionID == "" {
				p.Notes = append(p.Notes, fmt.Sprintf("%s %q is already in %s.", t.ID, t.Content, k.projectName(proj)))
				continue
			}
			w.ProjectID = proj
			dest = k.projectName(proj)
		case name != "":
			if first, ok := createdNames[strings.ToLower(name)]; ok {
				name = first
			}
			if ex, ok := k.projectByName(name); ok {
				if ex.ID == t.ProjectID && t.SectionID == "" {
					p.Notes = append(p.Notes, fmt.Sprintf("%s %q is already in %s.", t.ID, t.Content, ex.Name))
					continue
				}
				w.ProjectID = ex.ID
				dest = ex.Name
				break
			}
			tmp, ok := created[strings.ToLower(name)]
			if !ok {
				tmp = "tmp-" + NewUUID()
				created[strings.ToLower(name)] = tmp
				createdNames[strings.ToLower(name)] = name
				p.add(ws, Write{Kind: AddProject, TempID: tmp, Name: name}, planItem{Ref: name,
					Obs: fmt.Sprintf("Created project %q: id %s", name, tmp), Summary: fmt.Sprintf("created project %q", name),
					Inverse: []Write{{Kind: DeleteProject, ID: tmp}}})
			}
			w.ProjectID = tmp
			dest = name
		default:
			p.reject(m.TaskID, "no destination: give project_id, project_name or section_id")
			continue
		}
		back := Write{Kind: MoveTask, ID: t.ID, ProjectID: t.ProjectID}
		if t.SectionID != "" {
			back = Write{Kind: MoveTask, ID: t.ID, SectionID: t.SectionID}
		}
		p.add(ws, w, planItem{Ref: m.TaskID, Obs: fmt.Sprintf("Moved %s %q to %s", t.ID, t.Content, dest),
			Summary: fmt.Sprintf("moved %q to %s", t.Content, dest), Inverse: []Write{back}, Dest: dest})
	}
	return nil
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
		r.tr.Journal = append(r.tr.Journal, Applied{Write: w, NewID: newID, Inverse: inv, Summary: item.Summary})
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
	return obs, progressSummary(p.Action, counts, len(dests), createdNames, failed+p.Rejected)
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
		if t.ProjectID == "" {
			t.ProjectID = k.InboxID
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

// progressSummary is the one line the chat shows for a write step.
func progressSummary(action string, counts map[WriteKind]int, dests int, created []string, failed int) string {
	var parts []string
	if len(created) > 0 && action != ActCreateProject {
		sort.Strings(created)
		parts = append(parts, "📁 Created "+strings.Join(created, ", "))
	}
	switch action {
	case ActCreateProject:
		if len(created) > 0 {
			parts = append(parts, "📁 Created "+strings.Join(created, ", "))
		} else if failed == 0 {
			parts = append(parts, "📁 Found the existing project")
		}
	case ActCreateSection:
		if counts[AddSection] > 0 {
			parts = append(parts, "📂 Created a section")
		}
	case ActMoveTasks:
		if n := counts[MoveTask]; n > 0 {
			s := "➡️ Moved " + plural(n, "task")
			if dests > 1 {
				s += " into " + plural(dests, "project")
			}
			parts = append(parts, s)
		}
	case ActAddTasks:
		if n := counts[AddTask]; n > 0 {
			parts = append(parts, "➕ Added "+plural(n, "task"))
		}
	case ActUpdateTasks:
		if n := counts[UpdateTask]; n > 0 {
			parts = append(parts, "✏️ Updated "+plural(n, "task"))
		}
	case ActCompleteTasks:
		if n := counts[CloseTask]; n > 0 {
			parts = append(parts, "✅ Completed "+plural(n, "task"))
		}
	case ActDeleteTasks:
		if n := counts[DeleteTask]; n > 0 {
			parts = append(parts, "🗑️ Deleted "+plural(n, "task"))
		}
	}
	if failed > 0 {
		parts = append(parts, fmt.Sprintf("⚠️ %d failed", failed))
	}
	if len(parts) == 0 {
		return "✔️ Nothing to change"
	}
	return strings.Join(parts, " · ")
}

// gate describes a gated write for its confirmation: the button's label
// and the question, naming the tasks.
func (r *runner) gate(ctx context.Context, c call) (label, question string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := &r.tr.Known
	var a struct {
		TaskIDs []string          `json:"task_ids"`
		Moves   []json.RawMessage `json:"moves"`
		Tasks   []json.RawMessage `json:"tasks"`
		Updates []json.RawMessage `json:"updates"`
		Name    string            `json:"name"`
	}
	_ = json.Unmarshal(c.Args, &a)
	if len(a.TaskIDs) > 0 {
		// Name the tasks in the question; a failed read leaves ids.
		_, _ = r.ensureTasks(ctx, a.TaskIDs)
	}
	names := func(ids []string) string {
		var out []string
		for i, id := range ids {
			if i == 5 {
				out = append(out, fmt.Sprintf("and %d more", len(ids)-5))
				break
			}
			if t, ok := k.Tasks[id]; ok {
				out = append(out, fmt.Sprintf("%q", t.Content))
			} else {
				out = append(out, id)
			}
		}
		return strings.Join(out, ", ")
	}
	switch c.Name {
	case ActDeleteTasks:
		return "Delete " + plural(len(a.TaskIDs), "task"), "Delete " + names(a.TaskIDs) + "? This cannot be undone."
	case ActCompleteTasks:
		return "Complete " + plural(len(a.TaskIDs), "task"), "Mark " + names(a.TaskIDs) + " done?"
	case ActMoveTasks:
		return "Move " + plural(len(a.Moves), "task"), "Move " + plural(len(a.Moves), "task") + "?"
	case ActAddTasks:
		return "Add " + plural(len(a.Tasks), "task"), "Add " + plural(len(a.Tasks), "task") + "?"
	case ActUpdateTasks:
		return "Update " + plural(len(a.Updates), "task"), "Change " + plural(len(a.Updates), "task") + "?"
	case ActCreateProject:
		return "Create project", fmt.Sprintf("Create the project %q?", a.Name)
	case ActCreateSection:
		return "Create section", fmt.Sprintf("Create the section %q?", a.Name)
	}
	return "Yes", "Go ahead with " + c.Name + "?"
}
