package agent

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// memTasks is an in-memory Tasks for the engine's unit tests; the
// end-to-end tests use the real client against the fake Todoist server.
type memTasks struct {
	mu       sync.Mutex
	projects []Project
	sections []Section
	tasks    map[string]Task
	applied  map[string]int
	results  map[string]WriteResult
	requests int
	seq      int
	// beforeApply, when set, runs at the start of each Apply.
	beforeApply func(ctx context.Context)
	// cutAt and cutErr, when cutErr is set, make Apply apply the first
	// cutAt writes only and fail the rest and itself with cutErr: a
	// batch whose second request failed.
	cutAt  int
	cutErr error
	// tasksErr, when set, fails Tasks.
	tasksErr error
	// projectsFn and sectionsFn, when set, answer Projects and Sections.
	projectsFn func() ([]Project, error)
	sectionsFn func(projectID string) ([]Section, error)
	// labels are what Labels returns.
	labels []Label
}

func newMemTasks() *memTasks {
	return &memTasks{
		projects: []Project{{ID: "inbox1", Name: "Inbox", IsInbox: true}},
		tasks:    map[string]Task{},
		applied:  map[string]int{},
		results:  map[string]WriteResult{},
	}
}

func (m *memTasks) addTask(id, content string) {
	m.tasks[id] = Task{ID: id, Content: content, ProjectID: "inbox1", Priority: P4}
}

func (m *memTasks) Projects(context.Context) ([]Project, error) {
	if m.projectsFn != nil {
		return m.projectsFn()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests++
	return append([]Project(nil), m.projects...), nil
}

func (m *memTasks) list(q TaskQuery) []Task {
	var out []Task
	for _, t := range m.tasks {
		if q.ProjectID != "" && t.ProjectID != q.ProjectID {
			continue
		}
		if len(q.IDs) > 0 && !contains(q.IDs, t.ID) {
			continue
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (m *memTasks) Tasks(_ context.Context, q TaskQuery) ([]Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests++
	if m.tasksErr != nil {
		return nil, m.tasksErr
	}
	return m.list(q), nil
}

func (m *memTasks) Sections(_ context.Context, projectID string) ([]Section, error) {
	if m.sectionsFn != nil {
		return m.sectionsFn(projectID)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests++
	var out []Section
	for _, s := range m.sections {
		if s.ProjectID == projectID {
			out = append(out, s)
		}
	}
	return out, nil
}

func (m *memTasks) Labels(context.Context) ([]Label, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests++
	return append([]Label(nil), m.labels...), nil
}

func (m *memTasks) Snapshot(context.Context) (Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests++
	return Snapshot{Projects: append([]Project(nil), m.projects...), Sections: append([]Section(nil), m.sections...), Tasks: m.list(TaskQuery{})}, nil
}

func (m *memTasks) project(id string) bool {
	for _, p := range m.projects {
		if p.ID == id {
			return true
		}
	}
	return false
}

// Apply applies ws and then, like an HTTP client whose request the server
// answered after ctx ended, reports ctx's error instead of the results.
func (m *memTasks) Apply(ctx context.Context, ws []Write) ([]WriteResult, error) {
	if m.beforeApply != nil {
		m.beforeApply(ctx)
	}
	if m.cutErr != nil && m.cutAt < len(ws) {
		res := append(m.apply(ws[:m.cutAt]), make([]WriteResult, len(ws)-m.cutAt)...)
		for i := m.cutAt; i < len(ws); i++ {
			res[i] = WriteResult{UUID: ws[i].UUID, Err: m.cutErr}
		}
		return res, fmt.Errorf("apply writes %d–%d of %d: %w", m.cutAt+1, len(ws), len(ws), m.cutErr)
	}
	res := m.apply(ws)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

func (m *memTasks) apply(ws []Write) []WriteResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests++
	temp := map[string]string{}
	res := make([]WriteResult, len(ws))
	for i, w := range ws {
		if r, ok := m.results[w.UUID]; ok {
			res[i] = r
			if w.TempID != "" {
				temp[w.TempID] = r.NewID
			}
			continue
		}
		sub := func(s string) string {
			if v, ok := temp[s]; ok {
				return v
			}
			return s
		}
		r := WriteResult{UUID: w.UUID}
		switch w.Kind {
		case AddProject:
			m.seq++
			id := fmt.Sprintf("proj%d", m.seq)
			m.projects = append(m.projects, Project{ID: id, Name: w.Name})
			temp[w.TempID], r.NewID = id, id
		case MoveTask:
			t, ok := m.tasks[w.ID]
			pid := sub(w.ProjectID)
			switch {
			case !ok:
				r.Err = &Error{Code: ErrNotFound, Message: "no task with id " + w.ID}
			case !m.project(pid):
				r.Err = &Error{Code: ErrNotFound, Message: "no project with id " + pid}
			default:
				t.ProjectID = pid
				m.tasks[w.ID] = t
			}
		case DeleteTask, CloseTask:
			if _, ok := m.tasks[w.ID]; !ok {
				r.Err = &Error{Code: ErrNotFound, Message: "no task with id " + w.ID}
			} else {
				delete(m.tasks, w.ID)
			}
		case DeleteProject:
			for i, p := range m.projects {
				if p.ID == w.ID {
					m.projects = append(m.projects[:i], m.projects[i+1:]...)
					break
				}
			}
		default:
			r.Err = &Error{Code: ErrInvalid, Message: "memTasks does not do " + string(w.Kind)}
		}
		if r.Err == nil {
			m.applied[w.UUID]++
		}
		m.results[w.UUID] = r
		res[i] = r
	}
	return res
}

func (m *memTasks) where() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := map[string]string{}
	for _, p := range m.projects {
		names[p.ID] = p.Name
	}
	var out []string
	for _, t := range m.list(TaskQuery{}) {
		out = append(out, t.Content+"@"+names[t.ProjectID])
	}
	return strings.Join(out, ", ")
}

// script is a Model answering from a list of replies.
type script struct {
	mu      sync.Mutex
	replies []Response
	reqs    []Request
	fn      func(Request) Response
}

func (s *script) Complete(_ context.Context, req Request) (Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	if s.fn != nil {
		r := s.fn(req)
		r.Usage = Usage{PromptTokens: 100, CompletionTokens: 10}
		return r, nil
	}
	if len(s.replies) == 0 {
		return Response{}, &Error{Code: ErrServer, Message: "script exhausted"}
	}
	r := s.replies[0]
	s.replies = s.replies[1:]
	r.Usage = Usage{PromptTokens: 100, CompletionTokens: 10}
	return r, nil
}

func text(s string) Response { return Response{Content: s} }

func tool(name, args string) Response {
	return Response{ToolCalls: []ToolCall{{ID: "c_" + name, Name: name, Arguments: args}}}
}

func tools2(calls ...ToolCall) Response {
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = fmt.Sprintf("c%d_%s", i, calls[i].Name)
		}
	}
	return Response{ToolCalls: calls}
}

// lastObs returns the observation answering callID in req.
func lastObs(req Request, callID string) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == RoleTool && m.ToolCallID == callID {
			return m.Content
		}
	}
	return ""
}

// modelFunc is a Model from a function.
type modelFunc func(context.Context, Request) (Response, error)

func (f modelFunc) Complete(ctx context.Context, req Request) (Response, error) { return f(ctx, req) }
