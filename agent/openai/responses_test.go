package openai_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

// conversation is a run's history with one round of parallel calls.
func conversation() []agent.Message {
	return []agent.Message{
		{Role: agent.RoleSystem, Content: "You tidy Todoist."},
		{Role: agent.RoleUser, Content: "tidy my inbox"},
		{Role: agent.RoleAssistant, Content: "Reading first.", ToolCalls: []agent.ToolCall{
			{ID: "call_a", Name: "get_overview", Arguments: `{}`},
			{ID: "call_b", Name: "get_labels", Arguments: `{}`},
		}},
		{Role: agent.RoleTool, ToolCallID: "call_a", Content: "Inbox: 3 tasks"},
		{Role: agent.RoleTool, ToolCallID: "call_b", Content: "no labels"},
	}
}

func TestResponsesRequest(t *testing.T) {
	tools := []agent.Tool{{Name: "complete_tasks", Description: "Complete tasks.", Parameters: json.RawMessage(strictParams), Strict: true}}
	srv, c, _ := start(t, nil, openai.Config{Model: "gpt-6-luna"})
	if c.API() != openai.APIResponses {
		t.Fatalf("API = %s, want responses for gpt-6-luna in auto", c.API())
	}
	history := conversation()
	if _, err := c.Complete(t.Context(), agent.Request{Messages: history, Tools: tools, ToolChoice: "required", ParallelToolCalls: true, MaxTokens: 2048}); err != nil {
		t.Fatal(err)
	}
	got, _ := srv.LastRequest()
	if got.API != openaitest.APIResponses || got.Model != "gpt-6-luna" {
		t.Fatalf("request to %s for %s", got.API, got.Model)
	}
	if got.Store == nil || *got.Store {
		t.Errorf("store = %v, want false", got.Store)
	}
	if len(got.Include) != 1 || got.Include[0] != "reasoning.encrypted_content" {
		t.Errorf("include = %v, want reasoning.encrypted_content", got.Include)
	}
	if got.ReasoningEffort != "low" || got.Temperature != nil || got.TopP != nil {
		t.Errorf("effort %q, temperature %v, top_p %v: want low and no sampling", got.ReasoningEffort, got.Temperature, got.TopP)
	}
	if got.MaxTokens != 2048 || got.MaxTokensField != "max_output_tokens" {
		t.Errorf("max tokens %d in %q", got.MaxTokens, got.MaxTokensField)
	}
	if len(got.Tools) != 1 || !got.Tools[0].Strict || string(got.Tools[0].Parameters) != strictParams || got.ToolChoice != "required" ||
		got.ParallelToolCalls == nil || !*got.ParallelToolCalls {
		t.Errorf("tools %+v, choice %q, parallel %v", got.Tools, got.ToolChoice, got.ParallelToolCalls)
	}
	if len(got.Messages) != len(history) {
		t.Fatalf("%d messages, want %d: %+v", len(got.Messages), len(history), got.Messages)
	}
	for i, m := range got.Messages {
		w := history[i]
		if m.Role != string(w.Role) || m.Content != w.Content || m.ToolCallID != w.ToolCallID || len(m.ToolCalls) != len(w.ToolCalls) {
			t.Errorf("message %d = %+v, want %+v", i, m, w)
		}
	}
}

func TestResponsesReplies(t *testing.T) {
	srv, c, _ := start(t, openaitest.Replies(
		openaitest.Reply{Content: "Moving.", ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "move_tasks", Arguments: `{"moves":[]}`}}},
		openaitest.Text(`{"thought":"t","action":{"type":"final_answer","answer":"Done."}}`),
	), openai.Config{Model: "gpt-6-luna", API: openai.APIResponses})
	got, err := c.Complete(t.Context(), agent.Request{Messages: conversation()[:2], MaxTokens: 1024,
		Tools: []agent.Tool{{Name: "move_tasks", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}, ToolChoice: "required"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Content != "Moving." || len(got.ToolCalls) != 1 || got.ToolCalls[0] != (agent.ToolCall{ID: "call_1", Name: "move_tasks", Arguments: `{"moves":[]}`}) ||
		got.FinishReason != "tool_calls" {
		t.Errorf("reply = %+v", got)
	}
	if got.Usage.ReasoningTokens != 64 || got.Usage.CompletionTokens <= 64 || got.Usage.PromptTokens == 0 || got.Usage.Calls != 1 {
		t.Errorf("usage = %+v, want 64 reasoning tokens (low) inside the completion tokens", got.Usage)
	}
	if len(got.State) == 0 || !strings.Contains(string(got.State), `"encrypted_content"`) {
		t.Errorf("state = %s, want the encrypted reasoning item", got.State)
	}
	// The json protocol: text.format json_schema.
	schema := json.RawMessage(`{"type":"object","properties":{"thought":{"type":"string"}},"required":["thought"],"additionalProperties":false}`)
	got, err = c.Complete(t.Context(), agent.Request{Messages: conversation()[:2], MaxTokens: 1024,
		Format: &agent.ResponseFormat{Kind: agent.FormatJSONSchema, Name: "react_step", Schema: schema, Strict: true}})
	if err != nil {
		t.Fatal(err)
	}
	last, _ := srv.LastRequest()
	if f := last.ResponseFormat; f == nil || f.Type != "json_schema" || f.Name != "react_step" || !f.Strict || string(f.Schema) != string(schema) {
		t.Errorf("text.format = %+v", last.ResponseFormat)
	}
	if got.Format != agent.FormatJSONSchema || !strings.Contains(got.Content, "final_answer") || got.FinishReason != "stop" {
		t.Errorf("reply = %+v", got)
	}
}

// TestReasoningCarriedStatelessly: the reasoning items of a reply travel
// in Response.State and go back with the assistant message they belong
// to, so that a new client (a restarted process) continues the same run;
// a reasoning item without its encrypted content, which store:false
// never kept, is refused as OpenAI refuses it.
func TestReasoningCarriedStatelessly(t *testing.T) {
	srv := openaitest.New(nil)
	t.Cleanup(srv.Close)
	newClient := func() *openai.Client {
		return openai.New(openai.Config{BaseURL: srv.URL, Model: "gpt-6-luna", API: openai.APIResponses}, srv.Client())
	}
	tools := []agent.Tool{{Name: "get_overview", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}
	srv2 := openaitest.New(openaitest.Replies(openaitest.Call("get_overview", `{}`)))
	t.Cleanup(srv2.Close)
	first, err := openai.New(openai.Config{BaseURL: srv2.URL, Model: "gpt-6-luna", API: openai.APIResponses}, srv2.Client()).
		Complete(t.Context(), agent.Request{Messages: conversation()[:2], Tools: tools, ToolChoice: "required", MaxTokens: 1024})
	if err != nil {
		t.Fatal(err)
	}
	// Another server's reasoning does not verify here.
	msgs := append(conversation()[:2],
		agent.Message{Role: agent.RoleAssistant, ToolCalls: first.ToolCalls, State: first.State},
		agent.Message{Role: agent.RoleTool, ToolCallID: first.ToolCalls[0].ID, Content: "Inbox: 3 tasks"})
	_, err = newClient().Complete(t.Context(), agent.Request{Messages: msgs, Tools: tools, MaxTokens: 1024})
	if err == nil || !strings.Contains(agent.ErrorMessageOf(err), "could not be verified") {
		t.Fatalf("foreign reasoning: err = %v", err)
	}

	// This server's reasoning, through a fresh client each call.
	c := newClient()
	reply, err := c.Complete(t.Context(), agent.Request{Messages: conversation()[:2], Tools: tools, ToolChoice: "required", MaxTokens: 1024})
	if err != nil {
		t.Fatal(err)
	}
	reply.ToolCalls = []agent.ToolCall{{ID: "call_x", Name: "get_overview", Arguments: `{}`}}
	msgs = append(conversation()[:2],
		agent.Message{Role: agent.RoleAssistant, Content: reply.Content, ToolCalls: reply.ToolCalls, State: reply.State},
		agent.Message{Role: agent.RoleTool, ToolCallID: "call_x", Content: "Inbox: 3 tasks"})
	saved, err := json.Marshal(msgs) // the transcript as the store keeps it
	if err != nil {
		t.Fatal(err)
	}
	var resumed []agent.Message
	if err := json.Unmarshal(saved, &resumed); err != nil {
		t.Fatal(err)
	}
	if _, err := newClient().Complete(t.Context(), agent.Request{Messages: resumed, Tools: tools, MaxTokens: 1024}); err != nil {
		t.Fatal(err)
	}
	last, _ := srv.LastRequest()
	if last.ReasoningItems != 1 || last.PreviousResponseID != "" {
		t.Errorf("reasoning items sent back = %d, previous_response_id %q: want 1 and none", last.ReasoningItems, last.PreviousResponseID)
	}

	// A transcript saved by an earlier version holds the reasoning items
	// alone, as a bare array: they still go back.
	var state struct {
		Output []map[string]any `json:"output"`
	}
	if err := json.Unmarshal(reply.State, &state); err != nil || len(state.Output) == 0 || state.Output[0]["type"] != "reasoning" {
		t.Fatalf("state %s: %v", reply.State, err)
	}
	resumed[2].State, _ = json.Marshal(state.Output[:1])
	if _, err := newClient().Complete(t.Context(), agent.Request{Messages: resumed, Tools: tools, MaxTokens: 1024}); err != nil {
		t.Fatal(err)
	}
	if last, _ := srv.LastRequest(); last.ReasoningItems != 1 {
		t.Errorf("reasoning items of an earlier version's state sent back = %d, want 1", last.ReasoningItems)
	}

	// Without its encrypted content the item refers to nothing.
	delete(state.Output[0], "encrypted_content")
	resumed[2].State, _ = json.Marshal(state)
	_, err = newClient().Complete(t.Context(), agent.Request{Messages: resumed, Tools: tools, MaxTokens: 1024})
	if err == nil || !strings.Contains(agent.ErrorMessageOf(err), "Items are not persisted when `store` is set to false") {
		t.Errorf("reasoning without encrypted content: err = %v", err)
	}
}

func TestCachedTokens(t *testing.T) {
	_, c, _ := start(t, nil, openai.Config{Model: "gpt-6-luna", API: openai.APIResponses})
	long := []agent.Message{{Role: agent.RoleSystem, Content: strings.Repeat("You tidy Todoist. ", 400)}, {Role: agent.RoleUser, Content: "hi"}}
	first, err := c.Complete(t.Context(), agent.Request{Messages: long, MaxTokens: 1024})
	if err != nil {
		t.Fatal(err)
	}
	next := append(long, agent.Message{Role: agent.RoleAssistant, Content: "OK", State: first.State}, agent.Message{Role: agent.RoleUser, Content: "again"})
	second, err := c.Complete(t.Context(), agent.Request{Messages: next, MaxTokens: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if first.Usage.CachedTokens != 0 || second.Usage.CachedTokens < 1024 || second.Usage.CachedTokens%128 != 0 || second.Usage.CachedTokens > second.Usage.PromptTokens {
		t.Errorf("cached tokens %d then %d (of %d): want 0, then a multiple of 128 from 1024", first.Usage.CachedTokens, second.Usage.CachedTokens, second.Usage.PromptTokens)
	}
}

// TestAutoFallsBackToChat: a server without /responses is asked once,
// then gets Chat Completions for good; gpt-6-luna calls tools there with
// reasoning off, as Chat Completions requires.
func TestAutoFallsBackToChat(t *testing.T) {
	srv, c, _ := start(t, openaitest.Replies(openaitest.Call("get_overview", `{}`), openaitest.Call("get_overview", `{}`)),
		openai.Config{Model: "gpt-6-luna"}, openaitest.WithoutResponses())
	req := agent.Request{Messages: conversation()[:2], MaxTokens: 1024,
		Tools: []agent.Tool{{Name: "get_overview", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}, ToolChoice: "required"}
	for range 2 {
		if _, err := c.Complete(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || c.API() != openai.APIChat {
		t.Fatalf("%d model requests, API %s: want 2 chat completions and 1 refused /responses", len(reqs), c.API())
	}
	for _, r := range reqs {
		if r.API != openaitest.APIChat || r.ReasoningEffort != "none" || r.MaxTokensField != "max_completion_tokens" {
			t.Errorf("request to %s, effort %q, %s", r.API, r.ReasoningEffort, r.MaxTokensField)
		}
	}

	t.Run("not with OPENAI_API=responses", func(t *testing.T) {
		_, c, _ := start(t, nil, openai.Config{Model: "gpt-6-luna", API: openai.APIResponses}, openaitest.WithoutResponses())
		_, err := c.Complete(t.Context(), req)
		if err == nil || !strings.Contains(agent.ErrorMessageOf(err), "OPENAI_API") {
			t.Errorf("err = %v, want it to name OPENAI_API", err)
		}
	})
}

// TestMissingResponsesRoute: whatever words a server without /responses
// uses for its 404 (OpenAI's, unknown_url, Ollama's plain text, vLLM's
// and LiteLLM's FastAPI detail), it is a missing endpoint, not a missing
// model: auto falls back to Chat Completions, and OPENAI_API=responses is
// told to set OPENAI_API=chat.
func TestMissingResponsesRoute(t *testing.T) {
	req := agent.Request{Messages: conversation()[:2], MaxTokens: 1024}
	kinds := map[string]openaitest.NotFound{"invalid URL": openaitest.NotFoundInvalidURL, "unknown_url": openaitest.NotFoundUnknownURL,
		"plain text": openaitest.NotFoundPlain, "detail": openaitest.NotFoundDetail}
	for name, kind := range kinds {
		t.Run(name, func(t *testing.T) {
			srv, c, _ := start(t, nil, openai.Config{Model: "gpt-6-luna"}, openaitest.WithoutResponses(), openaitest.WithNotFound(kind))
			if _, err := c.Complete(t.Context(), req); err != nil || c.API() != openai.APIChat || srv.Misses() != 1 {
				t.Errorf("auto: err %v, API %s, %d refused: want a fallback to chat after 1", err, c.API(), srv.Misses())
			}
			_, c, _ = start(t, nil, openai.Config{Model: "gpt-6-luna", API: openai.APIResponses}, openaitest.WithoutResponses(), openaitest.WithNotFound(kind))
			_, err := c.Complete(t.Context(), req)
			if msg := agent.ErrorMessageOf(err); !strings.Contains(msg, "no Responses API") || !strings.Contains(msg, "OPENAI_API=chat") || strings.Contains(msg, "OPENAI_MODEL") {
				t.Errorf("responses: %q, want the endpoint missing and OPENAI_API=chat", msg)
			}
		})
	}
}

func TestLookUp(t *testing.T) {
	srv := openaitest.New(nil, openaitest.WithModels(openaitest.Model{ID: "gpt-6-luna"}, openaitest.Model{ID: "gpt-4.1-mini", ShutdownDate: "2027-01-14"}))
	t.Cleanup(srv.Close)
	look := func(model string) (openai.ModelInfo, error) {
		return openai.New(openai.Config{BaseURL: srv.URL, Model: model, APIKey: "sk-test"}, srv.Client()).LookUp(t.Context())
	}
	info, err := look("gpt-6-luna")
	if err != nil || !info.Known || !info.ShutdownDate.IsZero() {
		t.Errorf("gpt-6-luna: %+v, %v", info, err)
	}
	info, err = look("gpt-4.1-mini")
	if err != nil || !info.ShutdownDate.Equal(time.Date(2027, 1, 14, 0, 0, 0, 0, time.UTC)) || info.Replacement != "gpt-6-luna" {
		t.Errorf("gpt-4.1-mini: %+v, %v", info, err)
	}
	// A replacement is suggested where the deprecations page names one
	// for the model, dated snapshots included, and nowhere else.
	all := openaitest.New(nil)
	t.Cleanup(all.Close)
	for model, want := range map[string]string{"gpt-5-nano": "gpt-6-luna", "gpt-4o-2024-11-20": "gpt-6-luna", "gpt-5-mini-2025-08-07": "gpt-6.1-terra",
		"o3": "gpt-6.1-sol", "gpt-5-pro": "", "gpt-6-luna": ""} {
		info, err := openai.New(openai.Config{BaseURL: all.URL, Model: model}, all.Client()).LookUp(t.Context())
		if err != nil || info.Replacement != want || info.Chosen || info.ShutdownDate.IsZero() != (openaitest.Deprecations[model] == "") {
			t.Errorf("%s: %+v, %v; want replacement %q", model, info, err, want)
		}
	}
	// The 2027-04-01 shutdowns, whose row on the page could not be read:
	// the replacement tidybot chose, marked as its choice.
	for model, want := range map[string]string{"gpt-5.1": "gpt-6.1-sol", "gpt-5.3-codex": "gpt-6.1-sol", "gpt-5.4-nano": "gpt-6-luna"} {
		info, err := openai.New(openai.Config{BaseURL: all.URL, Model: model}, all.Client()).LookUp(t.Context())
		if err != nil || info.Replacement != want || !info.Chosen || !info.ShutdownDate.Equal(time.Date(2027, 4, 1, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("%s: %+v, %v; want the chosen replacement %q", model, info, err, want)
		}
	}
	_, err = look("gpt-7-nova")
	if !errors.Is(err, openai.ErrUnknownModel) || !strings.Contains(err.Error(), "OPENAI_MODEL=gpt-7-nova") {
		t.Errorf("unknown model: err = %v", err)
	}
	// Azure's /models has no deployment names: nothing is asked.
	noNet := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.Errorf("request to %s", r.URL)
		return nil, errors.New("no network")
	})}
	info, err = openai.New(openai.Config{BaseURL: "https://acme.openai.azure.com/openai/v1", Model: "prod-deployment"}, noNet).LookUp(t.Context())
	if err != nil || info.Known {
		t.Errorf("Azure: %+v, %v", info, err)
	}
	// A server with no GET /models/{id} (vLLM has only GET /models) says
	// nothing either way.
	bare := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(bare.Close)
	info, err = openai.New(openai.Config{BaseURL: bare.URL + "/v1", Model: "llama3.1"}, bare.Client()).LookUp(t.Context())
	if err != nil || info.Known {
		t.Errorf("server without the endpoint: %+v, %v", info, err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The tool list is part of the cached prefix: two requests with the same
// long tool list and different messages share it.
func TestCachedTokensIncludeTools(t *testing.T) {
	_, c, _ := start(t, nil, openai.Config{Model: "gpt-6-luna", API: openai.APIResponses})
	tools := []agent.Tool{{Name: "get_overview", Description: strings.Repeat("Every project and the inbox. ", 200), Parameters: json.RawMessage(`{"type":"object","properties":{},"required":[],"additionalProperties":false}`)}}
	var cached []int
	for _, text := range []string{"tidy", "what's due?"} {
		resp, err := c.Complete(t.Context(), agent.Request{Messages: []agent.Message{{Role: agent.RoleSystem, Content: "You tidy Todoist."}, {Role: agent.RoleUser, Content: text}}, Tools: tools, MaxTokens: 1024})
		if err != nil {
			t.Fatal(err)
		}
		cached = append(cached, resp.Usage.CachedTokens)
	}
	if cached[0] != 0 || cached[1] < 1024 {
		t.Errorf("cached tokens %v, want 0 then the tools and system prompt (≥ 1024)", cached)
	}
}

// TestResponsesReplaysOutputAsItCame: each reply's output items go back
// as they came, ids, phase and order kept, encrypted reasoning included
// (store:false), and an assistant message the client rebuilds (a chat
// history's earlier answer) carries its phase.
func TestResponsesReplaysOutputAsItCame(t *testing.T) {
	overview := openaitest.ToolCall{ID: "call_o", Name: "get_overview", Arguments: `{}`}
	labels := openaitest.ToolCall{ID: "call_l", Name: "get_labels", Arguments: `{}`}
	tests := []struct {
		name  string
		reply openaitest.Reply
	}{
		{"default order", openaitest.Reply{Content: "Reading first.", ToolCalls: []openaitest.ToolCall{overview, labels}}},
		{"interleaved", openaitest.Reply{Output: []openaitest.Item{openaitest.Reasoning(), openaitest.OutputText("Reading first.", "commentary"),
			openaitest.Reasoning(), openaitest.FunctionCall(overview), openaitest.OutputText("And the labels.", "commentary"), openaitest.FunctionCall(labels)}}},
	}
	tools := []agent.Tool{
		{Name: "get_overview", Parameters: json.RawMessage(`{"type":"object","properties":{},"required":[],"additionalProperties":false}`), Strict: true},
		{Name: "get_labels", Parameters: json.RawMessage(`{"type":"object","properties":{},"required":[],"additionalProperties":false}`), Strict: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, c, _ := start(t, openaitest.Replies(tt.reply, openaitest.Text("Done.")), openai.Config{Model: "gpt-6-luna", API: openai.APIResponses})
			msgs := []agent.Message{
				{Role: agent.RoleSystem, Content: "You tidy Todoist."},
				{Role: agent.RoleAssistant, Content: "Your inbox is empty."}, // an earlier run's answer
				{Role: agent.RoleUser, Content: "tidy my inbox"},
			}
			req := agent.Request{Messages: msgs, Tools: tools, ToolChoice: "required", ParallelToolCalls: true, MaxTokens: 1024}
			first, err := c.Complete(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(first.ToolCalls) != 2 {
				t.Fatalf("tool calls %+v", first.ToolCalls)
			}
			req.Messages = append(req.Messages, agent.Message{Role: agent.RoleAssistant, Content: first.Content, ToolCalls: first.ToolCalls, State: first.State},
				agent.Message{Role: agent.RoleTool, ToolCallID: "call_o", Content: "Inbox: 3 tasks"},
				agent.Message{Role: agent.RoleTool, ToolCallID: "call_l", Content: "no labels"})
			if _, err := c.Complete(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			got, _ := srv.LastRequest()
			if len(got.Replay) > 0 {
				t.Errorf("the output did not come back as it came: %q", got.Replay)
			}
		})
	}
}
