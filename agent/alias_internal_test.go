package agent

import (
	"encoding/json"
	"testing"
)

// TestExpandOnlyIDArguments: aliases are expanded in id arguments only
// (any key ending in _id or _ids, at any depth), never in text the user
// wrote; arguments with no alias are kept byte for byte; an alias that is
// also a (fake's short) id the run knows stays that id.
func TestExpandOnlyIDArguments(t *testing.T) {
	const task, proj = "6Jf8VQXxpwv56VQ7", "6Jf8VQXxpwv56VQ8"
	k := &known{Tasks: map[string]Task{task: {ID: task}, "t2": {ID: "t2"}}, Projects: map[string]Project{proj: {ID: proj}}}
	if got := k.shorten("- " + task + ` "t1" in ` + proj + " and t2"); got != `- t1 "t1" in p1 and t2` {
		t.Fatalf("shortened: %s", got)
	}
	k.Aliases["t2"] = "6Jf8VQXxpwv56VQ9" // as if given before t2 was read
	args := json.RawMessage(`{"moves":[{"task_id":"t1","project_id":"p1","content":"t1"}],"task_ids":["t1","t2","t7"]}`)
	var got map[string]any
	if err := json.Unmarshal(k.expand(args), &got); err != nil {
		t.Fatal(err)
	}
	move := got["moves"].([]any)[0].(map[string]any)
	ids := got["task_ids"].([]any)
	if move["task_id"] != task || move["project_id"] != proj || move["content"] != "t1" || ids[0] != task || ids[1] != "t2" || ids[2] != "t7" {
		t.Errorf("expanded: %v", got)
	}
	plain := json.RawMessage(`{"task_ids": ["x"]}`)
	if got := k.expand(plain); string(got) != string(plain) {
		t.Errorf("unchanged arguments rewritten: %s", got)
	}
}
