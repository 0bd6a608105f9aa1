package openai_test

import (
	"testing"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

// A request naming a model (Request.Model, a person's tier) reaches the
// server with that model, and what the client learns about one model (a
// reasoning deployment that refuses temperature and max_tokens) does not
// change what it sends for the other.
func TestRequestModelIsPerModel(t *testing.T) {
	srv, c, _ := start(t, nil, openai.Config{Model: "tier-fast", API: openai.APIChat}, openaitest.WithReasoningModels("tier-best"))
	req := agent.Request{Messages: greeting(), MaxTokens: 8000, Temperature: 0.2}
	best := req
	best.Model = "tier-best"
	for _, r := range []agent.Request{best, req, best, req} {
		if _, err := c.Complete(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	reqs := srv.Requests()
	var models []string
	for _, r := range reqs {
		models = append(models, r.Model+":"+r.MaxTokensField)
	}
	// tier-best: refused temperature, then max_tokens, then answered;
	// tier-fast keeps max_tokens and its temperature; the second round
	// makes one request each.
	want := []string{"tier-best:max_tokens", "tier-best:max_tokens", "tier-best:max_completion_tokens", "tier-fast:max_tokens", "tier-best:max_completion_tokens", "tier-fast:max_tokens"}
	if len(models) != len(want) {
		t.Fatalf("requests %v, want %v", models, want)
	}
	for i := range want {
		if models[i] != want[i] {
			t.Fatalf("requests %v, want %v", models, want)
		}
	}
	if reqs[3].Temperature == nil || reqs[5].Temperature == nil {
		t.Error("tier-fast lost its temperature after tier-best's was dropped")
	}
	if reqs[4].Temperature != nil {
		t.Error("tier-best was sent a temperature again")
	}
	bestClient := c.For("tier-best")
	if c.For("") != c || c.For("tier-fast") != c || c.For("tier-best") != bestClient {
		t.Error("For: want the client itself for its own model and one client per other model")
	}
}
