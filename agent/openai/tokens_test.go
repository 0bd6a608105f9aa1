package openai_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
)

func TestCountTokens(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"", 0},
		{"hello world", 2},
		{"tiktoken is great!", 6},
	}
	for _, tt := range tests {
		if got := openai.CountTokens(tt.text); got != tt.want {
			t.Errorf("CountTokens(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}

func TestEstimateUsage(t *testing.T) {
	base := agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hello world"}}}
	// 3 (reply) + 3 (message) + 1 (role) + 2 (content).
	if got := openai.EstimatePromptTokens(base); got != 9 {
		t.Errorf("EstimatePromptTokens = %d, want 9", got)
	}
	more := base
	more.Tools = []agent.Tool{{Name: "get_projects", Description: "List every project.", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}
	if openai.EstimatePromptTokens(more) <= openai.EstimatePromptTokens(base) {
		t.Error("tools add no tokens")
	}
	resp := agent.Response{Content: "hello world", ToolCalls: []agent.ToolCall{{Name: "final_answer", Arguments: `{"answer":"ok"}`}}}
	u := openai.EstimateUsage(base, resp)
	if !u.Estimated || u.Calls != 1 || u.PromptTokens != 9 || u.CompletionTokens <= 2 {
		t.Errorf("EstimateUsage = %+v", u)
	}
}

// TestCountTokensRemembers: every step of every run counts the same
// system prompt and tool list; a text counted before is not tokenized
// again (tokenizing allocates), and the count is the same.
func TestCountTokensRemembers(t *testing.T) {
	long := strings.Repeat("Move each inbox task to the project it belongs to. ", 40)
	want := openai.CountTokens(long)
	if want < 100 {
		t.Fatalf("CountTokens(long) = %d", want)
	}
	var got int
	if allocs := testing.AllocsPerRun(20, func() { got = openai.CountTokens(long) }); allocs > 0 {
		t.Errorf("counting a text again allocates %v times: it is tokenized again", allocs)
	}
	if got != want {
		t.Errorf("second count = %d, first %d", got, want)
	}
	// Past the cap, counts stay right.
	for i := range 5000 {
		text := fmt.Sprintf("%s %d", long[:200], i)
		if n := openai.CountTokens(text); n < 40 {
			t.Fatalf("CountTokens(text %d) = %d", i, n)
		}
	}
	if n := openai.CountTokens(long); n != want {
		t.Errorf("after many texts, CountTokens(long) = %d, want %d", n, want)
	}
}

// The engine skips counting a request whose agent.PromptBound fits its
// budget, which holds only if no count exceeds the bound: cl100k_base is a
// byte-level BPE, whose every token stands for at least one byte, invalid
// UTF-8 included.
func TestEstimateWithinPromptBound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	texts := []string{"", "a", "\xff", strings.Repeat("\xff", 50), "\x80a\x80b", "é", "😀", "中文字", strings.Repeat(" ", 100), "c\x9b"}
	for range 500 {
		b := make([]byte, 1+r.IntN(200))
		for j := range b {
			b[j] = byte(r.IntN(256))
		}
		texts = append(texts, string(b))
	}
	schemas := agentTools(t)
	for _, text := range texts {
		if n := openai.CountTokens(text); n > len(text) {
			t.Errorf("CountTokens(%q) = %d, more than its %d bytes", text, n, len(text))
		}
		for _, req := range []agent.Request{
			{Messages: []agent.Message{{Role: agent.RoleUser, Content: text}}},
			{Messages: []agent.Message{{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{Name: text, Arguments: text}}}}},
			{Tools: []agent.Tool{{Name: text, Description: text, Parameters: json.RawMessage(text)}}, Format: &agent.ResponseFormat{Schema: json.RawMessage(text)}},
			{Messages: []agent.Message{{Role: agent.RoleSystem, Content: agent.SystemPrompt(agent.ProtocolTools) + text}}, Tools: schemas},
		} {
			if est, bound := openai.EstimatePromptTokens(req), agent.PromptBound(req); est > bound {
				t.Fatalf("EstimatePromptTokens = %d, above agent.PromptBound %d, with text %q", est, bound, text)
			}
		}
	}
}
