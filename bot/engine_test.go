package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// These helpers run the bot with the real agent engine: a scripted model
// (a function of the conversation) and an in-memory Todoist, so that what
// the user types travels the whole way to a write or to no write.

// memTasks is an in-memory agent.Tasks: an Inbox, a Home project and
// tasks; it applies moves and deletes.
type memTasks struct {
	mu    sync.Mutex
	tasks map[string]agent.Task
	done  map[string]bool // write uuids applied
}

var _ agent.Tasks = (*memTasks)(nil)

func newMemTasks(contents ...string) *memTasks {
	m := &memTasks{tasks: map[string]agent.Task{}, done: map[string]bool{}}
	for i, c := range contents {
		id := fmt.Sprintf("t%d", i+1)
		m.tasks[id] = agent.Task{ID: id, Content: c, ProjectID: "inbox", Priority: agent.P4}
	}
	return m
}

var memProjects = []agent.Project{{ID: "inbox", Name: "Inbox", IsInbox: true}, {ID: "home", Name: "Home"}}

func (m *memTasks) Projects(context.Context) ([]agent.Project, error) {
	return append([]agent.Project(nil), memProjects...), nil
}

func (m *memTasks) list(q agent.TaskQuery) []agent.Task {
	var out []agent.Task
	for _, t := range m.tasks {
		if q.ProjectID != "" && t.ProjectID != q.ProjectID {
			continue
		}
		if len(q.IDs) > 0 && !strings.Contains(" "+strings.Join(q.IDs, " ")+" ", " "+t.ID+" ") {
			continue
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (m *memTasks) Tasks(_ context.Context, q agent.TaskQuery) ([]agent.Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.list(q), nil
}

func (m *memTasks) Sections(context.Context, string) ([]agent.Section, error) { return nil, nil }
func (m *memTasks) Labels(context.Context) ([]agent.Label, error)             { return nil, nil }

func (m *memTasks) Snapshot(context.Context) (agent.Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return agent.Snapshot{Projects: append([]agent.Project(nil), memProjects...), Tasks: m.list(agent.TaskQuery{})}, nil
}

func (m *memTasks) Apply(_ context.Context, ws []agent.Write) ([]agent.WriteResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	res := make([]agent.WriteResult, len(ws))
	for i, w := range ws {
		res[i].UUID = w.UUID
		if m.done[w.UUID] {
			continue
		}
		t, ok := m.tasks[w.ID]
		if !ok {
			res[i].Err = &agent.Error{Code: agent.ErrNotFound, Message: "no task with id " + w.ID}
			continue
		}
		switch w.Kind {
		case agent.DeleteTask:
			delete(m.tasks, w.ID)
		case agent.MoveTask:
			t.ProjectID = w.ProjectID
			m.tasks[w.ID] = t
		default:
			res[i].Err = &agent.Error{Code: agent.ErrInvalid, Message: "memTasks does not do " + string(w.Kind)}
			continue
		}
		m.done[w.UUID] = true
	}
	return res, nil
}

// contents lists the open tasks, "content@project", sorted.
func (m *memTasks) contents() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, t := range m.list(agent.TaskQuery{}) {
		out = append(out, t.Content+"@"+t.ProjectID)
	}
	return strings.Join(out, ", ")
}

// scriptModel is an agent.Model answering with fn; it records requests.
type scriptModel struct {
	mu   sync.Mutex
	reqs []agent.Request
	fn   func(modelTurn modelTurn) (name string, args any)
}

// modelTurn is what the script sees of a request: the instruction (the last
// user message), the history before it, and the observations since.
type modelTurn struct {
	instruction string
	history     []string
	tools       []string
}

// lastTool is the latest observation of the run, "" before any.
func (t modelTurn) lastTool() string {
	if len(t.tools) == 0 {
		return ""
	}
	return t.tools[len(t.tools)-1]
}

func (s *scriptModel) Complete(_ context.Context, req agent.Request) (agent.Response, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	var t modelTurn
	start := 0
	for i, m := range req.Messages {
		if m.Role == agent.RoleUser {
			start = i
		}
	}
	for i, m := range req.Messages {
		switch {
		case i < start && (m.Role == agent.RoleUser || m.Role == agent.RoleAssistant):
			t.history = append(t.history, m.Content)
		case i == start:
			t.instruction = m.Content
		case i > start && m.Role == agent.RoleTool:
			t.tools = append(t.tools, m.Content)
		}
	}
	name, args := s.fn(t)
	raw, _ := json.Marshal(args)
	return agent.Response{
		Content:      "thinking",
		ToolCalls:    []agent.ToolCall{{ID: fmt.Sprintf("call_%d", len(req.Messages)), Name: name, Arguments: string(raw)}},
		FinishReason: "tool_calls",
		Usage:        agent.Usage{PromptTokens: 100, CompletionTokens: 10, Calls: 1},
	}, nil
}

func (s *scriptModel) requests() []agent.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]agent.Request(nil), s.reqs...)
}

// observations is every observation the model was sent, joined.
func (s *scriptModel) observations() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.reqs {
		for _, m := range r.Messages {
			if m.Role == agent.RoleTool {
				out = append(out, m.Content)
			}
		}
	}
	return strings.Join(out, "\n")
}

// deleter is the script of the confirmation tests: "delete the old lists"
// deletes t1 and t2 (a gated write); told the user's words instead of a
// yes, it deletes only the first when that is what they said, or keeps
// both. Any other instruction gets a final answer that quotes it; when the
// history asked to delete and the instruction is "yes", it deletes them
// (a model that takes an earlier question as its own).
func deleter(t modelTurn) (string, any) {
	obs := t.lastTool()
	final := func(s string) (string, any) { return agent.ActFinalAnswer, map[string]string{"answer": s} }
	del := func(ids ...string) (string, any) { return agent.ActDeleteTasks, map[string]any{"task_ids": ids} }
	asked := strings.Contains(strings.Join(t.history, "\n"), "delete the old lists")
	switch {
	case t.instruction == "delete the old lists" || (asked && strings.EqualFold(t.instruction, "yes")):
		switch {
		case obs == "":
			return del("t1", "t2")
		case strings.Contains(obs, "did not confirm") && strings.Contains(obs, "only the first"):
			return del("t1")
		case strings.Contains(obs, "did not confirm"):
			return final("I kept both lists.")
		case strings.Contains(obs, "said no"):
			return final("OK, nothing deleted.")
		}
		return final("Deleted.")
	case t.instruction == "move the lists home":
		if obs == "" {
			return agent.ActMoveTasks, map[string]any{"moves": []map[string]string{{"task_id": "t1", "project_id": "home"}, {"task_id": "t2", "project_id": "home"}}}
		}
		return final("Moved both lists to Home.")
	case t.instruction == "move the packing list back":
		if obs == "" {
			return agent.ActMoveTasks, map[string]any{"moves": []map[string]string{{"task_id": "t2", "project_id": "inbox"}}}
		}
		return final("Moved the packing list back.")
	case t.instruction == "say a lot":
		return final(strings.Repeat("blah ", 200_000)) // 1 MB
	case t.instruction == "say quite a lot":
		return final(strings.Repeat("blah ", 20_000)) // 100 KB
	case t.instruction == "ask a lot":
		return agent.ActAskUser, map[string]any{"question": strings.Repeat("which? ", 15_000)} // 105 KB
	}
	return final("You said: " + t.instruction)
}

// engineHarness is a bot with the real engine, a Telegram and a Slack
// fake platform.
type engineHarness struct {
	bot   *Bot
	store *memStore
	tasks *memTasks
	model *scriptModel
	tg    *fakePlatform
	slack *fakePlatform
}

func newEngineHarness(t *testing.T) *engineHarness {
	t.Helper()
	h := &engineHarness{
		store: newMemStore(),
		tasks: newMemTasks("Old shopping list", "Old packing list"),
		model: &scriptModel{fn: deleter},
		tg:    &fakePlatform{name: "telegram", interval: time.Millisecond},
		slack: &fakePlatform{name: "slack", interval: time.Millisecond, commandName: slackCommand},
	}
	eng := agent.New(h.model, h.tasks, agent.Config{Confirm: agent.ConfirmDestructive})
	h.bot = New(h.store, eng, Config{Workers: 2, AllowedUsers: []string{"telegram:42", "telegram:43", "slack:U1", "slack:U2"}})
	h.bot.AddPlatform(h.tg)
	h.bot.AddPlatform(h.slack)
	ctx, cancel := context.WithCancel(t.Context())
	if err := h.bot.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.bot.Stop(); cancel() })
	return h
}

// say handles one event and waits until the bot is idle.
func (h *engineHarness) say(t *testing.T, in Incoming) {
	t.Helper()
	if in.EventID == "" {
		in.EventID = newID()
	}
	if err := h.bot.Handle(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := h.bot.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

func (s *memStore) allMessages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// slackCommand spells commands as the Slack adapter does.
func slackCommand(name string) string {
	if name == "tidy-inbox" {
		return "/tidy-inbox"
	}
	return "/tidy " + name
}
