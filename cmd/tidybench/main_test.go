package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
)

// TestFastRun runs both systems without latency on a small inbox: the
// benchmark must keep working (its figures are printed, not asserted).
func TestFastRun(t *testing.T) {
	st := settings{groups: 5, protocol: agent.ProtocolTools, rates: defaultRates}
	var rs [2]result
	for i, sys := range []string{"tidybot", "baseline"} {
		r, err := measure(t.Context(), sys, 20, st)
		if err != nil {
			t.Fatal(err)
		}
		if r.InboxLeft != 0 {
			t.Errorf("%s left %d tasks in the inbox", sys, r.InboxLeft)
		}
		// Every call is charged at least its latency; the cache holds
		// part of the prompt, never more.
		if floor := time.Duration(r.ModelCalls) * st.rates.latency; r.ModelTime < floor || r.Wall < r.ModelTime {
			t.Errorf("%s: %d calls charged %v of model time, wall %v", sys, r.ModelCalls, r.ModelTime, r.Wall)
		}
		if r.CachedTokens > r.PromptTokens || r.Cost <= 0 {
			t.Errorf("%s: %d cached of %d prompt tokens, cost $%f", sys, r.CachedTokens, r.PromptTokens, r.Cost)
		}
		rs[i] = r
	}
	if rs[0].ModelCalls >= rs[1].ModelCalls || rs[0].Wall >= rs[1].Wall || rs[0].Cost >= rs[1].Cost {
		t.Errorf("tidybot %+v\nbaseline %+v", rs[0], rs[1])
	}
	// The baseline resends its system prompt and history: most of what
	// it sends is the previous call's prefix.
	if rs[1].CachedTokens*2 < rs[1].PromptTokens {
		t.Errorf("baseline: %d cached of %d prompt tokens", rs[1].CachedTokens, rs[1].PromptTokens)
	}
}

// TestCallTime charges a call as a real model spends time: latency, fresh
// prompt tokens at the prefill rate, cached ones at a tenth of it,
// completion tokens at the generation rate; and prices it.
func TestCallTime(t *testing.T) {
	r := rates{latency: 400 * time.Millisecond, prefill: 5000, generation: 80, pricePrompt: 1, priceCached: 0.1, priceCompletion: 10}
	u := agent.Usage{PromptTokens: 15000, CachedTokens: 10000, CompletionTokens: 160}
	// 0.4 s + 5,000/5,000 s + 0.1·10,000/5,000 s + 160/80 s.
	if got, want := r.callTime(u), 3600*time.Millisecond; got != want {
		t.Errorf("call time %v, want %v", got, want)
	}
	// (5,000·1 + 10,000·0.1 + 160·10) / 10⁶ dollars.
	if got, want := r.cost(u), 0.0076; math.Abs(got-want) > 1e-12 {
		t.Errorf("cost %v, want %v", got, want)
	}
}

// TestCachedPrefix counts as cached the tools and leading messages a call
// shares with the previous call of the run, and nothing once the tools
// change.
func TestCachedPrefix(t *testing.T) {
	sys := agent.Message{Role: agent.RoleSystem, Content: strings.Repeat("You tidy inboxes. ", 200)}
	user := agent.Message{Role: agent.RoleUser, Content: "Tidy my inbox."}
	tools := []agent.Tool{{Name: "move_tasks", Parameters: json.RawMessage(`{"type":"object"}`)}}
	first := agent.Request{Messages: []agent.Message{sys, user}, Tools: tools}
	second := agent.Request{Messages: []agent.Message{sys, user, {Role: agent.RoleAssistant, Content: strings.Repeat("moved ", 100)}}, Tools: tools}
	shared := sharedPrefixTokens(first, second)
	if want := openai.EstimatePromptTokens(first); shared != want {
		t.Errorf("shared prefix %d tokens, want the whole first request's %d", shared, want)
	}
	if all := openai.EstimatePromptTokens(second); shared >= all {
		t.Errorf("shared prefix %d tokens of %d", shared, all)
	}
	other := second
	other.Tools = nil
	if n := sharedPrefixTokens(first, other); n != 0 {
		t.Errorf("tools changed: %d tokens shared, want 0", n)
	}
}

// TestBothTransports runs tidybot with gpt-6-luna on Chat Completions and
// on the Responses API: both tidy the inbox, and only the Responses run
// reasons (at low effort) and reports it.
func TestBothTransports(t *testing.T) {
	st := settings{groups: 5, protocol: agent.ProtocolTools, rates: defaultRates}
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

// TestTokenTargets checks issue 28's targets through the real Todoist
// client against todoisttest and the simulated model on the fake model
// server (calls, requests and tokens counted there, tokens with the real
// tokenizer): at N = 1,000 at most 3 model calls, 12 Todoist requests
// (one read, ten write batches of 100, the projects), 60,000 prompt and
// 10,000 completion tokens, and an empty inbox; at N = 50 one model call,
// two Todoist requests, at most 600 completion tokens, a sixtieth of
// the baseline's prompt tokens and a fortieth of its wall time.
func TestTokenTargets(t *testing.T) {
	st := settings{groups: 5, protocol: agent.ProtocolTools, rates: defaultRates}
	big, err := measure(t.Context(), "tidybot", 1000, st)
	if err != nil {
		t.Fatal(err)
	}
	if big.ModelCalls > 3 || big.TodoistRequests > 12 || big.PromptTokens > 60_000 || big.CompletionTokens > 10_000 || big.InboxLeft != 0 {
		t.Errorf("N=1000: %d model calls (≤ 3), %d Todoist requests (≤ 12), %d prompt tokens (≤ 60,000), %d completion tokens (≤ 10,000), %d left in the inbox (0)",
			big.ModelCalls, big.TodoistRequests, big.PromptTokens, big.CompletionTokens, big.InboxLeft)
	}
	small, err := measure(t.Context(), "tidybot", 50, st)
	if err != nil {
		t.Fatal(err)
	}
	base, err := measure(t.Context(), "baseline", 50, st)
	if err != nil {
		t.Fatal(err)
	}
	if small.ModelCalls != 1 || small.TodoistRequests != 2 || small.CompletionTokens > 600 || small.InboxLeft != 0 {
		t.Errorf("N=50: %d model calls (1), %d Todoist requests (2), %d completion tokens (≤ 600), %d left in the inbox (0)",
			small.ModelCalls, small.TodoistRequests, small.CompletionTokens, small.InboxLeft)
	}
	if small.PromptTokens*60 > base.PromptTokens {
		t.Errorf("N=50: %d prompt tokens, more than a sixtieth of the baseline's %d", small.PromptTokens, base.PromptTokens)
	}
	// Wall time on the token-rate clock: the model's simulated time plus
	// Todoist's 150 ms a request (tidybench sleeps it; here it is added,
	// so that the figure does not depend on the machine's load).
	clockWall := func(r result) time.Duration {
		return r.ModelTime + time.Duration(r.TodoistRequests)*150*time.Millisecond
	}
	if a, b := clockWall(small), clockWall(base); a*40 > b {
		t.Errorf("N=50: wall time %v on the token-rate clock, more than a fortieth of the baseline's %v", a, b)
	}
}
