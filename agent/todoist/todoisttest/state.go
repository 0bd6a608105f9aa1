package todoisttest

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Project is a project as the fake stores it.
type Project struct {
	ID          string
	Name        string
	ParentID    string
	Color       string
	Description string
	ViewStyle   string
	ChildOrder  int
	IsInbox     bool
	IsFavorite  bool
	IsArchived  bool
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Section is a section of a project.
type Section struct {
	ID        string
	ProjectID string
	Name      string
	Order     int
	AddedAt   time.Time
	UpdatedAt time.Time
}

// Label is a personal label. Label ids are numeric strings, as in the real
// API; tasks refer to labels by name.
type Label struct {
	ID         string
	Name       string
	Color      string
	Order      int
	IsFavorite bool
}

// Due is a task's due date. Date is "YYYY-MM-DD" for a full-day date or
// "YYYY-MM-DDTHH:MM:SS" for a floating date-time; String is the text the
// date was set with ("every mon", "tomorrow").
type Due struct {
	Date        string
	String      string
	Lang        string
	Timezone    string
	IsRecurring bool
}

// Task is a task as the fake stores it, open or completed.
type Task struct {
	ID          string
	ProjectID   string
	SectionID   string
	ParentID    string
	Content     string
	Description string
	// Priority is the API's: 1 (normal, "p4") … 4 (urgent, "p1").
	Priority    int
	Labels      []string
	Due         *Due
	ChildOrder  int
	Checked     bool
	AddedAt     time.Time
	UpdatedAt   time.Time
	CompletedAt time.Time // zero while open
}

// State is a deep copy of everything the fake holds, for comparing before
// and after: two States are equal (reflect.DeepEqual) when nothing changed.
type State struct {
	Projects []Project
	Sections []Section
	Labels   []Label
	// Tasks holds open and completed tasks.
	Tasks    []Task
	Comments []Comment
}

func (t Task) clone() Task {
	t.Labels = slices.Clone(t.Labels)
	if t.Due != nil {
		d := *t.Due
		t.Due = &d
	}
	return t
}

// store is the fake's data. It has no lock of its own: Server.mu guards it.
type store struct {
	projects []*Project
	sections []*Section
	labels   []*Label
	tasks    []*Task
	comments []*Comment

	projectByID map[string]*Project
	sectionByID map[string]*Section
	labelByID   map[string]*Label
	taskByID    map[string]*Task
	commentByID map[string]*Comment

	inboxID string
	userID  string

	// done records every command applied, by uuid, so a re-sent command
	// is not applied again; doneTemp maps its temp id to the id it made.
	done map[string]doneCommand
	// applied counts executions by uuid (at most 1 while dedupe works).
	applied map[string]int
}

type doneCommand struct {
	tempID string
	newID  string
}

func newStore() store {
	return store{
		projectByID: map[string]*Project{},
		sectionByID: map[string]*Section{},
		labelByID:   map[string]*Label{},
		taskByID:    map[string]*Task{},
		commentByID: map[string]*Comment{},
		done:        map[string]doneCommand{},
		applied:     map[string]int{},
	}
}

func (st *store) addProject(p *Project) {
	st.projects = append(st.projects, p)
	st.projectByID[p.ID] = p
}

func (st *store) addSection(s *Section) {
	st.sections = append(st.sections, s)
	st.sectionByID[s.ID] = s
}

func (st *store) addLabel(l *Label) {
	st.labels = append(st.labels, l)
	st.labelByID[l.ID] = l
}

func (st *store) addTask(t *Task) {
	st.tasks = append(st.tasks, t)
	st.taskByID[t.ID] = t
}

// openTasks returns the open tasks in order.
func (st *store) openTasks() []*Task {
	out := make([]*Task, 0, len(st.tasks))
	for _, t := range st.tasks {
		if !t.Checked {
			out = append(out, t)
		}
	}
	return out
}

// activeProjects returns the projects that are not archived.
func (st *store) activeProjects() []*Project {
	out := make([]*Project, 0, len(st.projects))
	for _, p := range st.projects {
		if !p.IsArchived {
			out = append(out, p)
		}
	}
	return out
}

// descendants returns the tasks below t (children, their children…).
func (st *store) descendants(id string) []*Task {
	var out []*Task
	frontier := map[string]bool{id: true}
	for len(frontier) > 0 {
		next := map[string]bool{}
		for _, t := range st.tasks {
			if frontier[t.ParentID] {
				out = append(out, t)
				next[t.ID] = true
			}
		}
		frontier = next
	}
	return out
}

// subprojects returns the project ids below id, id included.
func (st *store) subprojects(id string) map[string]bool {
	ids := map[string]bool{id: true}
	for changed := true; changed; {
		changed = false
		for _, p := range st.projects {
			if ids[p.ParentID] && !ids[p.ID] {
				ids[p.ID] = true
				changed = true
			}
		}
	}
	return ids
}

// deleteTasks removes the tasks whose ids are in ids, with their
// comments. No source says what becomes of a deleted task's (or
// project's) comments; that they go with it is this fake's assumption.
func (st *store) deleteTasks(ids map[string]bool) {
	st.tasks = slices.DeleteFunc(st.tasks, func(t *Task) bool { return ids[t.ID] })
	for id := range ids {
		delete(st.taskByID, id)
	}
	st.deleteComments(func(c *Comment) bool { return ids[c.TaskID] })
}

// deleteProjects removes the projects in ids with their sections and tasks.
func (st *store) deleteProjects(ids map[string]bool) {
	st.projects = slices.DeleteFunc(st.projects, func(p *Project) bool { return ids[p.ID] })
	st.sections = slices.DeleteFunc(st.sections, func(s *Section) bool {
		if ids[s.ProjectID] {
			delete(st.sectionByID, s.ID)
			return true
		}
		return false
	})
	tasks := map[string]bool{}
	for _, t := range st.tasks {
		if ids[t.ProjectID] {
			tasks[t.ID] = true
		}
	}
	st.deleteTasks(tasks)
	st.deleteComments(func(c *Comment) bool { return ids[c.ProjectID] })
	for id := range ids {
		delete(st.projectByID, id)
	}
}

func (st *store) nextChildOrder(projectID, sectionID, parentID string) int {
	n := 0
	for _, t := range st.tasks {
		if t.ProjectID == projectID && t.SectionID == sectionID && t.ParentID == parentID {
			n = max(n, t.ChildOrder)
		}
	}
	return n + 1
}

func (st *store) snapshot() State {
	var s State
	s.Projects = make([]Project, len(st.projects))
	for i, p := range st.projects {
		s.Projects[i] = *p
	}
	s.Sections = make([]Section, len(st.sections))
	for i, x := range st.sections {
		s.Sections[i] = *x
	}
	s.Labels = make([]Label, len(st.labels))
	for i, l := range st.labels {
		s.Labels[i] = *l
	}
	s.Tasks = make([]Task, len(st.tasks))
	for i, t := range st.tasks {
		s.Tasks[i] = t.clone()
	}
	s.Comments = make([]Comment, len(st.comments))
	for i, c := range st.comments {
		s.Comments[i] = *c
	}
	return s
}

// Seeding and reading state. These methods lock the server; they may be
// called while it serves requests. A seed that names a missing project,
// section or parent panics: it is a mistake in the test.

// InboxID returns the id of the Inbox project.
func (s *Server) InboxID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.inboxID
}

// AddProject creates a project. Empty fields get defaults: a fresh ID,
// the next ChildOrder, color "charcoal", view style "list", now.
func (s *Server) AddProject(p Project) Project {
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.TrimSpace(p.Name) == "" {
		panic("todoisttest: AddProject: empty name")
	}
	if p.ParentID != "" && s.st.projectByID[p.ParentID] == nil {
		panic(fmt.Sprintf("todoisttest: AddProject %q: no parent project %s", p.Name, p.ParentID))
	}
	np := s.newProject(p)
	return *np
}

func (s *Server) newProject(p Project) *Project {
	if p.ID == "" {
		p.ID = s.newID()
	}
	if p.Color == "" {
		p.Color = "charcoal"
	}
	if p.ViewStyle == "" {
		p.ViewStyle = "list"
	}
	if p.ChildOrder == 0 {
		for _, q := range s.st.projects {
			p.ChildOrder = max(p.ChildOrder, q.ChildOrder)
		}
		p.ChildOrder++
	}
	if p.CreatedAt.IsZero() {
		p.CreatedAt = s.now()
	}
	if p.UpdatedAt.IsZero() {
		p.UpdatedAt = p.CreatedAt
	}
	np := &p
	s.st.addProject(np)
	return np
}

// AddSection creates a section in s.ProjectID.
func (s *Server) AddSection(x Section) Section {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.projectByID[x.ProjectID] == nil {
		panic(fmt.Sprintf("todoisttest: AddSection %q: no project %s", x.Name, x.ProjectID))
	}
	return *s.newSection(x)
}

func (s *Server) newSection(x Section) *Section {
	if x.ID == "" {
		x.ID = s.newID()
	}
	if x.Order == 0 {
		for _, y := range s.st.sections {
			if y.ProjectID == x.ProjectID {
				x.Order = max(x.Order, y.Order)
			}
		}
		x.Order++
	}
	if x.AddedAt.IsZero() {
		x.AddedAt = s.now()
	}
	if x.UpdatedAt.IsZero() {
		x.UpdatedAt = x.AddedAt
	}
	nx := &x
	s.st.addSection(nx)
	return nx
}

// AddLabel creates a personal label.
func (s *Server) AddLabel(l Label) Label {
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.TrimSpace(l.Name) == "" {
		panic("todoisttest: AddLabel: empty name")
	}
	return *s.newLabel(l)
}

func (s *Server) newLabel(l Label) *Label {
	if l.ID == "" {
		l.ID = s.newNumericID()
	}
	if l.Color == "" {
		l.Color = "charcoal"
	}
	if l.Order == 0 {
		l.Order = len(s.st.labels) + 1
	}
	nl := &l
	s.st.addLabel(nl)
	return nl
}

// AddTask creates a task. An empty ProjectID means the Inbox; a SectionID
// or ParentID sets the project (and section) from it. Priority 0 means 1
// (normal). A Due with a String but no Date gets its Date from the String.
func (s *Server) AddTask(t Task) Task {
	defer s.flushWebhooks() // after the lock: the receiver may call back
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.SectionID != "" {
		sec := s.st.sectionByID[t.SectionID]
		if sec == nil {
			panic(fmt.Sprintf("todoisttest: AddTask %q: no section %s", t.Content, t.SectionID))
		}
		t.ProjectID = sec.ProjectID
	}
	if t.ParentID != "" {
		parent := s.st.taskByID[t.ParentID]
		if parent == nil {
			panic(fmt.Sprintf("todoisttest: AddTask %q: no parent task %s", t.Content, t.ParentID))
		}
		t.ProjectID, t.SectionID = parent.ProjectID, parent.SectionID
	}
	if t.ProjectID == "" {
		t.ProjectID = s.st.inboxID
	}
	if s.st.projectByID[t.ProjectID] == nil {
		panic(fmt.Sprintf("todoisttest: AddTask %q: no project %s", t.Content, t.ProjectID))
	}
	if t.Due != nil && t.Due.Date == "" && t.Due.String != "" {
		d, err := parseDueString(t.Due.String, s.wallNow())
		if err != nil {
			panic(fmt.Sprintf("todoisttest: AddTask %q: %v", t.Content, err))
		}
		if t.Due.Lang != "" {
			d.Lang = t.Due.Lang
		}
		t.Due = d
	}
	return s.newTask(t).clone()
}

func (s *Server) newTask(t Task) *Task {
	if t.ID == "" {
		t.ID = s.newID()
	}
	if t.Priority == 0 {
		t.Priority = 1
	}
	if t.Labels == nil {
		t.Labels = []string{}
	}
	if t.Due != nil && t.Due.Lang == "" {
		t.Due.Lang = "en"
	}
	if t.ChildOrder == 0 {
		t.ChildOrder = s.st.nextChildOrder(t.ProjectID, t.SectionID, t.ParentID)
	}
	if t.AddedAt.IsZero() {
		t.AddedAt = s.now()
	}
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = t.AddedAt
	}
	nt := &t
	s.st.addTask(nt)
	s.taskAdded(nt)
	return nt
}

// Projects returns the active projects, the Inbox first.
func (s *Server) Projects() []Project {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.st.activeProjects()
	out := make([]Project, len(ps))
	for i, p := range ps {
		out[i] = *p
	}
	return out
}

// Project returns the project with id.
func (s *Server) Project(id string) (Project, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.projectByID[id]
	if p == nil {
		return Project{}, false
	}
	return *p, true
}

// ProjectByName returns the first project whose name equals name, ignoring
// case.
func (s *Server) ProjectByName(name string) (Project, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.st.projects {
		if strings.EqualFold(p.Name, name) {
			return *p, true
		}
	}
	return Project{}, false
}

// Sections returns every section.
func (s *Server) Sections() []Section {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Section, len(s.st.sections))
	for i, x := range s.st.sections {
		out[i] = *x
	}
	return out
}

// Labels returns the personal labels.
func (s *Server) Labels() []Label {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Label, len(s.st.labels))
	for i, l := range s.st.labels {
		out[i] = *l
	}
	return out
}

// Tasks returns the open tasks, in the order they were created.
func (s *Server) Tasks() []Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.st.openTasks()
	out := make([]Task, len(ts))
	for i, t := range ts {
		out[i] = t.clone()
	}
	return out
}

// TasksIn returns the open tasks of a project.
func (s *Server) TasksIn(projectID string) []Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Task
	for _, t := range s.st.tasks {
		if !t.Checked && t.ProjectID == projectID {
			out = append(out, t.clone())
		}
	}
	return out
}

// Task returns the task with id, open or completed.
func (s *Server) Task(id string) (Task, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.st.taskByID[id]
	if t == nil {
		return Task{}, false
	}
	return t.clone(), true
}

// Snapshot returns a deep copy of the whole state.
func (s *Server) Snapshot() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.snapshot()
}
