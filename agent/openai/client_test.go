package openai_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

// sleeper records the waits of a client instead of sleeping.
type sleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, d)
	return ctx.Err()
}

func (s *sleeper) total() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var t time.Duration
	for _, w := range s.waits {
		t += w
	}
	return t
}

// start runs a fake with script and returns it with a client for it that
// records its waits in sl; cfg's fields override the test defaults.
func start(t *testing.T, script openaitest.Script, cfg openai.Config, opts ...openaitest.Option) (*openaitest.Server, *openai.Client, *sleeper) {
	t.Helper()
	srv := openaitest.New(script, opts...)
	t.Cleanup(srv.Close)
	sl := &sleeper{}
	cfg.BaseURL = srv.URL
	if cfg.Model == "" {
		cfg.Model = "gpt-4.1-mini"
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sl.sleep
	}
	return srv, openai.New(cfg, srv.Client()), sl
}

// strictParams is an OpenAI-strict schema with a nullable optional field.
const strictParams = `{"type":"object","properties":{"task_ids":{"type":"array","items":{"type":"string"}},"note":{"type":["string","null"]}},"required":["task_ids","note"],"additionalProperties":false}`

func TestRequestMapping(t *testing.T) {
	history := []agent.Message{
		{Role: agent.RoleSystem, Content: "You tidy Todoist. Reply in JSON."},
		{Role: agent.RoleUser, Content: "tidy my inbox"},
		{Role: agent.RoleAssistant, Content: "Reading first.", ToolCalls: []agent.ToolCall{
			{ID: "call_a", Name: "get_overview", Arguments: `{}`},
			{ID: "call_b", Name: "get_labels", Arguments: `{}`},
		}},
		{Role: agent.RoleTool, ToolCallID: "call_a", Content: "Inbox: 3 tasks"},
		{Role: agent.RoleTool, ToolCallID: "call_b", Content: "no labels"},
	}
	tools := []agent.Tool{
		{Name: "complete_tasks", Description: "Complete tasks.", Parameters: json.RawMessage(strictParams), Strict: true},
		{Name: "get_overview", Description: "Overview.", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
	}
	f32 := func(v float64) *float64 { return &v }
	tests := []struct {
		name  string
		model string
		cfg   openai.Config
		req   agent.Request
		check func(t *testing.T, got openaitest.Request)
	}{
		{
			name: "tools protocol",
			req:  agent.Request{Messages: history, Tools: tools, ToolChoice: "required", ParallelToolCalls: true, MaxTokens: 1024},
			check: func(t *testing.T, got openaitest.Request) {
				if len(got.Tools) != 2 || got.Tools[0].Name != "complete_tasks" || !got.Tools[0].Strict || got.Tools[1].Strict ||
					got.Tools[0].Description != "Complete tasks." {
					t.Errorf("tools = %+v", got.Tools)
				}
				if string(got.Tools[0].Parameters) != strictParams {
					t.Errorf("parameters = %s, want %s", got.Tools[0].Parameters, strictParams)
				}
				if got.ToolChoice != "required" {
					t.Errorf("tool_choice = %q, want required", got.ToolChoice)
				}
				if got.ParallelToolCalls == nil || !*got.ParallelToolCalls {
					t.Errorf("parallel_tool_calls = %v, want true", got.ParallelToolCalls)
				}
				if got.MaxTokens != 1024 || got.MaxTokensField != "max_tokens" {
					t.Errorf("max tokens = %d in %q, want 1024 in max_tokens", got.MaxTokens, got.MaxTokensField)
				}
				if got.ResponseFormat != nil {
					t.Errorf("response_format = %+v, want none", got.ResponseFormat)
				}
				if len(got.Messages) != len(history) {
					t.Fatalf("%d messages, want %d", len(got.Messages), len(history))
				}
				for i, m := range got.Messages {
					w := history[i]
					if m.Role != string(w.Role) || m.Content != w.Content || m.ToolCallID != w.ToolCallID || len(m.ToolCalls) != len(w.ToolCalls) {
						t.Errorf("message %d = %+v, want %+v", i, m, w)
						continue
					}
					for j, c := range m.ToolCalls {
						if c.ID != w.ToolCalls[j].ID || c.Name != w.ToolCalls[j].Name || c.Arguments != w.ToolCalls[j].Arguments {
							t.Errorf("message %d call %d = %+v, want %+v", i, j, c, w.ToolCalls[j])
						}
					}
				}
			},
		},
		{
			name: "temperature 0 is sent as 0",
			req:  agent.Request{Messages: history[:2]},
			check: func(t *testing.T, got openaitest.Request) {
				if got.Temperature == nil || *got.Temperature != 0 {
					t.Errorf("temperature = %v, want an explicit 0", got.Temperature)
				}
				if got.MaxTokensField != "" || got.ToolChoice != "" || got.ParallelToolCalls != nil {
					t.Errorf("request = %+v, want no max tokens, tool_choice or parallel_tool_calls", got)
				}
			},
		},
		{
			name: "temperature 0.7",
			req:  agent.Request{Messages: history[:2], Temperature: 0.7},
			check: func(t *testing.T, got openaitest.Request) {
				if got.Temperature == nil || *got.Temperature != *f32(0.7) {
					t.Errorf("temperature = %v, want 0.7", got.Temperature)
				}
			},
		},
		{
			name: "auto tool choice, no parallel calls",
			req:  agent.Request{Messages: history[:2], Tools: tools[1:], ToolChoice: "auto"},
			check: func(t *testing.T, got openaitest.Request) {
				if got.ToolChoice != "auto" || got.ParallelToolCalls == nil || *got.ParallelToolCalls {
					t.Errorf("tool_choice, parallel = %q, %v; want auto, false", got.ToolChoice, got.ParallelToolCalls)
				}
			},
		},
		{
			name: "tool choice without tools is not sent",
			req:  agent.Request{Messages: history[:2], ToolChoice: "required", ParallelToolCalls: true},
			check: func(t *testing.T, got openaitest.Request) {
				if got.ToolChoice != "" || got.ParallelToolCalls != nil {
					t.Errorf("tool_choice, parallel = %q, %v; want neither", got.ToolChoice, got.ParallelToolCalls)
				}
			},
		},
		{
			name: "a forced function",
			req:  agent.Request{Messages: history[:2], Tools: tools, ToolChoice: "get_overview"},
			check: func(t *testing.T, got openaitest.Request) {
				if got.ToolChoice != "get_overview" {
					t.Errorf("tool_choice = %q, want the function get_overview", got.ToolChoice)
				}
			},
		},
		{
			name: "json_schema strict",
			req: agent.Request{Messages: history[:2], MaxTokens: 300,
				Format: &agent.ResponseFormat{Kind: agent.FormatJSONSchema, Name: "react_step", Schema: json.RawMessage(strictParams), Strict: true}},
			check: func(t *testing.T, got openaitest.Request) {
				f := got.ResponseFormat
				if f == nil || f.Type != "json_schema" || f.Name != "react_step" || !f.Strict || string(f.Schema) != strictParams {
					t.Errorf("response_format = %+v", f)
				}
			},
		},
		{
			name: "json_object",
			req:  agent.Request{Messages: history[:2], Format: &agent.ResponseFormat{Kind: agent.FormatJSONObject}},
			check: func(t *testing.T, got openaitest.Request) {
				if f := got.ResponseFormat; f == nil || f.Type != "json_object" {
					t.Errorf("response_format = %+v, want json_object", f)
				}
			},
		},
		{
			name: "text format sends none",
			req:  agent.Request{Messages: history[:2], Format: &agent.ResponseFormat{Kind: agent.FormatText}},
			check: func(t *testing.T, got openaitest.Request) {
				if got.ResponseFormat != nil {
					t.Errorf("response_format = %+v, want none", got.ResponseFormat)
				}
			},
		},
		{
			name:  "reasoning model: max_completion_tokens, no temperature",
			model: "o4-mini",
			req:   agent.Request{Messages: history[:2], MaxTokens: 512, Temperature: 0.2},
			check: func(t *testing.T, got openaitest.Request) {
				if got.MaxTokens != 512 || got.MaxTokensField != "max_completion_tokens" || got.Temperature != nil {
					t.Errorf("max tokens %d in %q, temperature %v; want 512 in max_completion_tokens and none", got.MaxTokens, got.MaxTokensField, got.Temperature)
				}
			},
		},
		{
			name: "MaxCompletionTokens forces the newer name",
			cfg:  openai.Config{MaxCompletionTokens: true},
			req:  agent.Request{Messages: history[:2], MaxTokens: 64},
			check: func(t *testing.T, got openaitest.Request) {
				if got.MaxTokens != 64 || got.MaxTokensField != "max_completion_tokens" {
					t.Errorf("max tokens %d in %q", got.MaxTokens, got.MaxTokensField)
				}
				if got.Temperature == nil || *got.Temperature != 0 {
					t.Errorf("temperature = %v, want 0", got.Temperature)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Model = tt.model
			srv, c, _ := start(t, nil, cfg)
			if _, err := c.Complete(t.Context(), tt.req); err != nil {
				t.Fatal(err)
			}
			got, _ := srv.LastRequest()
			want := tt.model
			if want == "" {
				want = "gpt-4.1-mini"
			}
			if got.Model != want {
				t.Errorf("model = %q, want %q", got.Model, want)
			}
			tt.check(t, got)
		})
	}
}

func TestReplies(t *testing.T) {
	req := agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}}
	tests := []struct {
		name  string
		reply openaitest.Reply
		want  agent.Response
	}{
		{
			name:  "tool calls",
			reply: openaitest.Calls(openaitest.ToolCall{ID: "call_1", Name: "move_tasks", Arguments: `{"moves":[]}`}, openaitest.ToolCall{Name: "get_projects", Arguments: `{}`}).WithUsage(120, 30),
			want: agent.Response{FinishReason: "tool_calls", Format: agent.FormatText,
				ToolCalls: []agent.ToolCall{{ID: "call_1", Name: "move_tasks", Arguments: `{"moves":[]}`}, {ID: "call_1_1", Name: "get_projects", Arguments: `{}`}},
				Usage:     agent.Usage{PromptTokens: 120, CompletionTokens: 30, Calls: 1}},
		},
		{
			name:  "thought and a call with malformed arguments",
			reply: openaitest.Reply{Content: "Moving them.", ToolCalls: []openaitest.ToolCall{{ID: "c", Name: "move_tasks", Arguments: `{"moves": [`}}}.WithUsage(5, 6),
			want: agent.Response{Content: "Moving them.", FinishReason: "tool_calls", Format: agent.FormatText,
				ToolCalls: []agent.ToolCall{{ID: "c", Name: "move_tasks", Arguments: `{"moves": [`}},
				Usage:     agent.Usage{PromptTokens: 5, CompletionTokens: 6, Calls: 1}},
		},
		{
			name:  "malformed JSON content",
			reply: openaitest.Text("My apologies, here is the correct response: {\"thought\": \"x\",}").WithUsage(9, 9),
			want: agent.Response{Content: "My apologies, here is the correct response: {\"thought\": \"x\",}", FinishReason: "stop", Format: agent.FormatText,
				Usage: agent.Usage{PromptTokens: 9, CompletionTokens: 9, Calls: 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c, _ := start(t, openaitest.Replies(tt.reply), openai.Config{})
			got, err := c.Complete(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := mustJSON(t, got), mustJSON(t, tt.want); g != w {
				t.Errorf("response =\n%s\nwant\n%s", g, w)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestUsage(t *testing.T) {
	req := agent.Request{
		Messages: []agent.Message{{Role: agent.RoleSystem, Content: strings.Repeat("You tidy a Todoist inbox. ", 20)}, {Role: agent.RoleUser, Content: "tidy"}},
		Tools:    []agent.Tool{{Name: "complete_tasks", Description: "Complete tasks.", Parameters: json.RawMessage(strictParams), Strict: true}},
	}
	tests := []struct {
		name          string
		reply         openaitest.Reply
		opts          []openaitest.Option
		wantEstimated bool
		wantPrompt    int // 0: just positive
	}{
		{"reported", openaitest.Text("ok").WithUsage(321, 4), nil, false, 321},
		{"fake's default estimate is reported usage", openaitest.Text("ok"), nil, false, 0},
		{"none reported: estimated", openaitest.Text("All done: 3 tasks moved.").WithoutUsage(), nil, true, 0},
		{"server never reports", openaitest.Call("complete_tasks", `{"task_ids":["1"],"note":null}`), []openaitest.Option{openaitest.WithoutUsage()}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c, _ := start(t, openaitest.Replies(tt.reply), openai.Config{}, tt.opts...)
			got, err := c.Complete(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			u := got.Usage
			if u.Estimated != tt.wantEstimated || u.Calls != 1 || u.PromptTokens <= 0 || u.CompletionTokens <= 0 {
				t.Errorf("usage = %+v, want estimated=%v, calls 1, positive counts", u, tt.wantEstimated)
			}
			if tt.wantPrompt != 0 && u.PromptTokens != tt.wantPrompt {
				t.Errorf("prompt tokens = %d, want %d", u.PromptTokens, tt.wantPrompt)
			}
			if tt.wantEstimated {
				want := openai.EstimateUsage(req, got)
				if u != want {
					t.Errorf("usage = %+v, want EstimateUsage's %+v", u, want)
				}
				// The system prompt alone is ~100 tokens; the estimate is in range.
				if u.PromptTokens < 100 || u.PromptTokens > 400 {
					t.Errorf("prompt tokens = %d, want 100..400", u.PromptTokens)
				}
			}
		})
	}
}

func TestFormatFallback(t *testing.T) {
	schema := json.RawMessage(strictParams)
	ask := agent.Request{
		Messages: []agent.Message{{Role: agent.RoleSystem, Content: "Reply with one JSON object."}, {Role: agent.RoleUser, Content: "hi"}},
		Format:   &agent.ResponseFormat{Kind: agent.FormatJSONSchema, Name: "react_step", Schema: schema, Strict: true},
	}
	tests := []struct {
		name      string
		off       []string
		wantSent  []string // response_format types sent by the first call, "" for none
		want      agent.FormatKind
		wantLater []string // by a second call
	}{
		{"supported", nil, []string{"json_schema"}, agent.FormatJSONSchema, []string{"json_schema"}},
		{"no json_schema", []string{"json_schema"}, []string{"json_schema", "json_object"}, agent.FormatJSONObject, []string{"json_object"}},
		{"neither", []string{"json_schema", "json_object"}, []string{"json_schema", "json_object", ""}, agent.FormatText, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, c, _ := start(t, nil, openai.Config{}, openaitest.WithoutResponseFormats(tt.off...))
			sent := func(from int) []string {
				var out []string
				for _, r := range srv.Requests()[from:] {
					k := ""
					if r.ResponseFormat != nil {
						k = r.ResponseFormat.Type
					}
					out = append(out, k)
				}
				return out
			}
			got, err := c.Complete(t.Context(), ask)
			if err != nil {
				t.Fatal(err)
			}
			if got.Format != tt.want {
				t.Errorf("Format = %q, want %q", got.Format, tt.want)
			}
			if g := sent(0); strings.Join(g, ",") != strings.Join(tt.wantSent, ",") {
				t.Errorf("first call sent %q, want %q", g, tt.wantSent)
			}
			n := srv.Calls()
			got, err = c.Complete(t.Context(), ask)
			if err != nil {
				t.Fatal(err)
			}
			if got.Format != tt.want {
				t.Errorf("later Format = %q, want %q", got.Format, tt.want)
			}
			if g := sent(n); strings.Join(g, ",") != strings.Join(tt.wantLater, ",") {
				t.Errorf("a later call sent %q, want %q (the downgrade is remembered)", g, tt.wantLater)
			}
		})
	}
}

// TestStrictSchemaRejected: a strict schema the server rejects (here
// one that breaks OpenAI's own rules) is stepped down, strict with core
// keywords only and then not strict, instead of failing every call; the
// level is remembered.
func TestStrictSchemaRejected(t *testing.T) {
	loose := json.RawMessage(`{"type":"object","properties":{"task_ids":{"type":"array","items":{"type":"string"}},"note":{"type":"string"}},"required":["task_ids"],"additionalProperties":false}`)
	msgs := []agent.Message{{Role: agent.RoleUser, Content: "answer in JSON"}}
	tests := []struct {
		name   string
		req    agent.Request
		strict func(openaitest.Request) bool
	}{
		{"strict tool", agent.Request{Messages: msgs, Tools: []agent.Tool{{Name: "complete_tasks", Parameters: loose, Strict: true}}, ToolChoice: "required"},
			func(r openaitest.Request) bool { return r.Tools[0].Strict }},
		{"strict json_schema", agent.Request{Messages: msgs, Format: &agent.ResponseFormat{Kind: agent.FormatJSONSchema, Name: "react_step", Schema: loose, Strict: true}},
			func(r openaitest.Request) bool { return r.ResponseFormat.Strict }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, c, _ := start(t, nil, openai.Config{})
			if _, err := c.Complete(t.Context(), tt.req); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			if len(reqs) != 3 || !tt.strict(reqs[0]) || !tt.strict(reqs[1]) || tt.strict(reqs[2]) {
				t.Fatalf("%d requests, want 3: strict, strict core, not strict", len(reqs))
			}
			if _, err := c.Complete(t.Context(), tt.req); err != nil {
				t.Fatal(err)
			}
			if n := srv.Calls(); n != 4 {
				t.Errorf("%d calls after a second Complete, want 4: the level is remembered", n)
			}
		})
	}
	t.Run("non-strict is accepted", func(t *testing.T) {
		srv, c, _ := start(t, nil, openai.Config{})
		req := agent.Request{Messages: msgs, Tools: []agent.Tool{{Name: "complete_tasks", Parameters: loose}}, ToolChoice: "required"}
		if _, err := c.Complete(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		if srv.Calls() != 1 {
			t.Errorf("%d calls, want 1", srv.Calls())
		}
	})
}

func TestConcurrentCalls(t *testing.T) {
	srv, c, _ := start(t, nil, openai.Config{}, openaitest.WithoutResponseFormats("json_schema"))
	req := agent.Request{
		Messages: []agent.Message{{Role: agent.RoleUser, Content: "JSON please"}},
		Format:   &agent.ResponseFormat{Kind: agent.FormatJSONSchema, Name: "s", Schema: json.RawMessage(strictParams), Strict: true},
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := c.Complete(t.Context(), req); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if srv.Responses() != 8 {
		t.Errorf("%d responses, want 8", srv.Responses())
	}
}
