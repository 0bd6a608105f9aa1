package todoist

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/tidybot/tidybot/agent"
)

// Wire types. The REST-style endpoints and /sync name some fields
// differently (tasks/items), and Todoist's own references disagree on
// others: the API v1 page spells a /sync label's position item_order and
// a /sync project's flag shared, while Doist's TypeScript SDK, which
// parses Todoist's answers against a schema, reads order and is_shared
// in both places (@doist/todoist-sdk 11, Doist/todoist-sdk-typescript
// src/types/labels/types.ts LabelSchema,
// src/types/projects/types.ts BaseProjectSchema, both used by
// src/types/sync/response.ts SyncResponseSchema). Where the client maps
// such a field it decodes both spellings and prefers the SDK's. A REST
// type embeds its /sync twin and adds only the fields REST alone sends
// (labels keep two types). Only the fields the client maps are declared:
// no project's sharing, which the agent does not show.

// page is the envelope of every paginated list.
type page[T any] struct {
	Results    []T     `json:"results"`
	NextCursor *string `json:"next_cursor"`
}

type due struct {
	Date        string  `json:"date"`
	String      string  `json:"string"`
	IsRecurring bool    `json:"is_recurring"`
	Timezone    *string `json:"timezone"`
	Lang        string  `json:"lang"`
}

// syncProject is a project from /sync.
type syncProject struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	ParentID     string `json:"parent_id"`
	ChildOrder   int    `json:"child_order"`
	InboxProject bool   `json:"inbox_project"`
	IsArchived   bool   `json:"is_archived"`
	IsDeleted    bool   `json:"is_deleted"`
}

// restProject is a project from GET /projects: the /sync fields and
// created_at.
type restProject struct {
	syncProject
	CreatedAt string `json:"created_at"`
}

// syncSection is a section from /sync.
type syncSection struct {
	ID           string `json:"id"`
	ProjectID    string `json:"project_id"`
	Name         string `json:"name"`
	SectionOrder int    `json:"section_order"`
	IsArchived   bool   `json:"is_archived"`
	IsDeleted    bool   `json:"is_deleted"`
}

// restSection is a section from GET /sections: the /sync fields and
// added_at.
type restSection struct {
	syncSection
	AddedAt string `json:"added_at"`
}

// restLabel is a label from GET /labels.
type restLabel struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Order int    `json:"order"`
}

// syncLabel is a label from /sync: its position is order (the SDK's
// spelling, null allowed: LabelSchema's order is nullable) or item_order
// (the API page's); see position.
type syncLabel struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Order     *int   `json:"order"`
	ItemOrder *int   `json:"item_order"`
	IsDeleted bool   `json:"is_deleted"`
}

// position is the label's order, else its item_order, else 0.
func (l syncLabel) position() int {
	switch {
	case l.Order != nil:
		return *l.Order
	case l.ItemOrder != nil:
		return *l.ItemOrder
	}
	return 0
}

// syncItem is a task from /sync, where tasks are "items".
type syncItem struct {
	ID          string   `json:"id"`
	ProjectID   string   `json:"project_id"`
	SectionID   string   `json:"section_id"`
	ParentID    string   `json:"parent_id"`
	Content     string   `json:"content"`
	Description string   `json:"description"`
	Priority    int      `json:"priority"`
	Labels      []string `json:"labels"`
	Due         *due     `json:"due"`
	ChildOrder  int      `json:"child_order"`
	Checked     bool     `json:"checked"`
	IsDeleted   bool     `json:"is_deleted"`
}

// restTask is a task from GET /tasks and /tasks/filter: the /sync fields
// and added_at.
type restTask struct {
	syncItem
	AddedAt string `json:"added_at"`
}

// restUser is GET /user.
type restUser struct {
	ID             string `json:"id"`
	FullName       string `json:"full_name"`
	Email          string `json:"email"`
	InboxProjectID string `json:"inbox_project_id"`
	Lang           string `json:"lang"`
	IsPremium      bool   `json:"is_premium"`
	TZInfo         struct {
		Timezone string `json:"timezone"`
	} `json:"tz_info"`
}

// syncResponse is the answer to POST /sync, for reads and writes.
type syncResponse struct {
	SyncToken       string                     `json:"sync_token"`
	FullSync        bool                       `json:"full_sync"`
	FullSyncDateUTC string                     `json:"full_sync_date_utc"`
	Projects        []syncProject              `json:"projects"`
	Sections        []syncSection              `json:"sections"`
	Labels          []syncLabel                `json:"labels"`
	Items           []syncItem                 `json:"items"`
	SyncStatus      map[string]json.RawMessage `json:"sync_status"`
	TempIDMapping   map[string]string          `json:"temp_id_mapping"`
	User            *restUser                  `json:"user"`
}

// Priority: the API counts 1 (normal) … 4 (urgent); people and the agent
// say p1 (urgent) … p4 (none). apiPriority and fromAPIPriority are the one
// place that maps between them.

// apiPriority maps p1…p4 to the API's 4…1. ok is false for anything else.
func apiPriority(p agent.Priority) (n int, ok bool) {
	switch p {
	case agent.P1:
		return 4, true
	case agent.P2:
		return 3, true
	case agent.P3:
		return 2, true
	case agent.P4:
		return 1, true
	}
	return 0, false
}

// fromAPIPriority maps the API's 4…1 to p1…p4; anything else is p4.
func fromAPIPriority(n int) agent.Priority {
	switch n {
	case 4:
		return agent.P1
	case 3:
		return agent.P2
	case 2:
		return agent.P3
	}
	return agent.P4
}

// setDue copies a wire due date into t.
func setDue(t *agent.Task, d *due) {
	if d == nil {
		return
	}
	t.Due, t.DueDate, t.IsRecurring, t.DueLang = d.String, d.Date, d.IsRecurring, d.Lang
	if t.Due == "" {
		t.Due = d.Date
	}
	if d.Timezone != nil {
		t.DueTimezone = *d.Timezone
	}
}

// labelsOf returns nil for no labels, so that tasks compare equal however
// the API spelled "none".
func labelsOf(ls []string) []string {
	if len(ls) == 0 {
		return nil
	}
	return ls
}

func (t syncItem) toAgent() agent.Task {
	a := agent.Task{ID: t.ID, Content: t.Content, Description: t.Description,
		ProjectID: t.ProjectID, SectionID: t.SectionID, ParentID: t.ParentID,
		Priority: fromAPIPriority(t.Priority), Labels: labelsOf(t.Labels)}
	setDue(&a, t.Due)
	return a
}

func (p syncProject) toAgent() agent.Project {
	return agent.Project{ID: p.ID, Name: p.Name, ParentID: p.ParentID, IsInbox: p.InboxProject}
}

// snapshotOf turns a full /sync answer into an agent.Snapshot, dropping
// deleted, archived and completed objects and ordering each list as the
// app shows it.
func snapshotOf(r *syncResponse) agent.Snapshot {
	var s agent.Snapshot
	projects := slices.DeleteFunc(r.Projects, func(p syncProject) bool { return p.IsDeleted || p.IsArchived })
	slices.SortStableFunc(projects, func(a, b syncProject) int {
		if a.InboxProject != b.InboxProject { // the Inbox comes first
			if a.InboxProject {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.ChildOrder, b.ChildOrder)
	})
	s.Projects = make([]agent.Project, len(projects))
	for i, p := range projects {
		s.Projects[i] = p.toAgent()
	}

	sections := slices.DeleteFunc(r.Sections, func(x syncSection) bool { return x.IsDeleted || x.IsArchived })
	slices.SortStableFunc(sections, func(a, b syncSection) int { return cmp.Compare(a.SectionOrder, b.SectionOrder) })
	s.Sections = make([]agent.Section, len(sections))
	for i, x := range sections {
		s.Sections[i] = agent.Section{ID: x.ID, ProjectID: x.ProjectID, Name: x.Name}
	}

	labels := slices.DeleteFunc(r.Labels, func(l syncLabel) bool { return l.IsDeleted })
	slices.SortStableFunc(labels, func(a, b syncLabel) int { return cmp.Compare(a.position(), b.position()) })
	s.Labels = make([]agent.Label, len(labels))
	for i, l := range labels {
		s.Labels[i] = agent.Label{ID: l.ID, Name: l.Name}
	}

	// Tasks come project by project, then section by section (tasks
	// outside a section first), then in their order.
	projectPos := make(map[string]int, len(s.Projects))
	for i, p := range s.Projects {
		projectPos[p.ID] = i
	}
	sectionPos := make(map[string]int, len(s.Sections))
	for i, x := range s.Sections {
		sectionPos[x.ID] = i + 1
	}
	items := slices.DeleteFunc(r.Items, func(t syncItem) bool { return t.IsDeleted || t.Checked })
	slices.SortStableFunc(items, func(a, b syncItem) int {
		return cmp.Or(
			cmp.Compare(projectPos[a.ProjectID], projectPos[b.ProjectID]),
			cmp.Compare(sectionPos[a.SectionID], sectionPos[b.SectionID]),
			cmp.Compare(a.ChildOrder, b.ChildOrder))
	})
	s.Tasks = make([]agent.Task, len(items))
	for i, t := range items {
		s.Tasks[i] = t.toAgent()
	}
	return s
}

// mergeByID applies changed to all: a changed object replaces its old
// self and a new one is added.
func mergeByID[T any](all, changed []T, id func(T) string) []T {
	at := make(map[string]int, len(all))
	for i, x := range all {
		at[id(x)] = i
	}
	for _, x := range changed {
		if i, ok := at[id(x)]; ok {
			all[i] = x
			continue
		}
		at[id(x)] = len(all)
		all = append(all, x)
	}
	return all
}
