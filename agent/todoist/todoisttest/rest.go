package todoisttest

import (
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Page sizes of paginated lists.
const (
	defaultLimit = 50
	maxLimit     = 200
)

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /api/v1/projects", s.listProjects)
	m.HandleFunc("GET /api/v1/projects/{id}", s.getProject)
	m.HandleFunc("GET /api/v1/tasks", s.listTasks)
	m.HandleFunc("GET /api/v1/tasks/filter", s.filterTasks)
	m.HandleFunc("GET /api/v1/tasks/{id}", s.getTask)
	m.HandleFunc("GET /api/v1/sections", s.listSections)
	m.HandleFunc("GET /api/v1/labels", s.listLabels)
	m.HandleFunc("GET /api/v1/comments", s.listComments)
	m.HandleFunc("GET /api/v1/user", s.getUser)
	m.HandleFunc("POST /api/v1/sync", s.sync)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, http.StatusNotFound, 478, "NOT_FOUND", "Not found", nil)
	})
}

// JSON shapes. The REST-style endpoints and /sync name some fields
// differently; each shape says which it is. Where Todoist's references
// disagree on a field, the fake sends what Doist's TypeScript SDK
// requires: it parses every answer against a zod schema, so a field it
// requires that the fake left out would fail the SDK on the real API
// (@doist/todoist-sdk 11, Doist/todoist-sdk-typescript src/types/…:
// projects/types.ts BaseProjectSchema, sections/types.ts
// SectionBaseSchema, labels/types.ts LabelSchema, users/types.ts
// CurrentUserSchema, sync/resources/user.ts SyncUserSchema, all parsed
// by sync/response.ts SyncResponseSchema). `make fakes-check` drives the
// fake with that SDK (docs/adapters.md).

const timeLayout = "2006-01-02T15:04:05.000000Z"

func ts(t time.Time) string { return t.UTC().Format(timeLayout) }

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// restProject is a project on GET /projects.
type restProject struct {
	ID             string  `json:"id"`
	Name           string  `json:"name"`
	Description    string  `json:"description"`
	Color          string  `json:"color"`
	ParentID       *string `json:"parent_id"`
	ChildOrder     int     `json:"child_order"`
	DefaultOrder   int     `json:"default_order"`
	IsCollapsed    bool    `json:"is_collapsed"`
	IsShared       bool    `json:"is_shared"`
	IsFavorite     bool    `json:"is_favorite"`
	IsArchived     bool    `json:"is_archived"`
	IsDeleted      bool    `json:"is_deleted"`
	IsFrozen       bool    `json:"is_frozen"`
	CanAssignTasks bool    `json:"can_assign_tasks"`
	ViewStyle      string  `json:"view_style"`
	InboxProject   bool    `json:"inbox_project"`
	CreatedAt      string  `json:"created_at"`
	UpdatedAt      string  `json:"updated_at"`
}

// syncProject is a project on /sync: inbox_project only when true. The
// API page spells the sharing flag "shared" here; BaseProjectSchema
// requires is_shared and default_order, as on REST, and the fake sends
// those.
type syncProject struct {
	ID             string  `json:"id"`
	Name           string  `json:"name"`
	Description    string  `json:"description"`
	Color          string  `json:"color"`
	ParentID       *string `json:"parent_id"`
	ChildOrder     int     `json:"child_order"`
	DefaultOrder   int     `json:"default_order"`
	IsCollapsed    bool    `json:"is_collapsed"`
	IsShared       bool    `json:"is_shared"`
	IsFavorite     bool    `json:"is_favorite"`
	IsArchived     bool    `json:"is_archived"`
	IsDeleted      bool    `json:"is_deleted"`
	IsFrozen       bool    `json:"is_frozen"`
	CanAssignTasks bool    `json:"can_assign_tasks"`
	ViewStyle      string  `json:"view_style"`
	InboxProject   bool    `json:"inbox_project,omitempty"`
	CreatedAt      string  `json:"created_at"`
	UpdatedAt      string  `json:"updated_at"`
}

func (p *Project) rest() restProject {
	return restProject{ID: p.ID, Name: p.Name, Description: p.Description, Color: p.Color,
		ParentID: nullable(p.ParentID), ChildOrder: p.ChildOrder, DefaultOrder: p.ChildOrder,
		IsFavorite: p.IsFavorite, IsArchived: p.IsArchived, ViewStyle: p.ViewStyle, InboxProject: p.IsInbox,
		CreatedAt: ts(p.CreatedAt), UpdatedAt: ts(p.UpdatedAt)}
}

func (p *Project) sync() syncProject {
	return syncProject{ID: p.ID, Name: p.Name, Description: p.Description, Color: p.Color,
		ParentID: nullable(p.ParentID), ChildOrder: p.ChildOrder, DefaultOrder: p.ChildOrder,
		IsFavorite: p.IsFavorite, IsArchived: p.IsArchived, ViewStyle: p.ViewStyle, InboxProject: p.IsInbox,
		CreatedAt: ts(p.CreatedAt), UpdatedAt: ts(p.UpdatedAt)}
}

// sectionJSON is a section; REST and /sync agree. description is
// required and nullable (SectionBaseSchema); the fake's sections have
// none.
type sectionJSON struct {
	ID           string  `json:"id"`
	UserID       string  `json:"user_id"`
	ProjectID    string  `json:"project_id"`
	Name         string  `json:"name"`
	Description  *string `json:"description"`
	SectionOrder int     `json:"section_order"`
	IsCollapsed  bool    `json:"is_collapsed"`
	IsArchived   bool    `json:"is_archived"`
	IsDeleted    bool    `json:"is_deleted"`
	ArchivedAt   *string `json:"archived_at"`
	AddedAt      string  `json:"added_at"`
	UpdatedAt    string  `json:"updated_at"`
}

func (s *Server) sectionJSON(x *Section) sectionJSON {
	return sectionJSON{ID: x.ID, UserID: s.st.userID, ProjectID: x.ProjectID, Name: x.Name,
		SectionOrder: x.Order, AddedAt: ts(x.AddedAt), UpdatedAt: ts(x.UpdatedAt)}
}

// restLabel is a label on GET /labels ("order").
type restLabel struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Color      string `json:"color"`
	Order      int    `json:"order"`
	IsFavorite bool   `json:"is_favorite"`
}

// syncLabel is a label on /sync: REST's fields and is_deleted. The API
// page spells its position "item_order" here; LabelSchema, which the
// SDK parses /sync labels with, requires "order", and the fake sends
// that.
type syncLabel struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Color      string `json:"color"`
	Order      int    `json:"order"`
	IsDeleted  bool   `json:"is_deleted"`
	IsFavorite bool   `json:"is_favorite"`
}

type dueJSON struct {
	Date        string  `json:"date"`
	String      string  `json:"string"`
	Lang        string  `json:"lang"`
	IsRecurring bool    `json:"is_recurring"`
	Timezone    *string `json:"timezone"`
}

// syncItem is a task on /sync, where tasks are "items".
type syncItem struct {
	ID             string   `json:"id"`
	UserID         string   `json:"user_id"`
	ProjectID      string   `json:"project_id"`
	SectionID      *string  `json:"section_id"`
	ParentID       *string  `json:"parent_id"`
	AddedByUID     string   `json:"added_by_uid"`
	AssignedByUID  *string  `json:"assigned_by_uid"`
	ResponsibleUID *string  `json:"responsible_uid"`
	Content        string   `json:"content"`
	Description    string   `json:"description"`
	Priority       int      `json:"priority"`
	Labels         []string `json:"labels"`
	Due            *dueJSON `json:"due"`
	Deadline       any      `json:"deadline"`
	Duration       any      `json:"duration"`
	ChildOrder     int      `json:"child_order"`
	DayOrder       int      `json:"day_order"`
	IsCollapsed    bool     `json:"is_collapsed"`
	Checked        bool     `json:"checked"`
	IsDeleted      bool     `json:"is_deleted"`
	AddedAt        string   `json:"added_at"`
	UpdatedAt      string   `json:"updated_at"`
	CompletedAt    *string  `json:"completed_at"`
}

// restTask is a task on GET /tasks: the /sync fields plus note_count.
type restTask struct {
	syncItem
	NoteCount int `json:"note_count"`
}

func (s *Server) syncItem(t *Task) syncItem {
	it := syncItem{ID: t.ID, UserID: s.st.userID, ProjectID: t.ProjectID,
		SectionID: nullable(t.SectionID), ParentID: nullable(t.ParentID), AddedByUID: s.st.userID,
		Content: t.Content, Description: t.Description, Priority: t.Priority, Labels: t.Labels,
		ChildOrder: t.ChildOrder, DayOrder: -1, Checked: t.Checked,
		AddedAt: ts(t.AddedAt), UpdatedAt: ts(t.UpdatedAt)}
	if it.Labels == nil {
		it.Labels = []string{}
	}
	if t.Due != nil {
		it.Due = &dueJSON{Date: t.Due.Date, String: t.Due.String, Lang: t.Due.Lang, IsRecurring: t.Due.IsRecurring, Timezone: nullable(t.Due.Timezone)}
	}
	if !t.CompletedAt.IsZero() {
		c := ts(t.CompletedAt)
		it.CompletedAt = &c
	}
	return it
}

func (s *Server) restTask(t *Task) restTask { return restTask{syncItem: s.syncItem(t)} }

// userJSON is GET /user (and the core of the /sync "user" resource:
// syncUserJSON). Besides the fields the client reads, it carries every
// field CurrentUserSchema requires, with the values of a new free
// account (developer.todoist.com/api/v1 #tag/Sync/User's example).
type userJSON struct {
	ID                string  `json:"id"`
	Email             string  `json:"email"`
	FullName          string  `json:"full_name"`
	InboxProjectID    string  `json:"inbox_project_id"`
	Lang              string  `json:"lang"`
	StartDay          int     `json:"start_day"`
	NextWeek          int     `json:"next_week"`
	WeekendStartDay   int     `json:"weekend_start_day"`
	DaysOff           []int   `json:"days_off"`
	StartPage         string  `json:"start_page"`
	DateFormat        int     `json:"date_format"`
	TimeFormat        int     `json:"time_format"`
	DailyGoal         int     `json:"daily_goal"`
	WeeklyGoal        int     `json:"weekly_goal"`
	CompletedCount    int     `json:"completed_count"`
	CompletedToday    int     `json:"completed_today"`
	Karma             float64 `json:"karma"`
	KarmaTrend        string  `json:"karma_trend"`
	IsPremium         bool    `json:"is_premium"`
	PremiumStatus     string  `json:"premium_status"`
	BusinessAccountID *string `json:"business_account_id"`
	TZInfo            struct {
		Timezone  string `json:"timezone"`
		GMTString string `json:"gmt_string"`
		Hours     int    `json:"hours"`
		Minutes   int    `json:"minutes"`
		IsDST     int    `json:"is_dst"`
	} `json:"tz_info"`
}

func (s *Server) userJSON() userJSON {
	u := userJSON{ID: s.st.userID, Email: "tester@example.com", FullName: "Test User",
		InboxProjectID: s.st.inboxID, Lang: "en", StartDay: 1, NextWeek: 1, WeekendStartDay: 6, DaysOff: []int{6, 7},
		StartPage: "inbox", DailyGoal: 5, WeeklyGoal: 30, KarmaTrend: "-", PremiumStatus: "not_premium"}
	if s.fullName != "" || s.email != "" {
		u.FullName, u.Email = s.fullName, s.email
	}
	// tz_info as in the User example of developer.todoist.com/api/v1
	// #tag/Sync/User.
	_, off := s.now().In(s.tz).Zone()
	sign := "+"
	if off < 0 {
		sign, off = "-", -off
	}
	u.TZInfo.Timezone = s.tz.String()
	u.TZInfo.Hours, u.TZInfo.Minutes = off/3600, off%3600/60
	if sign == "-" {
		u.TZInfo.Hours = -u.TZInfo.Hours
	}
	u.TZInfo.GMTString = fmt.Sprintf("%s%02d:%02d", sign, off/3600, off%3600/60)
	if s.now().In(s.tz).IsDST() {
		u.TZInfo.IsDST = 1
	}
	return u
}

// syncUserJSON is the /sync "user" resource: GET /user's fields and
// those SyncUserSchema requires besides, again a new free account's.
type syncUserJSON struct {
	userJSON
	ActivatedUser         bool    `json:"activated_user"`
	AutoReminder          int     `json:"auto_reminder"`
	FeatureIdentifier     string  `json:"feature_identifier"`
	Features              any     `json:"features"`
	HasMagicNumber        bool    `json:"has_magic_number"`
	HasPassword           bool    `json:"has_password"`
	ImageID               *string `json:"image_id"`
	IsCelebrationsEnabled bool    `json:"is_celebrations_enabled"`
	JoinableWorkspace     any     `json:"joinable_workspace"`
	JoinedAt              string  `json:"joined_at"`
	GettingStartedGuide   any     `json:"getting_started_guide_projects"`
	PremiumUntil          *string `json:"premium_until"`
	ShareLimit            int     `json:"share_limit"`
	SortOrder             int     `json:"sort_order"`
	ThemeID               string  `json:"theme_id"`
	UniquePrefix          int     `json:"unique_prefix"`
	VerificationStatus    string  `json:"verification_status"`
	WebsocketURL          string  `json:"websocket_url"`
}

func (s *Server) syncUserJSON() syncUserJSON {
	return syncUserJSON{userJSON: s.userJSON(), ActivatedUser: true, AutoReminder: 30,
		FeatureIdentifier: s.st.userID + "_0", Features: map[string]any{"karma_disabled": false, "restriction": 3,
			"karma_vacation": false, "beta": 0, "has_push_reminders": false, "dateist_inline_disabled": false},
		HasPassword: true, IsCelebrationsEnabled: true, JoinedAt: ts(s.joined), ShareLimit: 5, ThemeID: "0", UniquePrefix: 1,
		VerificationStatus: "verified", WebsocketURL: "wss://todoisttest.invalid/ws"}
}

type pageJSON[T any] struct {
	Results    []T     `json:"results"`
	NextCursor *string `json:"next_cursor"`
}

// window works out the page a list request asks for: it checks limit and
// cursor and returns the slice bounds and the next cursor. On a bad
// parameter it writes the 400 and returns ok false.
func (s *Server) window(w http.ResponseWriter, q url.Values, n int) (lo, hi int, next *string, ok bool) {
	limit := defaultLimit
	if v := q.Get("limit"); v != "" {
		l, err := strconv.Atoi(v)
		if err != nil || l < 1 || l > maxLimit {
			s.writeErrorLocked(w, http.StatusBadRequest, 20, "INVALID_ARGUMENT_VALUE",
				fmt.Sprintf("Invalid argument value: limit must be between 1 and %d", maxLimit), map[string]any{"argument": "limit"})
			return 0, 0, nil, false
		}
		limit = l
	}
	key := paramsKey(q)
	if c := q.Get("cursor"); c != "" {
		off, ok := decodeCursor(c, key)
		if !ok {
			s.writeErrorLocked(w, http.StatusBadRequest, 20, "INVALID_ARGUMENT_VALUE", "Invalid cursor", map[string]any{"argument": "cursor"})
			return 0, 0, nil, false
		}
		lo = min(off, n)
	}
	hi = min(lo+limit, n)
	if hi < n {
		c := encodeCursor(hi, key)
		next = &c
	}
	return lo, hi, next, true
}

// paramsKey identifies a list request's parameters other than cursor and
// limit: a cursor is only valid with the parameters it was made for.
func paramsKey(q url.Values) uint32 {
	keys := make([]string, 0, len(q))
	for k := range q {
		if k != "cursor" && k != "limit" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	h := fnv.New32a()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s&", k, strings.Join(q[k], ","))
	}
	return h.Sum32()
}

func encodeCursor(offset int, key uint32) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "v1:%d:%08x", offset, key))
}

func decodeCursor(c string, key uint32) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, false
	}
	var off int
	var k uint32
	if _, err := fmt.Sscanf(string(b), "v1:%d:%08x", &off, &k); err != nil || k != key || off < 0 {
		return 0, false
	}
	return off, true
}

// listProjects serves GET /projects.
func (s *Server) listProjects(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.st.activeProjects()
	lo, hi, next, ok := s.window(w, r.URL.Query(), len(ps))
	if !ok {
		return
	}
	out := make([]restProject, 0, hi-lo)
	for _, p := range ps[lo:hi] {
		out = append(out, p.rest())
	}
	writeJSON(w, http.StatusOK, pageJSON[restProject]{Results: out, NextCursor: next})
}

// getProject serves GET /projects/{id}.
func (s *Server) getProject(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.projectByID[r.PathValue("id")]
	if p == nil {
		s.writeErrorLocked(w, http.StatusNotFound, 478, "NOT_FOUND", "Project not found", nil)
		return
	}
	writeJSON(w, http.StatusOK, p.rest())
}

// listTasks serves GET /tasks. Unknown parameters, "filter" among them,
// are ignored, as by the real API.
func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	projectID, sectionID, parentID, label := q.Get("project_id"), q.Get("section_id"), q.Get("parent_id"), q.Get("label")
	notFound := func(what string) {
		s.writeErrorLocked(w, http.StatusNotFound, 478, "NOT_FOUND", what+" not found", nil)
	}
	if projectID != "" && s.st.projectByID[projectID] == nil {
		notFound("Project")
		return
	}
	if sectionID != "" && s.st.sectionByID[sectionID] == nil {
		notFound("Section")
		return
	}
	if parentID != "" && s.st.taskByID[parentID] == nil {
		notFound("Task")
		return
	}
	var ids map[string]bool
	if v := q.Get("ids"); v != "" {
		ids = map[string]bool{}
		for _, id := range strings.Split(v, ",") {
			ids[strings.TrimSpace(id)] = true
		}
	}
	var sel []*Task
	for _, t := range s.st.openTasks() {
		switch {
		case projectID != "" && t.ProjectID != projectID,
			sectionID != "" && t.SectionID != sectionID,
			parentID != "" && t.ParentID != parentID,
			label != "" && !hasLabel(t, label),
			ids != nil && !ids[t.ID]:
			continue
		}
		sel = append(sel, t)
	}
	s.writeTasks(w, q, sel)
}

func hasLabel(t *Task, name string) bool {
	for _, l := range t.Labels {
		if strings.EqualFold(l, name) {
			return true
		}
	}
	return false
}

func (s *Server) writeTasks(w http.ResponseWriter, q url.Values, sel []*Task) {
	lo, hi, next, ok := s.window(w, q, len(sel))
	if !ok {
		return
	}
	out := make([]restTask, 0, hi-lo)
	for _, t := range sel[lo:hi] {
		out = append(out, s.restTask(t))
	}
	writeJSON(w, http.StatusOK, pageJSON[restTask]{Results: out, NextCursor: next})
}

// filterTasks serves GET /tasks/filter?query=.
func (s *Server) filterTasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	query := q.Get("query")
	if strings.TrimSpace(query) == "" {
		s.writeError(w, http.StatusBadRequest, 19, "ARGUMENT_MISSING", "Required argument is missing", map[string]any{"argument": "query"})
		return
	}
	if utf8.RuneCountInString(query) > 1024 {
		s.writeError(w, http.StatusBadRequest, 20, "INVALID_ARGUMENT_VALUE", "Invalid argument value", map[string]any{"argument": "query"})
		return
	}
	f, err := parseFilter(query)
	if err != nil {
		s.writeError(w, http.StatusBadRequest, 482, "INVALID_SEARCH_QUERY", "Invalid search query: "+err.Error(), nil)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	env := &filterEnv{st: &s.st, now: s.wallNow()}
	var sel []*Task
	for _, t := range s.st.openTasks() {
		if f.match(t, env) {
			sel = append(sel, t)
		}
	}
	s.writeTasks(w, q, sel)
}

// getTask serves GET /tasks/{id}: open tasks only.
func (s *Server) getTask(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.st.taskByID[r.PathValue("id")]
	if t == nil || t.Checked {
		s.writeErrorLocked(w, http.StatusNotFound, 478, "NOT_FOUND", "Task not found", nil)
		return
	}
	writeJSON(w, http.StatusOK, s.restTask(t))
}

// listSections serves GET /sections[?project_id=].
func (s *Server) listSections(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	projectID := q.Get("project_id")
	if projectID != "" && s.st.projectByID[projectID] == nil {
		s.writeErrorLocked(w, http.StatusNotFound, 478, "NOT_FOUND", "Project not found", nil)
		return
	}
	var sel []*Section
	for _, x := range s.st.sections {
		if projectID == "" || x.ProjectID == projectID {
			sel = append(sel, x)
		}
	}
	lo, hi, next, ok := s.window(w, q, len(sel))
	if !ok {
		return
	}
	out := make([]sectionJSON, 0, hi-lo)
	for _, x := range sel[lo:hi] {
		out = append(out, s.sectionJSON(x))
	}
	writeJSON(w, http.StatusOK, pageJSON[sectionJSON]{Results: out, NextCursor: next})
}

// listLabels serves GET /labels.
func (s *Server) listLabels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lo, hi, next, ok := s.window(w, r.URL.Query(), len(s.st.labels))
	if !ok {
		return
	}
	out := make([]restLabel, 0, hi-lo)
	for _, l := range s.st.labels[lo:hi] {
		out = append(out, restLabel{ID: l.ID, Name: l.Name, Color: l.Color, Order: l.Order, IsFavorite: l.IsFavorite})
	}
	writeJSON(w, http.StatusOK, pageJSON[restLabel]{Results: out, NextCursor: next})
}

// getUser serves GET /user.
func (s *Server) getUser(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, s.userJSON())
}
