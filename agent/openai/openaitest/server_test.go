package openaitest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

// post sends body to path under the server's root and returns the status,
// the Retry-After header and the decoded JSON answer.
func post(t *testing.T, srv *openaitest.Server, path, auth, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, strings.TrimSuffix(srv.URL, "/v1")+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		out = map[string]any{"raw": string(raw)}
	}
	return resp.StatusCode, resp.Header, out
}

func errorOf(t *testing.T, out map[string]any) map[string]any {
	t.Helper()
	e, ok := out["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object in %v", out)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			t.Errorf("error object without %q: %v", k, e)
		}
	}
	return e
}

const hello = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`

func TestRejectsLikeTheRealAPI(t *testing.T) {
	okParams := `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`
	tool := func(params string, strict bool) string {
		b, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "hi"}},
			"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": json.RawMessage(params), "strict": strict}}}})
		return string(b)
	}
	format := func(schema string) string {
		b, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "reply in JSON"}},
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "step", "schema": json.RawMessage(schema), "strict": true}}})
		return string(b)
	}
	tests := []struct {
		name      string
		body      string
		wantParam string
		wantIn    string // in the message; "" means the request is accepted
	}{
		{"strict tool ok", tool(okParams, true), "", ""},
		{"empty strict object ok", tool(`{"type":"object","properties":{},"additionalProperties":false}`, true), "", ""},
		{"non-strict tool may be loose", tool(`{"type":"object","properties":{"a":{"type":"string"}}}`, false), "", ""},
		{"strict tool without additionalProperties", tool(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, true),
			"tools[0].function.parameters", "In context=(), 'additionalProperties' is required to be supplied and to be false"},
		{"strict tool with an optional property", tool(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false}`, true),
			"tools[0].function.parameters", "Missing 'b'"},
		{"nested in items", tool(`{"type":"object","properties":{"moves":{"type":"array","items":{"type":"object","properties":{"task_id":{"type":"string"},"section_id":{"type":["string","null"]}},"required":["task_id"],"additionalProperties":false}}},"required":["moves"],"additionalProperties":false}`, true),
			"tools[0].function.parameters", "In context=('properties', 'moves', 'items'), 'required' is required to be supplied and to be an array including every key in properties. Missing 'section_id'"},
		{"nested in anyOf", format(`{"type":"object","properties":{"action":{"anyOf":[{"type":"object","properties":{"type":{"type":"string"}},"required":["type"]}]}},"required":["action"],"additionalProperties":false}`),
			"response_format", "Invalid schema for response_format 'step': In context=('properties', 'action', 'anyOf', '0'), 'additionalProperties'"},
		{"nested in $defs", format(`{"type":"object","properties":{"x":{"$ref":"#/$defs/X"}},"required":["x"],"additionalProperties":false,"$defs":{"X":{"type":"object","properties":{"y":{"type":"string"}},"additionalProperties":false}}}`),
			"response_format", "In context=('$defs', 'X'), 'required' is required"},
		{"nullable object", format(`{"type":"object","properties":{"x":{"type":["object","null"],"properties":{"y":{"type":"string"}},"required":["y"]}},"required":["x"],"additionalProperties":false}`),
			"response_format", "In context=('properties', 'x'), 'additionalProperties'"},
		{"strict root not an object", tool(`{"type":"array","items":{"type":"string"}}`, true),
			"tools[0].function.parameters", `schema must be a JSON Schema of 'type: "object"', got 'type: "array"'`},
		{"strict format ok", format(okParams), "", ""},
		{"json_object without the word json", `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`,
			"messages", "must contain the word 'json'"},
		{"json_object with the word JSON", `{"model":"m","messages":[{"role":"user","content":"Answer in JSON"}],"response_format":{"type":"json_object"}}`, "", ""},
		{"tool_choice without tools", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":"required"}`,
			"tool_choice", "only allowed when 'tools' are specified"},
		{"parallel_tool_calls without tools", `{"model":"m","messages":[{"role":"user","content":"hi"}],"parallel_tool_calls":true}`,
			"parallel_tool_calls", "only allowed when 'tools' are specified"},
		{"tool message without a call", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c1","content":"x"}]}`,
			"messages.[1].role", "must be a response to a preceeding message with 'tool_calls'"},
		{"unanswered tool call", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"},{"role":"user","content":"and?"}]}`,
			"messages", "did not have response messages: c2"},
		{"answered tool calls", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"}]}`, "", ""},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, "model", "you must provide a model parameter"},
		{"no messages", `{"model":"m","messages":[]}`, "messages", "empty array"},
		{"temperature out of range", `{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":3}`, "temperature", "between 0 and 2"},
		{"max_tokens 0", `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":0}`, "max_tokens", "Expected a value >= 1"},
		{"not JSON", `{"model":`, "", "could not parse the JSON body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := openaitest.New(nil)
			t.Cleanup(srv.Close)
			// The second time, the schemas' verdicts are remembered
			// ones: the answer must not change.
			for n := 1; n <= 2; n++ {
				status, _, out := post(t, srv, "/v1/chat/completions", "", tt.body)
				if tt.wantIn == "" {
					if status != http.StatusOK {
						t.Fatalf("request %d: status = %d (%v), want 200", n, status, out)
					}
					continue
				}
				if status != http.StatusBadRequest {
					t.Fatalf("request %d: status = %d (%v), want 400", n, status, out)
				}
				e := errorOf(t, out)
				if msg, _ := e["message"].(string); !strings.Contains(msg, tt.wantIn) {
					t.Errorf("request %d: message = %q, want it to contain %q", n, msg, tt.wantIn)
				}
				if p, _ := e["param"].(string); p != tt.wantParam {
					t.Errorf("request %d: param = %q, want %q", n, p, tt.wantParam)
				}
				if srv.Calls() != n || srv.Responses() != 0 {
					t.Errorf("calls, responses = %d, %d; want %d, 0", srv.Calls(), srv.Responses(), n)
				}
			}
		})
	}
}

func TestCheckStrictOnTheAgentsSchemas(t *testing.T) {
	for _, name := range agent.ActionNames() {
		s, ok := agent.ActionSchema(name, true)
		if !ok {
			t.Fatalf("no schema for %s", name)
		}
		if msg := openaitest.CheckStrict(s); msg != "" {
			t.Errorf("%s: %s", name, msg)
		}
	}
	if msg := openaitest.CheckStrict(agent.EnvelopeSchema()); msg != "" {
		t.Errorf("envelope: %s", msg)
	}
}

func TestAPIKey(t *testing.T) {
	srv := openaitest.New(nil, openaitest.WithAPIKey("sk-right"))
	t.Cleanup(srv.Close)
	tests := []struct {
		name       string
		auth       string
		wantStatus int
		wantIn     string
	}{
		{"right key", "Bearer sk-right", http.StatusOK, ""},
		{"wrong key is echoed", "Bearer sk-wrong-123", http.StatusUnauthorized, "Incorrect API key provided: Bearer sk-wrong-123."},
		{"no key", "", http.StatusUnauthorized, "You didn't provide an API key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, out := post(t, srv, "/v1/chat/completions", tt.auth, hello)
			if status != tt.wantStatus {
				t.Fatalf("status = %d, want %d", status, tt.wantStatus)
			}
			if tt.wantIn != "" {
				if msg, _ := errorOf(t, out)["message"].(string); !strings.Contains(msg, tt.wantIn) {
					t.Errorf("message = %q, want %q in it", msg, tt.wantIn)
				}
			}
		})
	}
}

func TestRepliesAndRecording(t *testing.T) {
	srv := openaitest.New(openaitest.Replies(
		openaitest.Call("get_overview", `{}`),
		openaitest.Text(`{"thought": "x", "action": {`).WithUsage(7, 3),
		openaitest.Text("plain").WithoutUsage(),
		openaitest.RateLimited("3"),
		openaitest.Reply{Status: http.StatusBadGateway, Body: "<html>bad gateway</html>"},
	))
	t.Cleanup(srv.Close)

	body := `{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]}],` +
		`"tools":[{"type":"function","function":{"name":"get_overview","description":"d","parameters":{"type":"object","properties":{}},"strict":false}}],` +
		`"tool_choice":"required","parallel_tool_calls":true,"max_tokens":100,"temperature":0}`

	status, _, out := post(t, srv, "/v1/chat/completions", "", body)
	if status != http.StatusOK {
		t.Fatalf("status = %d: %v", status, out)
	}
	ch := out["choices"].([]any)[0].(map[string]any)
	if got := ch["finish_reason"]; got != "tool_calls" {
		t.Errorf("finish_reason = %v, want tool_calls", got)
	}
	msg := ch["message"].(map[string]any)
	if msg["content"] != nil {
		t.Errorf("content = %v, want null beside tool calls", msg["content"])
	}
	call := msg["tool_calls"].([]any)[0].(map[string]any)
	if call["id"] != "call_1_0" || call["type"] != "function" || call["function"].(map[string]any)["name"] != "get_overview" {
		t.Errorf("tool call = %v", call)
	}
	usage := out["usage"].(map[string]any)
	if usage["prompt_tokens"].(float64) <= 0 || usage["completion_tokens"].(float64) <= 0 {
		t.Errorf("usage = %v, want an estimate", usage)
	}

	// The unprefixed path serves too.
	status, _, out = post(t, srv, "/chat/completions", "", hello)
	if status != http.StatusOK {
		t.Fatalf("status = %d: %v", status, out)
	}
	ch = out["choices"].([]any)[0].(map[string]any)
	if got := ch["message"].(map[string]any)["content"]; got != `{"thought": "x", "action": {` {
		t.Errorf("content = %v", got)
	}
	if u := out["usage"].(map[string]any); u["prompt_tokens"] != 7.0 || u["completion_tokens"] != 3.0 || u["total_tokens"] != 10.0 {
		t.Errorf("usage = %v, want 7+3", u)
	}

	_, _, out = post(t, srv, "/v1/chat/completions", "", hello)
	if _, ok := out["usage"]; ok {
		t.Errorf("usage = %v, want none", out["usage"])
	}

	status, h, out := post(t, srv, "/v1/chat/completions", "", hello)
	if status != http.StatusTooManyRequests || h.Get("Retry-After") != "3" {
		t.Errorf("status, Retry-After = %d, %q; want 429, 3", status, h.Get("Retry-After"))
	}
	if e := errorOf(t, out); e["code"] != "rate_limit_exceeded" {
		t.Errorf("error = %v", e)
	}

	status, _, out = post(t, srv, "/v1/chat/completions", "", hello)
	if status != http.StatusBadGateway || out["raw"] != "<html>bad gateway</html>" {
		t.Errorf("status, body = %d, %v", status, out)
	}

	status, _, out = post(t, srv, "/v1/chat/completions", "", hello)
	if status != http.StatusBadRequest || !strings.Contains(errorOf(t, out)["message"].(string), "no reply for request 6") {
		t.Errorf("after the script: status, body = %d, %v", status, out)
	}

	if got := srv.Calls(); got != 6 {
		t.Errorf("Calls() = %d, want 6", got)
	}
	if got := srv.Responses(); got != 3 {
		t.Errorf("Responses() = %d, want 3", got)
	}
	first := srv.Requests()[0]
	if first.Call != 1 || first.Model != "m" || len(first.Messages) != 2 || first.Messages[1].Content != "hi there" {
		t.Errorf("first request = %+v", first)
	}
	if first.ToolChoice != "required" || first.ParallelToolCalls == nil || !*first.ParallelToolCalls ||
		first.MaxTokens != 100 || first.MaxTokensField != "max_tokens" || first.Temperature == nil || *first.Temperature != 0 {
		t.Errorf("first request = %+v", first)
	}
	if got := first.ToolNames(); len(got) != 1 || got[0] != "get_overview" {
		t.Errorf("ToolNames() = %v", got)
	}
	if last, _ := srv.LastRequest(); last.Call != 6 || last.Temperature != nil {
		t.Errorf("last request = %+v, want call 6 without temperature", last)
	}
	srv.ResetCounters()
	if srv.Calls() != 0 || srv.Usage() != (openaitest.Usage{}) {
		t.Errorf("after ResetCounters: %d calls, usage %+v", srv.Calls(), srv.Usage())
	}
}

func TestWithoutResponseFormats(t *testing.T) {
	srv := openaitest.New(nil, openaitest.WithoutResponseFormats("json_schema"), openaitest.WithoutUsage())
	t.Cleanup(srv.Close)
	body := `{"model":"m","messages":[{"role":"user","content":"JSON please"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object"}}}}`
	status, _, out := post(t, srv, "/v1/chat/completions", "", body)
	if status != http.StatusBadRequest || errorOf(t, out)["message"] != "response_format json_schema is not supported" {
		t.Errorf("json_schema: status, body = %d, %v", status, out)
	}
	body = `{"model":"m","messages":[{"role":"user","content":"JSON please"}],"response_format":{"type":"json_object"}}`
	status, _, out = post(t, srv, "/v1/chat/completions", "", body)
	if status != http.StatusOK {
		t.Errorf("json_object: status, body = %d, %v", status, out)
	}
	if _, ok := out["usage"]; ok {
		t.Errorf("usage = %v, want none (WithoutUsage)", out["usage"])
	}
}

func TestLatencyEndsWithTheClient(t *testing.T) {
	srv := openaitest.New(nil, openaitest.WithLatency(time.Hour))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/chat/completions", strings.NewReader(hello))
	start := time.Now()
	if _, err := srv.Client().Do(req); err == nil {
		t.Fatal("no error, want a timeout")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestUnknownPath(t *testing.T) {
	tests := []struct {
		kind openaitest.NotFound
		want string
	}{
		{openaitest.NotFoundInvalidURL, `"message":"Invalid URL (POST /v1/completions)"`},
		{openaitest.NotFoundUnknownURL, `"code":"unknown_url"`},
		{openaitest.NotFoundPlain, "404 page not found"},
		{openaitest.NotFoundDetail, `{"detail":"Not Found"}`},
	}
	for _, tt := range tests {
		srv := openaitest.New(nil, openaitest.WithNotFound(tt.kind), openaitest.WithoutResponses())
		t.Cleanup(srv.Close)
		for _, path := range []string{"/v1/completions", "/v1/responses"} {
			resp, err := srv.Client().Post(strings.TrimSuffix(srv.URL, "/v1")+path, "application/json", strings.NewReader(hello))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := strings.ReplaceAll(tt.want, "/v1/completions", path)
			if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), want) {
				t.Errorf("%s: status, body = %d, %s; want 404 with %s", path, resp.StatusCode, body, want)
			}
		}
	}
}

func TestFromAgent(t *testing.T) {
	var got agent.Request
	srv := openaitest.New(openaitest.FromAgent(func(req agent.Request) agent.Response {
		got = req
		return agent.Response{Content: "thinking", ToolCalls: []agent.ToolCall{{ID: "c9", Name: "final_answer", Arguments: `{"answer":"ok"}`}},
			Usage: agent.Usage{PromptTokens: 11, CompletionTokens: 2}}
	}))
	t.Cleanup(srv.Close)
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"final_answer","parameters":{"type":"object"}}}],` +
		`"tool_choice":"required","parallel_tool_calls":false,"max_completion_tokens":50,"temperature":0.5,` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object"},"strict":false}}}`
	status, _, out := post(t, srv, "/v1/chat/completions", "", body)
	if status != http.StatusOK {
		t.Fatalf("status = %d: %v", status, out)
	}
	if got.ToolChoice != "required" || got.ParallelToolCalls || got.MaxTokens != 50 || got.Temperature != 0.5 ||
		len(got.Tools) != 1 || got.Format == nil || got.Format.Kind != agent.FormatJSONSchema || got.Messages[0].Role != agent.RoleUser {
		t.Errorf("agent request = %+v", got)
	}
	msg := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if msg["content"] != "thinking" || msg["tool_calls"].([]any)[0].(map[string]any)["id"] != "c9" {
		t.Errorf("message = %v", msg)
	}
	if u := srv.Usage(); u.PromptTokens != 11 || u.CompletionTokens != 2 {
		t.Errorf("Usage() = %+v", u)
	}
}
