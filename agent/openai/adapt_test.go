package openai_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

// agentTools are the engine's own strict tools.
func agentTools(t *testing.T) []agent.Tool {
	t.Helper()
	var tools []agent.Tool
	for _, name := range agent.ActionNames() {
		schema, ok := agent.ActionSchema(name, true)
		if !ok {
			t.Fatalf("no schema for %s", name)
		}
		tools = append(tools, agent.Tool{Name: name, Parameters: schema, Strict: true})
	}
	return tools
}

func greeting() []agent.Message { return []agent.Message{{Role: agent.RoleUser, Content: "hi"}} }

// Issue 9, item 1: parallel_tool_calls is left out for the models known
// to reject it, and any field a server calls unsupported is dropped,
// retried once, and remembered.
func TestUnsupportedParameters(t *testing.T) {
	tools := []agent.Tool{{Name: "get_overview", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}
	req := agent.Request{Messages: greeting(), Tools: tools, ToolChoice: "required", ParallelToolCalls: true, MaxTokens: 1024}
	for _, model := range []string{"o3", "o3-mini", "o4-mini", "o1"} {
		t.Run(model, func(t *testing.T) {
			for _, api := range []string{openai.APIChat, openai.APIResponses} {
				srv, c, _ := start(t, nil, openai.Config{Model: model, API: api})
				if _, err := c.Complete(t.Context(), req); err != nil {
					t.Fatal(err)
				}
				if got, _ := srv.LastRequest(); srv.Calls() != 1 || got.ParallelToolCalls != nil {
					t.Errorf("%s: %d calls, parallel_tool_calls %v: want 1 call without it", api, srv.Calls(), got.ParallelToolCalls)
				}
			}
		})
	}
	t.Run("any field, once", func(t *testing.T) {
		// A local server that knows no reasoning_effort.
		srv, c, _ := start(t, nil, openai.Config{Model: "llama3.1", ReasoningEffort: "low"})
		for range 2 {
			if _, err := c.Complete(t.Context(), agent.Request{Messages: greeting(), MaxTokens: 100}); err != nil {
				t.Fatal(err)
			}
		}
		reqs := srv.Requests()
		if len(reqs) != 3 || reqs[0].ReasoningEffort != "low" || reqs[1].ReasoningEffort != "" || reqs[2].ReasoningEffort != "" {
			t.Fatalf("%d requests: want the field sent once, dropped on the retry and after", len(reqs))
		}
		if reqs[2].Temperature == nil {
			t.Error("no temperature once reasoning is off")
		}
	})
	t.Run("not twice", func(t *testing.T) {
		e := openaitest.BadRequest("Unsupported parameter: 'parallel_tool_calls' is not supported with this model.", "parallel_tool_calls", "unsupported_parameter")
		srv, c, _ := start(t, openaitest.Replies(e, e, openaitest.Text("no")), openai.Config{Model: "my-deployment"})
		_, err := c.Complete(t.Context(), req)
		if err == nil || srv.Calls() != 2 {
			t.Errorf("err %v after %d calls: want the second refusal final", err, srv.Calls())
		}
	})
}

// Issue 9, item 2: an Azure deployment of a reasoning model under a name
// of its own. By default the client learns from the 400s (max_tokens,
// then temperature); with ReasoningModel it sends max_completion_tokens,
// an effort and no temperature from the start.
func TestReasoningDeployment(t *testing.T) {
	req := agent.Request{Messages: greeting(), MaxTokens: 1000}
	srv, c, _ := start(t, nil, openai.Config{Model: "prod-reasoner"}, openaitest.WithReasoningModels("prod-reasoner"))
	for range 2 {
		if _, err := c.Complete(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	if reqs := srv.Requests(); len(reqs) != 4 || reqs[0].MaxTokensField != "max_tokens" || reqs[0].Temperature == nil ||
		reqs[3].MaxTokensField != "max_completion_tokens" || reqs[3].Temperature != nil {
		t.Errorf("%d requests, want temperature refused once, max_tokens once, then neither", len(reqs))
	}

	srv, c, _ = start(t, nil, openai.Config{Model: "prod-reasoner", ReasoningModel: true}, openaitest.WithReasoningModels("prod-reasoner"))
	if _, err := c.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	got, _ := srv.LastRequest()
	if srv.Calls() != 1 || got.MaxTokensField != "max_completion_tokens" || got.ReasoningEffort != "low" || got.Temperature != nil {
		t.Errorf("%d calls; %s, effort %q, temperature %v", srv.Calls(), got.MaxTokensField, got.ReasoningEffort, got.Temperature)
	}
}

// Issue 9, item 3: a reply cut off at the token limit is asked again once
// with twice the limit; cut off again, the call fails saying so.
func TestCutOffReply(t *testing.T) {
	long := strings.Repeat("x", 400) // 100 tokens in the fake
	for _, api := range []string{openai.APIChat, openai.APIResponses} {
		t.Run(api, func(t *testing.T) {
			srv, c, _ := start(t, openaitest.Replies(openaitest.Text(long), openaitest.Text(long)), openai.Config{Model: "gpt-6-luna", API: api})
			got, err := c.Complete(t.Context(), agent.Request{Messages: greeting(), MaxTokens: 120}) // 64 reasoning + 100 do not fit
			if err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			if got.Content != long || got.FinishReason != "stop" || len(reqs) != 2 || reqs[0].MaxTokens != 120 || reqs[1].MaxTokens != 240 {
				t.Errorf("reply %q (%s) after %d requests: want the whole text on a retry with 240", got.Content, got.FinishReason, len(reqs))
			}

			srv, c, _ = start(t, openaitest.Replies(openaitest.Text(long+long+long), openaitest.Text(long+long+long)), openai.Config{Model: "gpt-6-luna", API: api})
			_, err = c.Complete(t.Context(), agent.Request{Messages: greeting(), MaxTokens: 120})
			if msg := agent.ErrorMessageOf(err); !strings.Contains(msg, "cut off at its limit of 240 tokens") || !strings.Contains(msg, "TIDYBOT_MAX_TOKENS") || srv.Calls() != 2 {
				t.Errorf("err %v after %d calls", err, srv.Calls())
			}
		})
	}
}

// Issue 9, item 4: a server that rejects the non-core keywords of strict
// schemas gets strict core schemas; one that rejects strict schemas gets
// plain ones; each level is found once and kept.
func TestSchemaStepDown(t *testing.T) {
	tools := agentTools(t)
	req := agent.Request{Messages: greeting(), Tools: tools, ToolChoice: "required", MaxTokens: 1024}
	for _, tt := range []struct {
		name  string
		opt   openaitest.Option
		calls int
		check func(openaitest.Request) string
	}{
		{"core keywords only", openaitest.WithStrictCoreOnly(), 2, func(r openaitest.Request) string {
			for _, tool := range r.Tools {
				if !tool.Strict || strings.Contains(string(tool.Parameters), "maxItems") || strings.Contains(string(tool.Parameters), "minLength") {
					return "tool " + tool.Name + ": " + string(tool.Parameters)
				}
			}
			return ""
		}},
		{"no strict", openaitest.WithoutStrict(), 3, func(r openaitest.Request) string {
			for _, tool := range r.Tools {
				if tool.Strict || !strings.Contains(string(tool.Parameters), "maxItems") && tool.Name == agent.ActMoveTasks {
					return "tool " + tool.Name + " strict or stripped"
				}
			}
			return ""
		}},
	} {
		for _, api := range []string{openai.APIChat, openai.APIResponses} {
			t.Run(tt.name+" "+api, func(t *testing.T) {
				srv, c, _ := start(t, nil, openai.Config{Model: "ft:gpt-4.1-mini:acme", API: api}, tt.opt)
				if _, err := c.Complete(t.Context(), req); err != nil {
					t.Fatal(err)
				}
				if srv.Calls() != tt.calls {
					t.Errorf("%d calls, want %d", srv.Calls(), tt.calls)
				}
				if _, err := c.Complete(t.Context(), req); err != nil {
					t.Fatal(err)
				}
				last, _ := srv.LastRequest()
				if srv.Calls() != tt.calls+1 {
					t.Errorf("%d calls after a second Complete, want %d: the level is kept", srv.Calls(), tt.calls+1)
				}
				if msg := tt.check(last); msg != "" {
					t.Error(msg)
				}
			})
		}
	}
	t.Run("json protocol", func(t *testing.T) {
		srv, c, _ := start(t, nil, openai.Config{Model: "ft:gpt-4.1-mini:acme"}, openaitest.WithStrictCoreOnly())
		f := &agent.ResponseFormat{Kind: agent.FormatJSONSchema, Name: "react_step", Schema: agent.EnvelopeSchema(), Strict: true}
		if _, err := c.Complete(t.Context(), agent.Request{Messages: greeting(), Format: f, MaxTokens: 1024}); err != nil {
			t.Fatal(err)
		}
		last, _ := srv.LastRequest()
		if srv.Calls() != 2 || last.ResponseFormat.Type != "json_schema" || !last.ResponseFormat.Strict {
			t.Errorf("%d calls, format %+v", srv.Calls(), last.ResponseFormat)
		}
	})
}

// Issue 9, item 5: a configuration go-openai would refuse on every call
// is reported before any, naming the model and the setting.
func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		cfg   openai.Config
		tools bool
		want  string // "" for no error
	}{
		{openai.Config{Model: "gpt-6-luna", API: openai.APIChat, ReasoningEffort: "low"}, true, "OPENAI_MODEL=gpt-6-luna calls tools only through the Responses API"},
		{openai.Config{Model: "gpt-6-astra", API: openai.APIChat}, true, "set OPENAI_API=responses"},
		{openai.Config{Model: "gpt-6-astra", API: openai.APIChat, ReasoningEffort: "none"}, false, "TIDYBOT_REASONING_EFFORT=none is not supported by OPENAI_MODEL=gpt-6-astra"},
		{openai.Config{Model: "gpt-6-luna", API: openai.APIChat}, true, ""}, // effort not chosen: none on Chat
		{openai.Config{Model: "gpt-6-luna", API: openai.APIChat, ReasoningEffort: "low"}, false, ""},
		{openai.Config{Model: "gpt-6-luna", ReasoningEffort: "high"}, true, ""}, // auto: Responses
		{openai.Config{Model: "llama3.1", API: openai.APIChat}, true, ""},
	} {
		err := openai.New(tt.cfg, nil).Check(tt.tools)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%+v tools=%v: err = %v, want %q", tt.cfg, tt.tools, err, tt.want)
		}
	}
}

// Issue 9, item 6: without Retry-After, a 429 is waited out until the
// exhausted limit resets (x-ratelimit-reset-requests / -tokens).
func TestRateLimitResetHeaders(t *testing.T) {
	limited := openaitest.RateLimited("")
	limited.Header = map[string]string{
		"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1.5s",
		"x-ratelimit-remaining-tokens": "9000", "x-ratelimit-reset-tokens": "6m0s",
	}
	_, c, sl := start(t, openaitest.Replies(limited, openaitest.Text("ok")), openai.Config{})
	if _, err := c.Complete(t.Context(), agent.Request{Messages: greeting()}); err != nil {
		t.Fatal(err)
	}
	if got := sl.total(); got != 1500*time.Millisecond {
		t.Errorf("waited %s, want 1.5s (the reset of the exhausted request limit)", got)
	}
}

// A server that calls the response format itself an unsupported
// parameter gets a weaker format, not a call without one.
func TestUnsupportedResponseFormat(t *testing.T) {
	e := openaitest.BadRequest("Unsupported parameter: 'response_format' is not supported with this model.", "response_format", "unsupported_parameter")
	srv, c, _ := start(t, openaitest.Replies(e, openaitest.Text(`{"thought":"t"}`)), openai.Config{Model: "my-model"})
	f := &agent.ResponseFormat{Kind: agent.FormatJSONSchema, Name: "react_step", Schema: agent.EnvelopeSchema(), Strict: true}
	got, err := c.Complete(t.Context(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "answer in json"}}, Format: f})
	if err != nil {
		t.Fatal(err)
	}
	last, _ := srv.LastRequest()
	if got.Format != agent.FormatJSONObject || last.ResponseFormat == nil || last.ResponseFormat.Type != "json_object" {
		t.Errorf("format %s, sent %+v: want json_object", got.Format, last.ResponseFormat)
	}
}

// The tokens of a reply that was cut off and asked again are counted.
func TestCutOffTokensCounted(t *testing.T) {
	long := strings.Repeat("x", 400)
	_, c, _ := start(t, openaitest.Replies(openaitest.Text(long), openaitest.Text(long)), openai.Config{Model: "gpt-6-luna", API: openai.APIResponses})
	got, err := c.Complete(t.Context(), agent.Request{Messages: greeting(), MaxTokens: 120})
	if err != nil {
		t.Fatal(err)
	}
	// 120 cut off (64 reasoning), then 164 (64 reasoning + 100 text).
	if got.Usage.CompletionTokens != 120+164 || got.Usage.ReasoningTokens != 128 {
		t.Errorf("usage %+v, want both attempts' completion and reasoning tokens", got.Usage)
	}
}

// Calls under way when another learns a lesson still make use of it: no
// call fails because a concurrent one changed the client first.
func TestConcurrentLessons(t *testing.T) {
	srv, c, _ := start(t, nil, openai.Config{Model: "gpt-6-luna"}, openaitest.WithoutResponses(), openaitest.WithStrictCoreOnly())
	req := agent.Request{Messages: greeting(), Tools: agentTools(t), ToolChoice: "required", MaxTokens: 1024}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := c.Complete(t.Context(), req)
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if c.API() != openai.APIChat || srv.Misses() == 0 || srv.Misses() > 8 {
		t.Errorf("API %s after %d 404s", c.API(), srv.Misses())
	}
}

// A local server whose context cannot hold the prompt plus the default
// limit (vLLM with a short --max-model-len) gets a limit that fits, and
// the client remembers its context for the calls after.
func TestShortContext(t *testing.T) {
	srv, c, _ := start(t, nil, openai.Config{Model: "Qwen/Qwen2.5-14B-Instruct"}, openaitest.WithContextLength(8192))
	req := agent.Request{Messages: conversation(), MaxTokens: agent.DefaultMaxTokens}
	if _, err := c.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[1].MaxTokens >= 8192 || reqs[1].MaxTokens < 8000 {
		t.Fatalf("%d requests, the second for %d tokens: want one refusal, then what the context leaves", len(reqs), reqs[len(reqs)-1].MaxTokens)
	}
	if _, err := c.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if n := srv.Calls(); n != 3 {
		t.Errorf("%d calls after a second Complete, want 3: the context is remembered", n)
	}

	// A prompt the context cannot hold at all is told as such.
	long := []agent.Message{{Role: agent.RoleUser, Content: strings.Repeat("tidy ", 8000)}}
	_, err := c.Complete(t.Context(), agent.Request{Messages: long, MaxTokens: 1024})
	if msg := agent.ErrorMessageOf(err); !strings.Contains(msg, "do not fit the model's context (maximum context length is 8192 tokens)") || !strings.Contains(msg, "/reset") {
		t.Errorf("err = %v", err)
	}
}

// A deployment the server serves tools for only on the Responses API,
// under a name of its own, gets the Responses API (auto); a server
// without /responses is not asked again.
func TestServerWantsResponses(t *testing.T) {
	script := func(req openaitest.Request) openaitest.Reply {
		if req.API == openaitest.APIChat && len(req.Tools) > 0 {
			return openaitest.BadRequest("Function tools with reasoning_effort are not supported for prod-gpt6 in /v1/chat/completions. Please use /v1/responses instead.", "tools", "")
		}
		return openaitest.Call("get_overview", `{}`)
	}
	req := agent.Request{Messages: greeting(), MaxTokens: 1024, ToolChoice: "required",
		Tools: []agent.Tool{{Name: "get_overview", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}}
	srv, c, _ := start(t, script, openai.Config{Model: "prod-gpt6", ReasoningModel: true}, openaitest.WithReasoningModels("prod-gpt6"))
	for range 2 {
		if _, err := c.Complete(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	if reqs := srv.Requests(); len(reqs) != 3 || reqs[0].API != openaitest.APIChat || reqs[1].API != openaitest.APIResponses || c.API() != openai.APIResponses {
		t.Errorf("%d requests; API %s: want one refused chat completion, then responses", len(reqs), c.API())
	}

	// Without /responses: the refusal stands, and no loop.
	srv, c, _ = start(t, script, openai.Config{Model: "prod-gpt6", ReasoningModel: true}, openaitest.WithReasoningModels("prod-gpt6"), openaitest.WithoutResponses())
	if _, err := c.Complete(t.Context(), req); err == nil || srv.Calls() != 2 || srv.Misses() != 1 {
		t.Errorf("err %v after %d calls and %d 404s", err, srv.Calls(), srv.Misses())
	}
}
