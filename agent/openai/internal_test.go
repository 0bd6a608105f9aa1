package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
)

func TestFormatUnsupported(t *testing.T) {
	tests := []struct {
		name   string
		err    *apiError
		kind   agent.FormatKind
		wantOK bool
	}{
		{"OpenAI, older model", &apiError{Status: 400, Param: "response_format", Code: "invalid_parameter",
			Message: "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model."}, agent.FormatJSONSchema, true},
		{"openaitest", &apiError{Status: 400, Param: "response_format", Message: "response_format json_schema is not supported"}, agent.FormatJSONSchema, true},
		{"LM Studio refusing json_object", &apiError{Status: 400, Message: "'response_format.type' must be 'json_schema' or 'text'"}, agent.FormatJSONObject, true},
		{"validation error of a Python server", &apiError{Status: 422, Message: "response_format: Extra inputs are not permitted"}, agent.FormatJSONSchema, true},
		{"unknown field", &apiError{Status: 400, Message: "unknown field `json_schema`"}, agent.FormatJSONSchema, true},
		{"invalid strict schema is ours to fix", &apiError{Status: 400, Param: "response_format", Code: "invalid_json_schema",
			Message: "Invalid schema for response_format 'react_step': In context=(), 'additionalProperties' is required to be supplied and to be false."}, agent.FormatJSONSchema, false},
		{"json_object without the word json", &apiError{Status: 400, Param: "messages",
			Message: "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'."}, agent.FormatJSONObject, false},
		{"another parameter", &apiError{Status: 400, Param: "tools", Message: "tools are not supported by this model"}, agent.FormatJSONSchema, false},
		{"a server error", &apiError{Status: 500, Message: "response_format json_schema is not supported"}, agent.FormatJSONSchema, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := &agent.Error{Code: agent.ErrInvalid, Message: "x", Err: tt.err}
			if got := formatUnsupported(err, tt.kind); got != tt.wantOK {
				t.Errorf("formatUnsupported = %v, want %v", got, tt.wantOK)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	c := &Client{key: "my-local-key"}
	tests := []struct{ in, want string }{
		{"key my-local-key here", "key [redacted] here"},
		{"Authorization: Bearer abc.def-ghi", "Authorization: Bearer [redacted]"},
		{"Incorrect API key provided: sk-proj-abcd1234****wxyz.", "Incorrect API key provided: sk-[redacted]"},
		{"nothing secret", "nothing secret"},
	}
	for _, tt := range tests {
		if got := c.redact(tt.in); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestEditBody(t *testing.T) {
	zero := bodyEdit{zeroTemperature: true}
	drop := bodyEdit{drop: map[string]bool{"parallel_tool_calls": true}}
	both := bodyEdit{drop: drop.drop, zeroTemperature: true}
	tests := []struct {
		name string
		in   string
		edit bodyEdit
		want string
	}{
		// Adding the temperature alone is spliced in, the rest kept
		// byte for byte.
		{"added first", `{"model":"m","messages":[]}`, zero, `{"temperature":0,"model":"m","messages":[]}`},
		{"empty object", `{}`, zero, `{"temperature":0}`},
		{"empty object with spaces", ` { }`, zero, ` {"temperature":0 }`},
		{"spaces kept", "{ \"model\" : \"m\" }\n", zero, "{\"temperature\":0, \"model\" : \"m\" }\n"},
		{"present", `{"temperature":0.5}`, zero, `{"temperature":0.5}`},
		{"present after nested values", `{"messages":[{"role":"user","content":"a \"}{\" b\\"}],"tools":[{"x":{}}],"temperature":1}`, zero,
			`{"messages":[{"role":"user","content":"a \"}{\" b\\"}],"tools":[{"x":{}}],"temperature":1}`},
		{"nested key is not the request's", `{"tools":[{"parameters":{"properties":{"temperature":{"type":"number"}}}}],"response_format":{"temperature":1}}`, zero,
			`{"temperature":0,"tools":[{"parameters":{"properties":{"temperature":{"type":"number"}}}}],"response_format":{"temperature":1}}`},
		{"quoted in a value is not a key", `{"messages":[{"content":"\"temperature\":1"}],"model":"temperature"}`, zero,
			`{"temperature":0,"messages":[{"content":"\"temperature\":1"}],"model":"temperature"}`},
		{"escaped backslash before a quote", `{"a":"x\\","temperature":2}`, zero, `{"a":"x\\","temperature":2}`},
		// The tools, with or without the temperature, are spliced in
		// too, in one place before the body (editBody's room).
		{"tools and temperature", `{"model":"m"}`, bodyEdit{zeroTemperature: true, tools: []byte(`[{"x":1}]`)}, `{"tools":[{"x":1}],"temperature":0,"model":"m"}`},
		{"tools and a temperature present", ` {"temperature":1}`, bodyEdit{zeroTemperature: true, tools: []byte(`[{"x":1}]`)}, ` {"tools":[{"x":1}],"temperature":1}`},
		{"tools into an empty object", "\n{ }", bodyEdit{tools: []byte(`[]`)}, "\n{\"tools\":[] }"},
		{"tools and temperature into an empty object", `{}`, bodyEdit{zeroTemperature: true, tools: []byte(`[]`)}, `{"tools":[],"temperature":0}`},
		{"tools, not an object", `[1]`, bodyEdit{tools: []byte(`[]`)}, `[1]`},
		// What the scan cannot tell goes through a decode.
		{"escaped key", `{"\u0074emperature":0.5}`, zero, `{"temperature":0.5}`},
		{"not an object", `[1]`, zero, `[1]`},
		{"not JSON", `{"model":`, zero, `{"model":`},
		// Dropping fields decodes the body.
		{"dropped", `{"model":"o3","parallel_tool_calls":true,"tools":[]}`, drop, `{"model":"o3","tools":[]}`},
		{"dropped and added", `{"model":"m","parallel_tool_calls":true}`, both, `{"model":"m","temperature":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, "http://example.test/v1/chat/completions", strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			r, err := editBody(req, tt.edit)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(r.Body)
			if string(got) != tt.want || r.ContentLength != int64(len(tt.want)) {
				t.Errorf("body = %s (length %d), want %s", got, r.ContentLength, tt.want)
			}
			again, _ := r.GetBody()
			if b, _ := io.ReadAll(again); string(b) != tt.want {
				t.Errorf("GetBody = %s, want %s", b, tt.want)
			}
		})
	}
}

// The spliced body and the decoded one say the same, whatever go-openai
// encodes: a temperature the request had is kept, and one it lacked is 0.
func TestEditBodySpliceMatchesDecode(t *testing.T) {
	c := New(Config{Model: "gpt-4.1-mini"}, nil)
	reqs := []agent.Request{
		{Messages: []agent.Message{{Role: agent.RoleUser, Content: `say "temperature": {0} [1] \ "`}}, MaxTokens: 10},
		{Messages: []agent.Message{{Role: agent.RoleSystem, Content: agent.SystemPrompt(agent.ProtocolTools)}, {Role: agent.RoleUser, Content: "hi"}},
			Tools: []agent.Tool{{Name: "set", Parameters: json.RawMessage(`{"type":"object","properties":{"temperature":{"type":"number"}}}`)}}, ToolChoice: "required"},
		{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}, Temperature: 0.7},
	}
	for i, req := range reqs {
		body, err := json.Marshal(c.chatRequest(req, c.plan(req)))
		if err != nil {
			t.Fatal(err)
		}
		spliced, ok := splicedCopy(body, bodyEdit{zeroTemperature: true})
		if !ok {
			t.Fatalf("request %d: the scan could not read %s", i, body)
		}
		var got, want map[string]any
		if err := json.Unmarshal(spliced, &got); err != nil {
			t.Fatalf("request %d: spliced body %s: %v", i, spliced, err)
		}
		// A drop of a field no request has takes the decoding path.
		decoded := edited(body, bodyEdit{zeroTemperature: true, drop: map[string]bool{"none": true}})
		if err := json.Unmarshal(decoded, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("request %d: spliced %s\ndecoded %s", i, spliced, decoded)
		}
		if wantT := float64(req.Temperature); math.Abs(got["temperature"].(float64)-wantT) > 1e-6 {
			t.Errorf("request %d: temperature %v, want %v", i, got["temperature"], wantT)
		}
	}
}

// FuzzSplicedZeroTemperature: whatever valid JSON object the scan reads,
// its answer decodes to what decoding the body and adding the field would
// give.
func FuzzSplicedZeroTemperature(f *testing.F) {
	for _, s := range []string{`{}`, `{"temperature":1}`, `{"a":{"temperature":1}}`, `{"a":"\"temperature\":1"}`,
		`{"a":"x\\","temperature":2}`, `{"\u0074emperature":1}`, ` {"a" : [ {} , [] ] } `, `{"a":"\\\""}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var want map[string]json.RawMessage
		if json.Unmarshal(body, &want) != nil || want == nil {
			return // not an object: the scan's answer is not used
		}
		out, ok := splicedCopy(body, bodyEdit{zeroTemperature: true})
		if !ok {
			return
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s became %s: %v", body, out, err)
		}
		if _, had := want["temperature"]; !had {
			want["temperature"] = json.RawMessage("0")
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s became %s", body, out)
		}
	})
}

func TestReasoningModel(t *testing.T) {
	for model, want := range map[string]bool{
		"o1": true, "o3-mini": true, "o4-mini": true, "gpt-5": true, "gpt-5-mini": true,
		"gpt-4.1-mini": false, "gpt-4o": false, "llama3.1:8b": false, "qwen2.5": false,
	} {
		if got := reasoningModel(model); got != want {
			t.Errorf("reasoningModel(%q) = %v, want %v", model, got, want)
		}
	}
}

func TestTruncate(t *testing.T) {
	if got := truncate("héllo", 2); got != "h…" {
		t.Errorf("truncate = %q, want h… (no split rune)", got)
	}
	if got := truncate("abc", 5); got != "abc" {
		t.Errorf("truncate = %q", got)
	}
}

func TestRateLimitReset(t *testing.T) {
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	for _, tt := range []struct {
		name string
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{"none", h(), 0, false},
		{"tokens exhausted", h("x-ratelimit-reset-requests", "1s", "x-ratelimit-remaining-requests", "5",
			"x-ratelimit-reset-tokens", "6m0s", "x-ratelimit-remaining-tokens", "0"), 6 * time.Minute, true},
		{"neither says 0: the later", h("x-ratelimit-reset-requests", "20ms", "x-ratelimit-reset-tokens", "1.5s"), 1500 * time.Millisecond, true},
		{"Retry-After first", h("Retry-After", "2", "x-ratelimit-reset-requests", "9s"), 2 * time.Second, true},
		{"unreadable", h("x-ratelimit-reset-requests", "soon"), 0, false},
	} {
		got, ok := retryAfter(tt.h, time.Now())
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: %s %v, want %s %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// TestToolsEncodedOnce: the tools a request is sent with are go-openai's
// own encoding of them, spliced into the body (or added on the decoding
// path), and encoded once while they stay the same: a change of schema
// is encoded again.
func TestToolsEncodedOnce(t *testing.T) {
	c := New(Config{Model: "gpt-4.1-mini"}, nil)
	req := agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}, ToolChoice: "required",
		Tools: []agent.Tool{{Name: "set", Description: "sets", Parameters: json.RawMessage(`{"type":"object","properties":{"temperature":{"type":"number"}}}`)}}}
	full := c.chatRequest(req, c.plan(req))
	want, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	tools := c.encodedTools(full.Tools)
	if again := c.encodedTools(c.chatRequest(req, c.plan(req)).Tools); &again[0] != &tools[0] {
		t.Error("the same tools were encoded again")
	}
	bare := full
	bare.Tools = nil
	body, err := json.Marshal(bare)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []bodyEdit{{tools: tools}, {tools: tools, zeroTemperature: true}, {tools: tools, drop: map[string]bool{"none": true}}} {
		var got, wantV map[string]any
		if err := json.Unmarshal(edited(body, e), &got); err != nil {
			t.Fatalf("%+v: %v", e, err)
		}
		if err := json.Unmarshal(want, &wantV); err != nil {
			t.Fatal(err)
		}
		delete(got, "temperature")
		if !reflect.DeepEqual(got, wantV) {
			t.Errorf("edit %+v: sent %s\nwant %s", e, edited(body, e), want)
		}
	}
	req.Tools[0].Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	if changed := c.encodedTools(c.chatRequest(req, c.plan(req)).Tools); bytes.Contains(changed, []byte("temperature")) {
		t.Errorf("a changed schema was sent as before: %s", changed)
	}
	// The tools are made once too (chatTools): a schema changed in
	// place, in the same bytes, or another schema level makes them again.
	params := []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`)
	req.Tools[0].Parameters, req.Tools[0].Strict = params, true
	first := c.chatRequest(req, c.plan(req)).Tools
	if &first[0] != &c.chatRequest(req, c.plan(req)).Tools[0] {
		t.Error("the same tools were made again")
	}
	if before := c.encodedTools(first); !bytes.Contains(before, []byte(`"a"`)) {
		t.Fatalf("the tools were sent without their schema: %s", before)
	}
	params[bytes.IndexByte(params, 'a')] = 'b'
	if changed := c.encodedTools(c.chatRequest(req, c.plan(req)).Tools); !bytes.Contains(changed, []byte(`"b"`)) || !bytes.Contains(changed, []byte(`"strict":true`)) {
		t.Errorf("a schema changed in place was sent as before: %s", changed)
	}
	c.schema = schemaLoose
	if loose := c.encodedTools(c.chatRequest(req, c.plan(req)).Tools); bytes.Contains(loose, []byte(`"strict":true`)) {
		t.Errorf("the tools were sent strict at the loose schema level: %s", loose)
	}
}

// splicedCopy is spliced on a copy of body, as editBody reads it (room
// free before it).
func splicedCopy(body []byte, e bodyEdit) ([]byte, bool) {
	room := e.room()
	buf := make([]byte, room+len(body))
	copy(buf[room:], body)
	return spliced(buf, room, e)
}

// edited is body changed as editBody changes it; a body that is not a
// JSON object is left as it is.
func edited(body []byte, e bodyEdit) []byte {
	if out, ok := splicedCopy(body, e); ok {
		return out
	}
	return decodedEdit(body, e)
}
