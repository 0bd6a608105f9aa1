package openaitest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

const luna = `"model":"gpt-6-luna"`

func TestResponsesRulesLikeTheRealAPI(t *testing.T) {
	srv := openaitest.New(openaitest.Replies(openaitest.Text("one"), openaitest.Text("two"), openaitest.Text("three"), openaitest.Text("four")))
	t.Cleanup(srv.Close)
	tool := `"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{},"additionalProperties":false,"required":[]}}]`
	tests := []struct {
		name, path, body string
		status           int
		param, code, in  string
	}{
		{"temperature while reasoning", "/v1/responses", `{` + luna + `,"input":"hi","temperature":0}`, 400, "temperature", "unsupported_parameter", "Unsupported parameter"},
		{"top_p while reasoning", "/v1/responses", `{` + luna + `,"input":"hi","reasoning":{"effort":"low"},"top_p":0.5}`, 400, "top_p", "unsupported_parameter", ""},
		{"tools on chat with reasoning", "/v1/chat/completions", `{` + luna + `,"messages":[{"role":"user","content":"hi"}],` +
			`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}]}`, 400, "tools", "", "Please use /v1/responses"},
		{"effort none on astra", "/v1/responses", `{"model":"gpt-6-astra","input":"hi","reasoning":{"effort":"none"}}`, 400, "reasoning.effort", "unsupported_value", ""},
		{"effort on a model that does not reason", "/v1/responses", `{"model":"llama3.1","input":"hi","reasoning":{"effort":"low"}}`, 400, "reasoning.effort", "unsupported_parameter", ""},
		{"max_tokens on a reasoning model", "/v1/chat/completions", `{"model":"o4-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":10}`, 400, "max_tokens", "unsupported_parameter", "max_completion_tokens"},
		{"parallel_tool_calls on o3", "/v1/chat/completions", `{"model":"o3","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":100,` +
			`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}],"parallel_tool_calls":true}`, 400, "parallel_tool_calls", "unsupported_parameter", ""},
		{"strict by default", "/v1/responses", `{` + luna + `,"input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}]}`,
			400, "tools[0].parameters", "invalid_function_parameters", "Invalid schema for function 'f'"},
		{"output without its call", "/v1/responses", `{` + luna + `,"input":[{"role":"user","content":"hi"},{"type":"function_call_output","call_id":"c1","output":"x"}]}`,
			400, "input", "", "No tool call found for function call output with call_id c1."},
		{"call without its output", "/v1/responses", `{` + luna + `,` + tool + `,"input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}]}`,
			400, "input", "", "No tool output found for function call c1."},
		{"previous response", "/v1/responses", `{` + luna + `,"input":"hi","previous_response_id":"resp_1"}`, 400, "previous_response_id", "previous_response_not_found", ""},
		{"reasoning item not kept", "/v1/responses", `{` + luna + `,"store":false,"input":[{"role":"user","content":"hi"},{"type":"reasoning","id":"rs_1","summary":[]},{"role":"assistant","content":"x"},{"role":"user","content":"again"}]}`,
			404, "input", "", "Items are not persisted when `store` is set to false"},
		{"reasoning item forged", "/v1/responses", `{` + luna + `,"store":false,"input":[{"role":"user","content":"hi"},{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAAAforged"},{"role":"assistant","content":"x"}]}`,
			400, "", "invalid_encrypted_content", "The encrypted content gAAA...rged could not be verified."},
		{"max_output_tokens below 16", "/v1/responses", `{` + luna + `,"input":"hi","max_output_tokens":8}`, 400, "max_output_tokens", "integer_below_min_value", ""},
		{"json_object without the word", "/v1/responses", `{` + luna + `,"input":"hi","text":{"format":{"type":"json_object"}}}`, 400, "text.format", "", "must contain the word 'json'"},
		{"tools on chat without reasoning", "/v1/chat/completions", `{` + luna + `,"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"none","temperature":0,` +
			`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}]}`, 200, "", "", ""},
		{"sampling without reasoning", "/v1/responses", `{` + luna + `,"input":"hi","reasoning":{"effort":"none"},"temperature":0}`, 200, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, out := post(t, srv, tt.path, "", tt.body)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %v", status, tt.status, out)
			}
			if status == 200 {
				return
			}
			e := errorOf(t, out)
			msg, _ := e["message"].(string)
			if param, _ := e["param"].(string); param != tt.param || (tt.code != "" && e["code"] != tt.code) || !strings.Contains(msg, tt.in) {
				t.Errorf("error = %v, want param %q, code %q, message with %q", e, tt.param, tt.code, tt.in)
			}
		})
	}
}

func TestResponsesOutput(t *testing.T) {
	srv := openaitest.New(openaitest.Replies(
		openaitest.Reply{Content: "Moving.", ToolCalls: []openaitest.ToolCall{{ID: "call_9", Name: "f", Arguments: `{"a":1}`}}},
		openaitest.Text(strings.Repeat("long answer ", 40)),
	))
	t.Cleanup(srv.Close)
	tool := `"tools":[{"type":"function","name":"f","strict":false,"parameters":{"type":"object","properties":{}}}]`
	status, _, out := post(t, srv, "/v1/responses", "", `{`+luna+`,"store":false,"include":["reasoning.encrypted_content"],"reasoning":{"effort":"low"},`+tool+`,"input":"hi"}`)
	if status != http.StatusOK || out["status"] != "completed" || out["object"] != "response" {
		t.Fatalf("status %d: %v", status, out)
	}
	items, _ := out["output"].([]any)
	if len(items) != 3 {
		t.Fatalf("output = %v, want reasoning, message, function_call", items)
	}
	rs, msg, fc := items[0].(map[string]any), items[1].(map[string]any), items[2].(map[string]any)
	if rs["type"] != "reasoning" || !strings.HasPrefix(rs["encrypted_content"].(string), "gAAAAA") || rs["id"] == "" {
		t.Errorf("reasoning item = %v", rs)
	}
	if msg["type"] != "message" || msg["role"] != "assistant" || msg["content"].([]any)[0].(map[string]any)["text"] != "Moving." {
		t.Errorf("message item = %v", msg)
	}
	if fc["type"] != "function_call" || fc["call_id"] != "call_9" || fc["name"] != "f" || fc["arguments"] != `{"a":1}` {
		t.Errorf("function_call item = %v", fc)
	}
	u := out["usage"].(map[string]any)
	if u["output_tokens_details"].(map[string]any)["reasoning_tokens"] != float64(64) || u["input_tokens_details"].(map[string]any)["cached_tokens"] != float64(0) {
		t.Errorf("usage = %v", u)
	}

	// Cut off at max_output_tokens: reasoning counts against the limit.
	status, _, out = post(t, srv, "/v1/responses", "", `{`+luna+`,"input":"hi","reasoning":{"effort":"low"},"max_output_tokens":80}`)
	if status != http.StatusOK || out["status"] != "incomplete" || out["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" {
		t.Fatalf("status %d: %v", status, out)
	}
	items = out["output"].([]any)
	if _, ok := items[0].(map[string]any)["encrypted_content"]; ok {
		t.Errorf("encrypted content without include: %v", items[0])
	}
	text := items[1].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string)
	if len(text) != 64 || out["usage"].(map[string]any)["output_tokens"] != float64(80) {
		t.Errorf("cut text %q (%d), usage %v: want 16 tokens of text after 64 of reasoning", text, len(text), out["usage"])
	}
}

func TestModelLookup(t *testing.T) {
	srv := openaitest.New(nil, openaitest.WithModels(openaitest.Model{ID: "gpt-4.1-mini", ShutdownDate: "2027-01-14"}))
	t.Cleanup(srv.Close)
	get := func(id string) (int, map[string]any) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + "/models/" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = jsonDecode(resp.Body, &out)
		return resp.StatusCode, out
	}
	if status, out := get("gpt-4.1-mini"); status != 200 || out["shutdown_date"] != "2027-01-14" || out["object"] != "model" {
		t.Errorf("%d %v", status, out)
	}
	if status, out := get("gpt-6-nova"); status != 404 || out["error"].(map[string]any)["code"] != "model_not_found" {
		t.Errorf("%d %v", status, out)
	}
	if srv.ModelLookups() != 2 || srv.Calls() != 0 {
		t.Errorf("lookups %d, calls %d", srv.ModelLookups(), srv.Calls())
	}
	// Without WithModels, a model the deprecations page lists has its date.
	all := openaitest.New(nil)
	t.Cleanup(all.Close)
	resp, err := all.Client().Get(all.URL + "/models/gpt-5-nano")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = jsonDecode(resp.Body, &m)
	if m["shutdown_date"] != "2026-12-11" {
		t.Errorf("gpt-5-nano: %v, want shutdown_date 2026-12-11", m)
	}
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// TestResponsesReplay: messages carry their phase, every item an id, and
// a request that sends them back rebuilt, reordered or without phase is
// answered with the differences listed in Request.Replay.
func TestResponsesReplay(t *testing.T) {
	srv := openaitest.New(openaitest.Replies(
		openaitest.Reply{Output: []openaitest.Item{openaitest.Reasoning(), openaitest.OutputText("Looking.", "commentary"), openaitest.Reasoning(),
			openaitest.FunctionCall(openaitest.ToolCall{ID: "call_1", Name: "f", Arguments: `{}`})}},
		openaitest.Text("done"), openaitest.Text("done"), openaitest.Text("done"), openaitest.Text("done")))
	t.Cleanup(srv.Close)
	tool := `"tools":[{"type":"function","name":"f","strict":false,"parameters":{"type":"object","properties":{}}}]`
	head := `{` + luna + `,"store":false,"include":["reasoning.encrypted_content"],"reasoning":{"effort":"low"},` + tool + `,"input":`
	status, _, out := post(t, srv, "/v1/responses", "", head+`"hi"}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %v", status, out)
	}
	items := out["output"].([]any)
	var kinds []string
	for _, it := range items {
		m := it.(map[string]any)
		if id, _ := m["id"].(string); id == "" {
			t.Errorf("item without id: %v", m)
		}
		kinds = append(kinds, m["type"].(string))
	}
	if strings.Join(kinds, ",") != "reasoning,message,reasoning,function_call" || items[1].(map[string]any)["phase"] != "commentary" {
		t.Fatalf("output = %v", items)
	}
	raw := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	user := `{"role":"user","content":"hi"}`
	result := `{"type":"function_call_output","call_id":"call_1","output":"ok"}`
	tests := []struct {
		name  string
		input string
		want  string // "" for no problem
	}{
		{"as it came", "[" + user + "," + raw(items[0]) + "," + raw(items[1]) + "," + raw(items[2]) + "," + raw(items[3]) + "," + result + "]", ""},
		{"reordered", "[" + user + "," + raw(items[2]) + "," + raw(items[3]) + "," + raw(items[0]) + "," + raw(items[1]) + "," + result + "]", "out of order"},
		{"rebuilt", "[" + user + "," + raw(items[0]) + `,{"role":"assistant","content":"Looking."},` + raw(items[2]) +
			`,{"type":"function_call","call_id":"call_1","name":"f","arguments":"{}"},` + result + "]", "without its phase"},
		{"history without phase", `[{"role":"assistant","content":"Earlier answer."},` + user + "]", "without its phase"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, out := post(t, srv, "/v1/responses", "", head+tt.input+"}")
			if status != http.StatusOK {
				t.Fatalf("status %d: %v", status, out)
			}
			req, _ := srv.LastRequest()
			got := strings.Join(req.Replay, "; ")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("Replay = %q, want %q", got, tt.want)
			}
		})
	}
}
