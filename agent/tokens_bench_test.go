package agent_test

import (
	"context"
	"testing"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// BenchmarkPromptTokens reports the tokens (cl100k_base) of the system
// prompt and of a run's first model request, tools and schema included,
// per protocol: the fixed cost of every call.
//
//	go test ./agent -run '^$' -bench PromptTokens
func BenchmarkPromptTokens(b *testing.B) {
	for _, p := range []agent.Protocol{agent.ProtocolTools, agent.ProtocolJSON} {
		b.Run(string(p), func(b *testing.B) {
			todo := todoisttest.New(b)
			var first agent.Request
			model := modelFunc(func(_ context.Context, req agent.Request) (agent.Response, error) {
				first = req
				if p == agent.ProtocolJSON {
					return agent.Response{Content: `{"thought":"x","action":{"type":"final_answer","answer":"hi"}}`}, nil
				}
				return agent.Response{ToolCalls: []agent.ToolCall{{ID: "a", Name: agent.ActFinalAnswer, Arguments: `{"answer":"hi"}`}}}, nil
			})
			eng := agent.New(model, todoist.New(todo.Token, todo.URL, todo.DirectClient()), agent.Config{Protocol: p})
			var system, request int
			for b.Loop() {
				if out := eng.Start(b.Context(), agent.Input{Instruction: "what's due today?"}, agent.Hooks{}); out.Status != agent.StatusDone {
					b.Fatalf("outcome %s %q", out.Status, out.Answer)
				}
				system = openai.CountTokens(agent.SystemPrompt(p))
				request = openai.EstimatePromptTokens(first)
			}
			b.ReportMetric(float64(system), "system-tokens")
			b.ReportMetric(float64(request), "first-call-tokens")
		})
	}
}
