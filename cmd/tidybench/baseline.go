package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/invopop/jsonschema"

	"github.com/tidybot/tidybot/agent"
)

// The baseline is an agent configured like the one in the talk: one task
// per action, raw API JSON as observations, the whole action schema resent
// with every call, the JSON protocol, and a 15-message history window. It
// exists only to be measured against tidybot's agent.

type baseGetInbox struct{}
type baseGetProjects struct{}
type baseCreateProject struct {
	Name string `json:"name"`
}
type baseMoveTask struct {
	TaskID    string `json:"task_id"`
	ProjectID string `json:"project_id"`
}
type baseFinal struct {
	Answer string `json:"answer"`
}

// baseSchema is the JSON Schema of every baseline action, resent whole in
// each call's system prompt.
func baseSchema() string {
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true}
	actions := map[string]any{
		"get_inbox_tasks": baseGetInbox{}, "get_projects": baseGetProjects{},
		"create_project": baseCreateProject{}, "move_task": baseMoveTask{}, "final_answer": baseFinal{},
	}
	out := map[string]any{}
	for name, v := range actions {
		out[name] = r.Reflect(v)
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	return string(b)
}

// baseline runs the talk-style loop.
type baseline struct {
	model    agent.Model
	tasks    agent.Tasks
	hc       *http.Client
	apiURL   string
	token    string
	maxSteps int
}

// run tidies the inbox and returns the final answer and usage.
func (b *baseline) run(ctx context.Context, instruction string) (string, agent.Usage, error) {
	system := "You are an assistant with access to the user's Todoist. Reply with one JSON object {\"thought\": ..., \"action\": {\"type\": <action>, ...arguments}}.\nActions and their JSON Schemas:\n" + baseSchema()
	var history []agent.Message
	history = append(history, agent.Message{Role: agent.RoleUser, Content: instruction})
	var usage agent.Usage
	for step := 0; step < b.maxSteps; step++ {
		window := history
		if len(window) > 15 {
			window = window[len(window)-15:]
		}
		msgs := append([]agent.Message{{Role: agent.RoleSystem, Content: system}}, window...)
		resp, err := b.model.Complete(ctx, agent.Request{Messages: msgs, MaxTokens: 1024, Format: &agent.ResponseFormat{Kind: agent.FormatJSONObject}})
		if err != nil {
			return "", usage, fmt.Errorf("baseline step %d: %w", step, err)
		}
		usage.Add(resp.Usage)
		history = append(history, agent.Message{Role: agent.RoleAssistant, Content: resp.Content})
		var env struct {
			Action map[string]any `json:"action"`
		}
		if err := json.Unmarshal([]byte(resp.Content), &env); err != nil || env.Action == nil {
			history = append(history, agent.Message{Role: agent.RoleUser, Content: "Invalid reply: " + fmt.Sprint(err)})
			continue
		}
		obs, done, err := b.act(ctx, env.Action)
		if err != nil {
			obs = "Error: " + err.Error()
		}
		if done {
			return obs, usage, nil
		}
		history = append(history, agent.Message{Role: agent.RoleUser, Content: "Observation: " + obs})
	}
	return "", usage, fmt.Errorf("baseline: step limit")
}

// act runs one action; reads return the API's raw JSON.
func (b *baseline) act(ctx context.Context, a map[string]any) (obs string, done bool, err error) {
	str := func(k string) string { s, _ := a[k].(string); return s }
	switch str("type") {
	case "get_inbox_tasks":
		ps, err := b.tasks.Projects(ctx)
		if err != nil {
			return "", false, err
		}
		inbox := ""
		for _, p := range ps {
			if p.IsInbox {
				inbox = p.ID
			}
		}
		return b.raw(ctx, "/tasks", url.Values{"project_id": {inbox}, "limit": {"200"}})
	case "get_projects":
		return b.raw(ctx, "/projects", url.Values{"limit": {"200"}})
	case "create_project":
		res, err := b.tasks.Apply(ctx, []agent.Write{{Kind: agent.AddProject, UUID: agent.NewUUID(), TempID: "tmp-" + agent.NewUUID(), Name: str("name")}})
		return writeObs(res), false, err
	case "move_task":
		res, err := b.tasks.Apply(ctx, []agent.Write{{Kind: agent.MoveTask, UUID: agent.NewUUID(), ID: str("task_id"), ProjectID: str("project_id")}})
		return writeObs(res), false, err
	case "final_answer":
		return str("answer"), true, nil
	}
	return "", false, fmt.Errorf("unknown action %q", str("type"))
}

func writeObs(res []agent.WriteResult) string {
	type out struct {
		UUID  string `json:"uuid"`
		NewID string `json:"id,omitempty"`
		Error string `json:"error,omitempty"`
	}
	var o []out
	for _, r := range res {
		x := out{UUID: r.UUID, NewID: r.NewID}
		if r.Err != nil {
			x.Error = r.Err.Error()
		}
		o = append(o, x)
	}
	b, _ := json.Marshal(o)
	return string(b)
}

// raw GETs an API path and returns the body as the API sent it.
func (b *baseline) raw(ctx context.Context, path string, q url.Values) (string, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(b.apiURL, "/")+path+"?"+q.Encode(), nil)
	if err != nil {
		return "", false, err
	}
	req.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := b.hc.Do(req)
	if err != nil {
		return "", false, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), false, err
}

// oneByOne is the baseline's scripted model: a competent model limited to
// the talk's tool set. It keeps its plan between calls, since the
// 15-message window hides the early observations.
type oneByOne struct {
	groups  func(content string) string
	step    string
	inbox   []struct{ ID, Content string }
	created map[string]string // project name → id
	toMake  []string
	moveIdx int
	moved   int
}

func (m *oneByOne) reply(req agent.Request) agent.Response {
	last := req.Messages[len(req.Messages)-1].Content
	obs := strings.TrimPrefix(last, "Observation: ")
	act := func(thought string, a map[string]any) agent.Response {
		b, _ := json.Marshal(map[string]any{"thought": thought, "action": a})
		return agent.Response{Content: string(b)}
	}
	switch m.step {
	case "":
		m.step = "inbox"
		return act("First I read the inbox.", map[string]any{"type": "get_inbox_tasks"})
	case "inbox":
		var page struct {
			Results []struct {
				ID      string `json:"id"`
				Content string `json:"content"`
			} `json:"results"`
		}
		_ = json.Unmarshal([]byte(obs), &page)
		for _, t := range page.Results {
			m.inbox = append(m.inbox, struct{ ID, Content string }{t.ID, t.Content})
		}
		m.step = "projects"
		return act("Now the projects.", map[string]any{"type": "get_projects"})
	case "projects":
		m.created = map[string]string{}
		var page struct {
			Results []struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"results"`
		}
		_ = json.Unmarshal([]byte(obs), &page)
		have := map[string]string{}
		for _, p := range page.Results {
			have[p.Name] = p.ID
		}
		seen := map[string]bool{}
		for _, t := range m.inbox {
			g := m.groups(t.Content)
			if id, ok := have[g]; ok {
				m.created[g] = id
			} else if !seen[g] {
				seen[g] = true
				m.toMake = append(m.toMake, g)
			}
		}
		m.step = "create"
		return m.next(act)
	case "create":
		var res []struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal([]byte(obs), &res)
		if len(res) == 1 {
			m.created[m.toMake[0]] = res[0].ID
			m.toMake = m.toMake[1:]
		}
		return m.next(act)
	case "move":
		m.moved++
		return m.next(act)
	}
	return act("Done.", map[string]any{"type": "final_answer", "answer": "Done."})
}

func (m *oneByOne) next(act func(string, map[string]any) agent.Response) agent.Response {
	if len(m.toMake) > 0 {
		m.step = "create"
		return act("I need a project for "+m.toMake[0]+".", map[string]any{"type": "create_project", "name": m.toMake[0]})
	}
	if m.moveIdx < len(m.inbox) {
		t := m.inbox[m.moveIdx]
		m.moveIdx++
		m.step = "move"
		return act("Move "+t.Content+".", map[string]any{"type": "move_task", "task_id": t.ID, "project_id": m.created[m.groups(t.Content)]})
	}
	m.step = "final"
	return act("All moved.", map[string]any{"type": "final_answer", "answer": fmt.Sprintf("Moved %d tasks.", len(m.inbox))})
}
