package main

import (
	"strings"
	"testing"
)

// TIDYBOT_MODELS end to end: in the terminal, a person who picks best
// has their next request made with best's model at the model server;
// before, the first tier's.
func TestChatModelTier(t *testing.T) {
	e := newEnv(t)
	e.cfg.Models = "fast:scripted-mini,best:scripted-large"
	out := e.chat(t, "what's due today?\n/settings\n/settings model best\nwhat's due today?\n", nil)
	mustContain(t, out, "• Model: fast (scripted-mini), the default", "✓ Model: best (scripted-large) from your next request.", "• Model: best (scripted-large)")
	var models []string
	for _, r := range e.model.Requests() {
		models = append(models, r.Model)
	}
	if len(models) < 2 || models[0] != "scripted-mini" || models[len(models)-1] != "scripted-large" {
		t.Fatalf("models asked %v, want scripted-mini first and scripted-large last", models)
	}
	seen := strings.Join(models, " ")
	if strings.Contains(seen, "scripted ") || strings.HasSuffix(seen, "scripted") {
		t.Errorf("a run asked OPENAI_MODEL although tiers are set: %v", models)
	}
}
