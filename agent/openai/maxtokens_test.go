package openai_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
)

// TestDefaultMaxTokensHoldsTheLargestBatch measures the largest write the
// action schemas allow in one call (100 items, and move_tasks' 10 groups
// of 100, every bounded string at its maxLength, written out in strict
// form with nulls) and checks that
// agent.DefaultMaxTokens holds it with a thought, plus the reasoning a
// model does at high effort before it answers.
func TestDefaultMaxTokensHoldsTheLargestBatch(t *testing.T) {
	words := func(n int) string { // English-like text of n characters
		s := strings.Repeat("Call the plumber about the kitchen sink leak, ", n/40+1)
		return s[:n]
	}
	id := func(i int) string { return fmt.Sprintf("6X7rM8997g3RQmvh%02d", i%100) }
	var adds, moves, updates []map[string]any
	for i := range 100 {
		adds = append(adds, map[string]any{"content": words(500), "description": nil, "project_id": id(i), "section_id": nil,
			"due_string": words(150), "priority": "p1", "labels": []string{"errands", "home"}})
		moves = append(moves, map[string]any{"task_id": id(i), "project_id": nil, "project_name": words(120), "section_id": nil})
		updates = append(updates, map[string]any{"task_id": id(i), "content": words(500), "description": nil, "due_string": words(150),
			"priority": "p2", "labels": []string{"errands"}})
	}
	// move_tasks may carry groups beside its moves: 10 destinations of
	// 100 tasks each.
	var groups []map[string]any
	for g := range 10 {
		var ids []string
		for i := range 100 {
			ids = append(ids, id(g*100+i))
		}
		groups = append(groups, map[string]any{"task_ids": ids, "project_id": nil, "project_name": words(120), "section_id": nil})
	}
	// and a filing plan of the longest listing (1,000 tasks and their
	// spaces) with nine destinations.
	plan := strings.TrimSpace(strings.Repeat("1234567890 ", 100))
	to := make([]string, 9)
	for i := range to {
		to[i] = words(120)
	}
	largest := 0
	for name, args := range map[string]any{"add_tasks": map[string]any{"tasks": adds}, "move_tasks": map[string]any{"moves": moves, "groups": groups, "plan": plan, "to": to},
		"update_tasks": map[string]any{"updates": updates}} {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		n := openai.CountTokens(name) + openai.CountTokens(string(b))
		t.Logf("%s with 100 items at their longest: %d tokens", name, n)
		largest = max(largest, n)
	}
	const thought, reasoning = 200, 1024 // a thought; reasoning at high effort
	if need := largest + thought + reasoning; agent.DefaultMaxTokens < need {
		t.Errorf("DefaultMaxTokens = %d, want at least %d for the largest batch", agent.DefaultMaxTokens, need)
	}
}
