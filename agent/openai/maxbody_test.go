package openai_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

// TestOversizedAnswerIsRefused: a server that answers with a body far
// past Config.MaxResponseBytes (an 8 MB final answer) fails the call
// with a clear error, once, without retrying and without holding the
// body (issue 34 defect 9: 80 MB took the heap to 1 GB and stayed in the
// transcript); streamed or not, on either transport; an answer under the
// limit goes through.
func TestOversizedAnswerIsRefused(t *testing.T) {
	huge := strings.Repeat("word ", 8<<20/5)
	for _, api := range []string{openai.APIChat, openai.APIResponses} {
		for _, stream := range []bool{false, true} {
			t.Run(api+map[bool]string{false: "", true: "/stream"}[stream], func(t *testing.T) {
				answer := huge
				srv, c, sl := start(t, openaitest.FromAgent(func(agent.Request) agent.Response {
					args, _ := json.Marshal(map[string]string{"answer": answer})
					return agent.Response{ToolCalls: []agent.ToolCall{{ID: "c1", Name: agent.ActFinalAnswer, Arguments: string(args)}}}
				}), openai.Config{API: api, MaxResponseBytes: 1 << 20})
				req := agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}, Tools: []agent.Tool{{Name: agent.ActFinalAnswer, Parameters: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}}}`)}}}
				if stream {
					req.Stream = func(agent.Delta) {}
				}
				_, err := c.Complete(t.Context(), req)
				if err == nil || !strings.Contains(agent.ErrorMessageOf(err), "larger than 1 MB") {
					t.Fatalf("error %v (%q), want the answer refused as too large", err, agent.ErrorMessageOf(err))
				}
				if n := len(srv.Requests()); n != 1 || len(sl.waits) != 0 {
					t.Errorf("%d requests, waits %v: an oversized answer is not retried", n, sl.waits)
				}
				answer = "short"
				resp, err := c.Complete(t.Context(), req)
				if err != nil || len(resp.ToolCalls) != 1 {
					t.Fatalf("a short answer: %+v, %v", resp, err)
				}
			})
		}
	}
}

// TestLongestStreamedAnswerFits: the default Config.MaxResponseBytes
// takes a streamed answer as long as a call allows (agent.
// DefaultMaxTokens), a token an event as the API streams it, on either
// transport: the cap is for runaway servers, not for the longest answer.
func TestLongestStreamedAnswerFits(t *testing.T) {
	answer := strings.Repeat("word", agent.DefaultMaxTokens-20) // a token each, the JSON around it the rest
	for _, api := range []string{openai.APIChat, openai.APIResponses} {
		t.Run(api, func(t *testing.T) {
			_, c, _ := start(t, openaitest.FromAgent(func(agent.Request) agent.Response {
				args, _ := json.Marshal(map[string]string{"answer": answer})
				return agent.Response{ToolCalls: []agent.ToolCall{{ID: "c1", Name: agent.ActFinalAnswer, Arguments: string(args)}}}
			}), openai.Config{API: api}, openaitest.WithTokenRate(1e9)) // an event a token, at no real rate
			req := agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}, Tools: []agent.Tool{{Name: agent.ActFinalAnswer, Parameters: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}}}`)}},
				Stream: func(agent.Delta) {}}
			resp, err := c.Complete(t.Context(), req)
			if err != nil || len(resp.ToolCalls) != 1 {
				t.Fatalf("the longest streamed answer: %v", err)
			}
		})
	}
}
