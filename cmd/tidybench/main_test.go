package main

import (
	"testing"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
)

// TestFastRun runs both systems without latency on a small inbox: the
// benchmark must keep working (its figures are printed, not asserted).
func TestFastRun(t *testing.T) {
	st := settings{groups: 5, protocol: agent.ProtocolTools}
	var calls [2]int
	for i, sys := range []string{"tidybot", "baseline"} {
		r, err := measure(t.Context(), sys, 20, st)
		if err != nil {
			t.Fatal(err)
		}
		if r.InboxLeft != 0 {
			t.Errorf("%s left %d tasks in the inbox", sys, r.InboxLeft)
		}
		calls[i] = r.ModelCalls
	}
	if calls[0] >= calls[1] {
		t.Errorf("model calls: tidybot %d, baseline %d", calls[0], calls[1])
	}
}

// TestBothTransports runs tidybot with gpt-6-luna on Chat Completions and
// on the Responses API: both tidy the inbox, and only the Responses run
// reasons (at low effort) and reports it.
func TestBothTransports(t *testing.T) {
	st := settings{groups: 5, protocol: agent.ProtocolTools}
	for _, api := range []string{openai.APIChat, openai.APIResponses} {
		rs, err := measureAPI(t.Context(), api, 20, st)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.InboxLeft != 0 || r.ModelCalls == 0 || r.PromptTokens == 0 {
				t.Errorf("%s: %+v", api, r)
			}
			if reasons := r.ReasoningTokens > 0; reasons != (api == openai.APIResponses) {
				t.Errorf("%s: %d reasoning tokens", api, r.ReasoningTokens)
			}
		}
		// The second run reads the stable prefix (system prompt and
		// tools) from the server's prompt cache, and Todoist
		// incrementally: one /sync read and one write.
		if second := rs[1]; second.CachedTokens < 1024 || second.TodoistRequests != 2 {
			t.Errorf("%s, second run: %d cached tokens (want ≥ 1024), %d Todoist requests (want 2)", api, second.CachedTokens, second.TodoistRequests)
		}
	}
}
