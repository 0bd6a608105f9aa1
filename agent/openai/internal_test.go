package openai

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		wantOK bool
	}{
		{"none", nil, 0, false},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second, true},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond, true},
		{"zero", map[string]string{"Retry-After": "0"}, 0, true},
		{"HTTP date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second, true},
		{"date in the past", map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0, true},
		{"milliseconds first", map[string]string{"Retry-After": "2", "Retry-After-Ms": "250"}, 250 * time.Millisecond, true},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, false},
		{"negative", map[string]string{"Retry-After": "-3"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, ok := retryAfter(h, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("retryAfter = %s, %v; want %s, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

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
	tests := []struct {
		in   string
		edit bodyEdit
		want string
	}{
		{`{"model":"m","messages":[]}`, zero, `{"messages":[],"model":"m","temperature":0}`},
		{`{}`, zero, `{"temperature":0}`},
		{` { }`, zero, `{"temperature":0}`},
		{`{"temperature":0.5}`, zero, `{"temperature":0.5}`},
		{`{"model":"o3","parallel_tool_calls":true,"tools":[]}`, bodyEdit{drop: map[string]bool{"parallel_tool_calls": true}}, `{"model":"o3","tools":[]}`},
	}
	for _, tt := range tests {
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
	}
}

func TestBackoff(t *testing.T) {
	c := New(Config{BackoffBase: 100 * time.Millisecond, BackoffMax: 2 * time.Second}, nil)
	for n := range 40 {
		d := min(100*time.Millisecond<<min(n, 30), 2*time.Second)
		for range 20 {
			if got := c.backoff(n); got < d/2 || got > d {
				t.Fatalf("backoff(%d) = %s, want %s..%s", n, got, d/2, d)
			}
		}
	}
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
