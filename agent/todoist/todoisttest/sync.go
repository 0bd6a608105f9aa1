package todoisttest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Request limits (developer.todoist.com/api/v1 #tag/Request-limits):
// "Maximum 100 commands per request" and "There is a 1 MiB HTTP request
// body limit on POST requests". The status of a body over the limit is
// undocumented; 413 is a plausible stand-in.
const (
	maxCommands = 100
	maxSyncBody = 1 << 20
)

// syncCommand is one command of a /sync write.
type syncCommand struct {
	Type   string                     `json:"type"`
	UUID   string                     `json:"uuid"`
	TempID string                     `json:"temp_id"`
	Args   map[string]json.RawMessage `json:"args"`
}

// decodeList reads a JSON array, or a JSON string holding one (as the
// form-encoded body sends, and some clients send inside JSON too).
func decodeList[T any](raw json.RawMessage) ([]T, error) {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var inner string
		if err := json.Unmarshal(raw, &inner); err != nil {
			return nil, err
		}
		raw = json.RawMessage(inner)
	}
	var out []T
	err := json.Unmarshal(raw, &out)
	return out, err
}

// sync serves POST /sync: commands first, then the resources asked for.
func (s *Server) sync(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxSyncBody)
	var rawTypes, rawCmds json.RawMessage
	var syncToken string
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		var body struct {
			SyncToken     string          `json:"sync_token"`
			ResourceTypes json.RawMessage `json:"resource_types"`
			Commands      json.RawMessage `json:"commands"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			s.badBody(w, err)
			return
		}
		rawTypes, rawCmds, syncToken = body.ResourceTypes, body.Commands, body.SyncToken
	case "application/x-www-form-urlencoded", "multipart/form-data":
		var err error
		if mt == "multipart/form-data" {
			err = r.ParseMultipartForm(maxSyncBody)
		} else {
			err = r.ParseForm()
		}
		if err != nil {
			s.badBody(w, err)
			return
		}
		// Form fields hold JSON text.
		rawTypes, rawCmds = json.RawMessage(r.PostForm.Get("resource_types")), json.RawMessage(r.PostForm.Get("commands"))
		syncToken = r.PostForm.Get("sync_token")
	default:
		s.writeError(w, http.StatusBadRequest, 20, "INVALID_ARGUMENT_VALUE", "Unsupported content type "+mt, nil)
		return
	}
	types, err := decodeList[string](rawTypes)
	if err != nil {
		s.writeError(w, http.StatusBadRequest, 20, "INVALID_ARGUMENT_VALUE", "Invalid argument value", map[string]any{"argument": "resource_types"})
		return
	}
	cmds, err := decodeList[syncCommand](rawCmds)
	if err != nil {
		s.writeError(w, http.StatusBadRequest, 20, "INVALID_ARGUMENT_VALUE", "Invalid argument value", map[string]any{"argument": "commands"})
		return
	}
	if len(cmds) > maxCommands {
		s.writeError(w, http.StatusBadRequest, 20, "INVALID_ARGUMENT_VALUE",
			fmt.Sprintf("Too many commands: at most %d per request", maxCommands), map[string]any{"argument": "commands"})
		return
	}
	for _, c := range cmds {
		for arg, v := range map[string]string{"uuid": c.UUID, "type": c.Type} {
			if v == "" {
				s.writeError(w, http.StatusBadRequest, 19, "ARGUMENT_MISSING", "Required argument is missing", map[string]any{"argument": arg})
				return
			}
		}
	}

	granted := scopesOf(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(types) > 0 && !granted.allow(canRead) {
		writeJSON(w, http.StatusForbidden, s.scopeError())
		return
	}
	s.syncCount++
	token := fmt.Sprintf("fake-%016x", s.rng.Uint64())
	resp := map[string]any{"sync_token": token, "full_sync": len(types) > 0}
	if len(rawCmds) > 0 {
		status, mapping := s.applyCommands(cmds, granted)
		resp["sync_status"] = status
		resp["temp_id_mapping"] = mapping
	}
	if len(types) > 0 {
		now := s.st.snapshot()
		// What Todoist answers a sync_token it does not know (or no
		// longer keeps) is undocumented; the fake answers a full sync,
		// "full_sync": true, which the client must take as one. (The
		// client also handles a 400 for it, which the fake never sends.)
		since, incremental := s.tokens[syncToken]
		switch {
		case incremental && syncToken != "*":
			// Only what changed since the token's state.
			resp["full_sync"] = false
			s.addResources(resp, types, now, &since)
			s.remember(token, now)
		case s.stale != nil:
			s.fullSyncs++
			resp["full_sync_date_utc"] = s.stale.at.UTC().Format(time.RFC3339)
			s.addResources(resp, types, s.stale.st, nil)
			s.remember(token, s.stale.st)
		default:
			s.fullSyncs++
			resp["full_sync_date_utc"] = s.now().UTC().Format(time.RFC3339)
			s.addResources(resp, types, now, nil)
			s.remember(token, now)
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) badBody(w http.ResponseWriter, err error) {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		s.writeError(w, http.StatusRequestEntityTooLarge, 20, "INVALID_ARGUMENT_VALUE", "Request body too large", nil)
		return
	}
	s.writeError(w, http.StatusBadRequest, 20, "INVALID_ARGUMENT_VALUE", "Invalid request body", nil)
}

var allResources = []string{"projects", "sections", "labels", "items", "user", "notes", "project_notes",
	"filters", "reminders", "reminders_location", "collaborators", "collaborator_states",
	"live_notifications", "user_plan_limits"}

// wanted resolves resource_types ("all", "-x" excludes).
func wanted(types []string) map[string]bool {
	want := map[string]bool{}
	for _, t := range types {
		switch {
		case t == "all":
			for _, r := range allResources {
				want[r] = true
			}
		case strings.HasPrefix(t, "-"):
		default:
			want[t] = true
		}
	}
	for _, t := range types {
		if name, ok := strings.CutPrefix(t, "-"); ok {
			delete(want, name)
		}
	}
	return want
}

// addResources adds the resource types asked for, from st: everything
// active when since is nil (a full sync), else what changed since that
// state, deleted objects included (an incremental sync: see deleted).
// Callers hold s.mu.
func (s *Server) addResources(resp map[string]any, types []string, st State, since *State) {
	for r := range wanted(types) {
		switch r {
		case "projects":
			resp[r] = changes(st.Projects, since, func(was *State) []Project { return was.Projects },
				func(p Project) string { return p.ID }, func(p Project) bool { return p.IsArchived },
				func(p Project) any { return p.sync() })
		case "sections":
			resp[r] = changes(st.Sections, since, func(was *State) []Section { return was.Sections },
				func(x Section) string { return x.ID }, func(Section) bool { return false },
				func(x Section) any { return s.sectionJSON(&x) })
		case "labels":
			resp[r] = changes(st.Labels, since, func(was *State) []Label { return was.Labels },
				func(l Label) string { return l.ID }, func(Label) bool { return false },
				func(l Label) any {
					return syncLabel{ID: l.ID, Name: l.Name, Color: l.Color, Order: l.Order, IsFavorite: l.IsFavorite}
				})
		case "items":
			resp[r] = changes(st.Tasks, since, func(was *State) []Task { return was.Tasks },
				func(t Task) string { return t.ID }, func(t Task) bool { return t.Checked },
				func(t Task) any { return s.syncItem(&t) })
		case "notes":
			// Task comments; a project's are "project_notes".
			resp[r] = changes(taskComments(st.Comments), since, func(was *State) []Comment { return taskComments(was.Comments) },
				func(c Comment) string { return c.ID }, func(Comment) bool { return false },
				func(c Comment) any { return s.commentJSON(&c) })
		case "user":
			resp[r] = s.syncUserJSON()
		case "user_plan_limits":
			resp[r] = map[string]any{"current": map[string]any{
				"max_projects": s.limits.Projects, "max_sections": s.limits.SectionsPerProject, "max_tasks": s.limits.TasksPerProject}}
		default:
			if slices.Contains(allResources, r) {
				resp[r] = []any{}
			}
		}
	}
}

// changes is one resource of a sync answer: when since is nil (a full
// sync), every object of cur but those inactive (archived projects,
// completed tasks) reports; else those that differ from, or are not in,
// the state since, and each object gone from it as deleted says.
func changes[T any](cur []T, since *State, of func(*State) []T, id func(T) string, inactive func(T) bool, toJSON func(T) any) []any {
	old := map[string]T{}
	if since != nil {
		for _, x := range of(since) {
			old[id(x)] = x
		}
	}
	out := []any{}
	for _, x := range cur {
		o, ok := old[id(x)]
		delete(old, id(x))
		if since == nil && inactive(x) || since != nil && ok && reflect.DeepEqual(o, x) {
			continue
		}
		out = append(out, toJSON(x))
	}
	for _, id := range slices.Sorted(maps.Keys(old)) {
		out = append(out, deleted(toJSON(old[id])))
	}
	return out
}

// deleted is an object gone since an incremental sync's token: the whole
// object as it last was, with is_deleted true. The API pages show no
// deleted object; Doist's SDK parses each object of a sync answer against
// the resource's full schema, is_deleted one of its fields (TaskSchema,
// BaseProjectSchema, SectionBaseSchema in Doist/todoist-sdk-typescript
// src/types/…), so a bare {"id","is_deleted"} would fail it on the real
// API.
func deleted(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic("todoisttest: " + err.Error()) // the fake's own shapes always encode
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic("todoisttest: " + err.Error())
	}
	m["is_deleted"] = true
	return m
}

// maxTokens is how many sync tokens the fake remembers for incremental
// syncs.
const maxTokens = 64

// remember keeps the state a sync token stands for. Callers hold s.mu.
func (s *Server) remember(token string, st State) {
	s.tokens[token] = st
	s.tokenOrder = append(s.tokenOrder, token)
	if len(s.tokenOrder) > maxTokens {
		delete(s.tokens, s.tokenOrder[0])
		s.tokenOrder = s.tokenOrder[1:]
	}
}

// DelayFullSyncs makes every later full sync answer the data as it is now,
// with full_sync_date_utc saying so, until ServeFreshFullSyncs: "For big
// accounts, the data in the initial sync may be returned with some delay,
// and newer objects and updates may seem to be missing"; an incremental
// sync with that answer's sync_token gets the latest updates
// (developer.todoist.com/api/v1 #tag/Sync/Overview, "Full sync data
// delay").
func (s *Server) DelayFullSyncs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st.snapshot()
	s.stale = &staleFull{at: s.now(), st: st}
}

// ServeFreshFullSyncs ends DelayFullSyncs.
func (s *Server) ServeFreshFullSyncs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stale = nil
}

// staleFull is the data delayed full syncs answer.
type staleFull struct {
	at time.Time
	st State
}

// applyCommands runs commands in order, those the token's scopes
// cover. Callers hold s.mu.
func (s *Server) applyCommands(cmds []syncCommand, granted scopes) (status map[string]any, mapping map[string]string) {
	status = make(map[string]any, len(cmds))
	mapping = map[string]string{}
	temp := map[string]string{} // temp id → real id, for this request
	for _, c := range cmds {
		if _, ok := s.st.done[c.UUID]; ok {
			// Already applied: "Todoist will not execute a command that
			// has same UUID as a previously executed command"
			// (developer.todoist.com/api/v1 #tag/Sync/Overview, "Command
			// UUID"). Whether the answer still maps its temp id is
			// undocumented (one integrator saw it mapped, once); the fake
			// answers the case a client must survive: "ok", no
			// temp_id_mapping, and the temp id unknown to the rest of the
			// request.
			status[c.UUID] = "ok"
			continue
		}
		if !granted.allow(commandNeeds(c.Type)) {
			status[c.UUID] = s.scopeError()
			continue
		}
		if f := s.cmdFault; f != nil && f.left != 0 {
			if f.left > 0 {
				f.left--
			}
			status[c.UUID] = s.faultError(f.f)
			continue
		}
		a := &cmdArgs{s: s, m: c.Args, temp: temp}
		newID, e := s.exec(c.Type, a)
		if e != nil {
			status[c.UUID] = e
			continue
		}
		s.st.done[c.UUID] = doneCommand{tempID: c.TempID, newID: newID}
		s.st.applied[c.UUID]++
		status[c.UUID] = "ok"
		if c.TempID != "" && newID != "" {
			temp[c.TempID] = newID
			mapping[c.TempID] = newID
		}
	}
	return status, mapping
}

// cmdArgs reads a command's arguments.
type cmdArgs struct {
	s    *Server
	m    map[string]json.RawMessage
	temp map[string]string
}

func (a *cmdArgs) has(k string) bool {
	v, ok := a.m[k]
	return ok && string(v) != "null"
}

func (a *cmdArgs) isNull(k string) bool {
	v, ok := a.m[k]
	return ok && string(v) == "null"
}

func (a *cmdArgs) invalid(k string) *apiError {
	return a.s.newError(http.StatusBadRequest, 20, "INVALID_ARGUMENT_VALUE", "Invalid argument value", map[string]any{"argument": k})
}

func (a *cmdArgs) missing(k string) *apiError {
	return a.s.newError(http.StatusBadRequest, 19, "ARGUMENT_MISSING", "Required argument is missing", map[string]any{"argument": k})
}

// str reads an optional string argument.
func (a *cmdArgs) str(k string) (string, *apiError) {
	if !a.has(k) {
		return "", nil
	}
	var v string
	if json.Unmarshal(a.m[k], &v) != nil {
		return "", a.invalid(k)
	}
	return v, nil
}

// required reads a string argument that must be present and not blank.
func (a *cmdArgs) required(k string) (string, *apiError) {
	v, e := a.str(k)
	if e == nil && strings.TrimSpace(v) == "" {
		e = a.missing(k)
	}
	return v, e
}

// id reads an optional id argument, resolving temp ids of the request.
func (a *cmdArgs) id(k string) (string, *apiError) {
	v, e := a.str(k)
	if real, ok := a.temp[v]; ok {
		v = real
	}
	return v, e
}

// notFound is the command error for an id that names nothing. /sync
// names the kind of object in error_tag (ITEM_NOT_FOUND,
// PROJECT_NOT_FOUND, …) where REST says NOT_FOUND; an id that is neither
// real-looking nor a temp id of the request is INVALID_TEMP_ID, error
// code 15 "Invalid temporary id" (developer.todoist.com/api/v1
// #tag/Sync/Overview, "Response / Error"). The shape of ITEM_NOT_FOUND
// (error_code 22, http_code 404) is the one integrations record from the
// live API (e.g. test fixtures quoting {"error":"Item not found",
// "error_code":22,"error_tag":"ITEM_NOT_FOUND","http_code":404}); the
// other kinds' codes are plausible stand-ins.
func (s *Server) notFound(kind, id string) *apiError {
	if id != "" && !looksLikeID(id) {
		return s.newError(http.StatusBadRequest, 15, "INVALID_TEMP_ID", "Invalid temporary id", nil)
	}
	e := map[string]struct {
		tag, msg string
		code     int
	}{
		"Task":    {"ITEM_NOT_FOUND", "Item not found", 22},
		"Project": {"PROJECT_NOT_FOUND", "Project not found", 21},
		"Section": {"SECTION_NOT_FOUND", "Section not found", 23},
		"Label":   {"LABEL_NOT_FOUND", "Label not found", 24},
		"Comment": {"NOTE_NOT_FOUND", "Note not found", 25},
	}[kind]
	return s.newError(http.StatusNotFound, e.code, e.tag, e.msg, nil)
}

func (a *cmdArgs) project(k string, required bool) (*Project, *apiError) {
	id, e := a.id(k)
	if e != nil {
		return nil, e
	}
	if id == "" {
		if required {
			return nil, a.missing(k)
		}
		return nil, nil
	}
	p := a.s.st.projectByID[id]
	if p == nil || p.IsArchived {
		return nil, a.s.notFound("Project", id)
	}
	return p, nil
}

func (a *cmdArgs) section(k string) (*Section, *apiError) {
	id, e := a.id(k)
	if e != nil || id == "" {
		return nil, e
	}
	x := a.s.st.sectionByID[id]
	if x == nil {
		return nil, a.s.notFound("Section", id)
	}
	return x, nil
}

func (a *cmdArgs) task(k string, required bool) (*Task, *apiError) {
	id, e := a.id(k)
	if e != nil {
		return nil, e
	}
	if id == "" {
		if required {
			return nil, a.missing(k)
		}
		return nil, nil
	}
	t := a.s.st.taskByID[id]
	if t == nil {
		return nil, a.s.notFound("Task", id)
	}
	return t, nil
}

// due reads a due object; null clears. A date is taken as it is ("Create
// or update due date from a date object", developer.todoist.com/api/v1
// #tag/Due-dates): it is not read again relative to today, and a string
// beside it only carries a recurrence, which "this approach does not
// allow you to create" from a date alone. Without a date, the string is
// parsed relative to the user's today.
func (a *cmdArgs) due() (*Due, *apiError) {
	var d struct {
		String   string `json:"string"`
		Date     string `json:"date"`
		Datetime string `json:"datetime"`
		Timezone string `json:"timezone"`
		Lang     string `json:"lang"`
	}
	bad := a.s.newError(http.StatusBadRequest, 482, "INVALID_DATE_FORMAT", "Invalid date format", map[string]any{"argument": "due"})
	if json.Unmarshal(a.m["due"], &d) != nil {
		return nil, a.invalid("due")
	}
	if d.Date == "" {
		d.Date = d.Datetime
	}
	// lang is the language the string is read in, and is stored with
	// the due date ("Lang which has to be used to parse the content of
	// the string attribute", developer.todoist.com/api/v1 #tag/Due-dates);
	// this fake reads English only, and stores the lang it was given.
	if d.Date != "" {
		due, ok := a.s.dueFromDate(d.Date, d.Timezone)
		if !ok {
			return nil, bad
		}
		if rec, err := parseDueString(d.String, a.s.wallNow()); err == nil && rec != nil && rec.IsRecurring {
			due.String, due.IsRecurring = strings.TrimSpace(d.String), true
		}
		if d.Lang != "" {
			due.Lang = d.Lang
		}
		return due, nil
	}
	due, err := parseDueString(d.String, a.s.wallNow())
	if err != nil || due == nil && strings.TrimSpace(d.String) == "" {
		return nil, bad
	}
	if d.Timezone != "" && due != nil {
		due.Timezone = d.Timezone
	}
	if d.Lang != "" && due != nil {
		due.Lang = d.Lang
	}
	return due, nil
}

// dueFromDate is a due date set from a date in one of the three documented
// forms: full day, floating time, or a time in UTC ("…Z") with its zone
// (the user's when none is given).
func (s *Server) dueFromDate(date, tz string) (*Due, bool) {
	if t, err := time.Parse(time.DateOnly, date); err == nil {
		return &Due{Date: t.Format(time.DateOnly), String: t.Format(time.DateOnly), Lang: "en"}, true
	}
	if t, err := time.Parse("2006-01-02T15:04:05", date); err == nil {
		return &Due{Date: t.Format("2006-01-02T15:04:05"), String: t.Format("2006-01-02 15:04"), Lang: "en"}, true
	}
	t, err := time.Parse(time.RFC3339Nano, date)
	if err != nil {
		return nil, false
	}
	loc := s.tz
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil {
			return nil, false
		}
		loc = l
	}
	return &Due{Date: t.UTC().Format("2006-01-02T15:04:05Z"), Timezone: loc.String(),
		String: t.In(loc).Format("2006-01-02 15:04"), Lang: "en"}, true
}

// taskFields applies the fields item_add and item_update share.
func (a *cmdArgs) taskFields(t *Task) *apiError {
	if _, ok := a.m["content"]; ok {
		c, e := a.required("content")
		if e != nil {
			return e
		}
		t.Content = c
	}
	if a.has("description") {
		d, e := a.str("description")
		if e != nil {
			return e
		}
		t.Description = d
	}
	if a.has("priority") {
		var p int
		if json.Unmarshal(a.m["priority"], &p) != nil || p < 1 || p > 4 {
			return a.invalid("priority")
		}
		t.Priority = p
	}
	if _, ok := a.m["labels"]; ok {
		var ls []string
		if !a.isNull("labels") && json.Unmarshal(a.m["labels"], &ls) != nil {
			return a.invalid("labels")
		}
		if ls == nil {
			ls = []string{}
		}
		t.Labels = ls
	}
	if a.has("due") {
		d, e := a.due()
		if e != nil {
			return e
		}
		t.Due = d
	} else if a.isNull("due") {
		t.Due = nil
	}
	return nil
}

func (s *Server) limitReached(what string) *apiError {
	return s.newError(http.StatusForbidden, 49, "MAX_"+strings.ToUpper(what)+"_LIMIT_REACHED",
		"Maximum number of "+what+" reached", nil)
}

// exec runs one command and returns the id of what it created. Callers
// hold s.mu.
func (s *Server) exec(typ string, a *cmdArgs) (string, *apiError) {
	now := s.now()
	switch typ {
	case "project_add":
		name, e := a.required("name")
		if e != nil {
			return "", e
		}
		if len([]rune(name)) > 120 {
			return "", a.invalid("name")
		}
		parent, e := a.project("parent_id", false)
		if e != nil {
			return "", e
		}
		if s.limits.Projects > 0 && len(s.st.activeProjects()) >= s.limits.Projects {
			return "", s.limitReached("projects")
		}
		p := Project{Name: strings.TrimSpace(name)}
		if parent != nil {
			p.ParentID = parent.ID
		}
		p.Color, _ = a.str("color")
		p.ViewStyle, _ = a.str("view_style")
		p.Description, _ = a.str("description")
		return s.newProject(p).ID, nil

	case "project_update":
		p, e := a.project("id", true)
		if e != nil {
			return "", e
		}
		if a.has("name") {
			name, e := a.required("name")
			if e != nil {
				return "", e
			}
			p.Name = name
		}
		if c, _ := a.str("color"); c != "" {
			p.Color = c
		}
		p.UpdatedAt = now
		return "", nil

	case "project_delete":
		p, e := a.project("id", true)
		if e != nil {
			return "", e
		}
		if p.IsInbox {
			return "", s.newError(http.StatusBadRequest, 20, "INVALID_ARGUMENT_VALUE", "Inbox project can't be deleted", map[string]any{"argument": "id"})
		}
		s.st.deleteProjects(s.st.subprojects(p.ID))
		return "", nil

	case "section_add":
		name, e := a.required("name")
		if e != nil {
			return "", e
		}
		p, e := a.project("project_id", true)
		if e != nil {
			return "", e
		}
		if lim := s.limits.SectionsPerProject; lim > 0 {
			n := 0
			for _, x := range s.st.sections {
				if x.ProjectID == p.ID {
					n++
				}
			}
			if n >= lim {
				return "", s.limitReached("sections")
			}
		}
		return s.newSection(Section{ProjectID: p.ID, Name: strings.TrimSpace(name)}).ID, nil

	case "section_delete":
		x, e := a.section("id")
		if e == nil && x == nil {
			e = a.missing("id")
		}
		if e != nil {
			return "", e
		}
		s.st.sections = slices.DeleteFunc(s.st.sections, func(y *Section) bool { return y == x })
		delete(s.st.sectionByID, x.ID)
		tasks := map[string]bool{}
		for _, t := range s.st.tasks {
			if t.SectionID == x.ID {
				tasks[t.ID] = true
			}
		}
		s.st.deleteTasks(tasks)
		return "", nil

	case "label_add":
		name, e := a.required("name")
		if e != nil {
			return "", e
		}
		l := Label{Name: strings.TrimSpace(name)}
		l.Color, _ = a.str("color")
		return s.newLabel(l).ID, nil

	case "label_delete":
		id, e := a.id("id")
		if e != nil {
			return "", e
		}
		l := s.st.labelByID[id]
		if l == nil {
			return "", s.notFound("Label", id)
		}
		s.st.labels = slices.DeleteFunc(s.st.labels, func(y *Label) bool { return y == l })
		delete(s.st.labelByID, id)
		if cascade, _ := a.str("cascade"); cascade != "none" {
			for _, t := range s.st.tasks {
				t.Labels = slices.DeleteFunc(t.Labels, func(n string) bool { return strings.EqualFold(n, l.Name) })
			}
		}
		return "", nil

	case "item_add":
		if _, ok := a.m["content"]; !ok {
			return "", a.missing("content")
		}
		t := Task{Priority: 1, Labels: []string{}}
		if e := a.taskFields(&t); e != nil {
			return "", e
		}
		p, e := a.project("project_id", false)
		if e != nil {
			return "", e
		}
		if p != nil {
			t.ProjectID = p.ID
		} else {
			t.ProjectID = s.st.inboxID
		}
		x, e := a.section("section_id")
		if e != nil {
			return "", e
		}
		if x != nil {
			t.ProjectID, t.SectionID = x.ProjectID, x.ID
		}
		parent, e := a.task("parent_id", false)
		if e != nil {
			return "", e
		}
		if parent != nil {
			t.ProjectID, t.SectionID, t.ParentID = parent.ProjectID, parent.SectionID, parent.ID
		}
		if lim := s.limits.TasksPerProject; lim > 0 && len(s.tasksIn(t.ProjectID)) >= lim {
			return "", s.limitReached("tasks")
		}
		return s.newTask(t).ID, nil

	case "item_update":
		t, e := a.task("id", true)
		if e != nil {
			return "", e
		}
		// Work on a copy so that a bad argument changes nothing.
		c := t.clone()
		if e := a.taskFields(&c); e != nil {
			return "", e
		}
		c.UpdatedAt = now
		*t = c
		return "", nil

	case "item_move":
		t, e := a.task("id", true)
		if e != nil {
			return "", e
		}
		n := 0
		for _, k := range []string{"project_id", "section_id", "parent_id"} {
			if v, _ := a.str(k); v != "" {
				n++
			}
		}
		if n != 1 {
			return "", s.newError(http.StatusBadRequest, 20, "INVALID_ARGUMENT_VALUE",
				"Exactly one of project_id, section_id or parent_id is required", nil)
		}
		var projectID, sectionID, parentID string
		switch {
		case a.has("project_id"):
			p, e := a.project("project_id", true)
			if e != nil {
				return "", e
			}
			projectID = p.ID
		case a.has("section_id"):
			x, e := a.section("section_id")
			if e != nil {
				return "", e
			}
			projectID, sectionID = x.ProjectID, x.ID
		default:
			parent, e := a.task("parent_id", true)
			if e != nil {
				return "", e
			}
			if parent.ID == t.ID || slices.Contains(s.st.descendants(t.ID), parent) {
				return "", s.newError(http.StatusBadRequest, 20, "INVALID_ARGUMENT_VALUE", "A task cannot be moved under itself", map[string]any{"argument": "parent_id"})
			}
			projectID, sectionID, parentID = parent.ProjectID, parent.SectionID, parent.ID
		}
		t.ChildOrder = s.st.nextChildOrder(projectID, sectionID, parentID)
		t.ProjectID, t.SectionID, t.ParentID = projectID, sectionID, parentID
		t.UpdatedAt = now
		for _, d := range s.st.descendants(t.ID) {
			d.ProjectID, d.SectionID = projectID, sectionID
			d.UpdatedAt = now
		}
		return "", nil

	case "item_close", "item_complete":
		t, e := a.task("id", true)
		if e != nil {
			return "", e
		}
		if typ == "item_close" && t.Due != nil && t.Due.IsRecurring {
			// Closing a recurring task moves it to its next date.
			nextDue(t.Due, s.wallNow())
			t.UpdatedAt = now
			return "", nil
		}
		for _, x := range append([]*Task{t}, s.st.descendants(t.ID)...) {
			if !x.Checked {
				x.Checked, x.CompletedAt, x.UpdatedAt = true, now, now
			}
		}
		return "", nil

	case "item_update_date_complete":
		// Completes one occurrence of a recurring task, or with
		// is_forward 0 undoes that ("uncompletion (e.g., via undo)"),
		// the task going to the occurrence in due
		// (developer.todoist.com/api/v1 #tag/Sync/Tasks/Complete-a-recurring-task).
		t, e := a.task("id", true)
		if e != nil {
			return "", e
		}
		forward := true
		if a.has("is_forward") {
			var n any
			_ = json.Unmarshal(a.m["is_forward"], &n)
			switch v := n.(type) {
			case float64:
				forward = v != 0
			case bool:
				forward = v
			default:
				return "", a.invalid("is_forward")
			}
		}
		c := t.clone()
		switch {
		case a.has("due"):
			d, e := a.due()
			if e != nil {
				return "", e
			}
			c.Due = d
		case forward && c.Due != nil && c.Due.IsRecurring:
			nextDue(c.Due, s.wallNow())
		case !forward:
			return "", a.missing("due")
		}
		if c.Due == nil || !c.Due.IsRecurring {
			return "", s.newError(http.StatusBadRequest, 20, "INVALID_ARGUMENT_VALUE", "Task is not recurring", map[string]any{"argument": "id"})
		}
		c.Checked, c.CompletedAt, c.UpdatedAt = false, time.Time{}, now
		*t = c
		return "", nil

	case "item_uncomplete":
		t, e := a.task("id", true)
		if e != nil {
			return "", e
		}
		// Reopening a task reopens its ancestors too.
		for x := t; x != nil; x = s.st.taskByID[x.ParentID] {
			if x.Checked {
				x.Checked, x.CompletedAt, x.UpdatedAt = false, time.Time{}, now
			}
			if x.ParentID == "" {
				break
			}
		}
		return "", nil

	case "item_delete":
		t, e := a.task("id", true)
		if e != nil {
			return "", e
		}
		ids := map[string]bool{t.ID: true}
		for _, d := range s.st.descendants(t.ID) {
			ids[d.ID] = true
		}
		s.st.deleteTasks(ids)
		return "", nil
	}
	if id, e, ok := s.execNote(typ, a); ok {
		return id, e
	}
	return "", s.newError(http.StatusBadRequest, 20, "INVALID_ARGUMENT_VALUE", "Unknown command "+typ, map[string]any{"argument": "type"})
}

func (s *Server) tasksIn(projectID string) []*Task {
	var out []*Task
	for _, t := range s.st.tasks {
		if !t.Checked && t.ProjectID == projectID {
			out = append(out, t)
		}
	}
	return out
}
