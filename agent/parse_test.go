package agent

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestParseEnvelope(t *testing.T) {
	tests := []struct {
		name     string
		reply    string
		wantName string
		wantArgs string
		wantErr  string
	}{
		{"plain", `{"thought":"look","action":{"type":"get_overview"}}`, "get_overview", `{}`, ""},
		{"apology and fence", "My apologies for the confusion. Here is the correct response:\n```json\n{\"thought\": \"read\", \"action\": {\"type\": \"get_inbox_tasks\"}}\n```\nLet me know!", "get_inbox_tasks", `{}`, ""},
		{"trailing commas", `{"thought":"x","action":{"type":"complete_tasks","task_ids":["a","b",],},}`, "complete_tasks", `{"task_ids":["a","b"]}`, ""},
		{"action as string with input", `{"thought":"x","action":"get_sections","action_input":{"project_id":"p1"}}`, "get_sections", `{"project_id":"p1"}`, ""},
		{"bare action", `{"type":"final_answer","answer":"done"}`, "final_answer", `{"answer":"done"}`, ""},
		{"camelCase keys", `{"thought":"x","action":{"type":"move_tasks","moves":[{"taskId":"t1","projectName":"Birthday"}]}}`, "move_tasks", `{"moves":[{"project_name":"Birthday","task_id":"t1"}]}`, ""},
		{"name is an argument", `{"action":"create_project","name":"Trip"}`, "create_project", `{"name":"Trip"}`, ""},
		{"invented action", `{"thought":"x","action":{"type":"Loop through each task in the inbox"}}`, "", "", "there is no action"},
		{"near action", `{"thought":"x","action":{"type":"move_task","moves":[]}}`, "", "", `did you mean "move_tasks"`},
		{"missing field", `{"thought":"x","action":{"type":"create_section","name":"Next"}}`, "", "", "missing property 'project_id'"},
		{"wrong field", `{"thought":"x","action":{"type":"complete_tasks","tasks":["a"]}}`, "", "", "additional properties 'tasks' not allowed"},
		{"no json", `I will now move the tasks.`, "", "", "no valid JSON"},
		{"empty", ``, "", "", "empty"},
		{"null optional", `{"thought":"x","action":{"type":"get_tasks","project_id":null,"filter":"today","label":null}}`, "get_tasks", `{"filter":"today","label":null,"project_id":null}`, ""},
		{"bad priority", `{"action":{"type":"add_tasks","tasks":[{"content":"x","priority":"high"}]}}`, "", "", "priority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c, err := parseEnvelope(tt.reply)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if c.Name != tt.wantName || string(c.Args) != tt.wantArgs {
				t.Errorf("got %s %s, want %s %s", c.Name, c.Args, tt.wantName, tt.wantArgs)
			}
		})
	}
}

func TestParseToolCall(t *testing.T) {
	c, err := parseToolCall(ToolCall{ID: "c1", Name: "move_tasks", Arguments: `{"moves":[{"task_id":"t1","project_name":"Home"},]}`})
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != "c1" || !strings.Contains(string(c.Args), `"project_name":"Home"`) {
		t.Errorf("got %+v", c)
	}
	if _, err := parseToolCall(ToolCall{Name: "get_overview", Arguments: ""}); err != nil {
		t.Errorf("empty arguments for a no-argument action: %v", err)
	}
	if _, err := parseToolCall(ToolCall{Name: "delete_tasks", Arguments: `{"task_ids":[]}`}); err == nil {
		t.Error("an empty task_ids list was accepted")
	}
}

func FuzzParseReply(f *testing.F) {
	for _, s := range []string{
		`{"thought":"x","action":{"type":"get_overview"}}`,
		"```json\n{\"action\":{\"type\":\"final_answer\",\"answer\":\"ok\"}}\n```",
		`{"action":{"type":"move_tasks","moves":[{"task_id":"a","project_name":"B",}]},}`,
		`prose { "a": [1, {"b": "}"}] } more {"type":"get_labels"}`,
		`{"action":"ask_user","args":{"question":"which?","options":["a","b"]}}`,
		`{{{{`, `"\"}`, `[]`, `null`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, c, err := parseEnvelope(s)
		if err != nil {
			var re *replyError
			if !asErr(err, &re) {
				t.Fatalf("error of type %T, want *replyError", err)
			}
			return
		}
		if _, ok := actionByName(c.Name); !ok {
			t.Fatalf("accepted unknown action %q", c.Name)
		}
		if err := validateArgs(c.Name, mustDecode(t, c.Args)); err != nil {
			t.Fatalf("accepted invalid arguments %s: %v", c.Args, err)
		}
	})
}

func asErr(err error, re **replyError) bool {
	r, ok := err.(*replyError)
	*re = r
	return ok
}

func mustDecode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestStripTrailingCommas(t *testing.T) {
	got := stripTrailingCommas(`{"a": "x,}", "b": [1, 2, ], }`)
	if want := `{"a": "x,}", "b": [1, 2 ] }`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./agent -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file; got:\n%s", name, got)
	}
}

func TestSchemasGolden(t *testing.T) {
	out := map[string]json.RawMessage{}
	for _, name := range ActionNames() {
		s, _ := ActionSchema(name, true)
		out[name] = s
	}
	out["$envelope"] = EnvelopeSchema()
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "schemas.golden.json", b)
}

func TestSystemPromptGolden(t *testing.T) {
	golden(t, "prompt_tools.golden.txt", []byte(SystemPrompt(ProtocolTools)))
	golden(t, "prompt_json.golden.txt", []byte(SystemPrompt(ProtocolJSON)))
}

// TestStrictSchemas checks OpenAI's strict rules on every generated
// schema: additionalProperties false and every property required, on
// every object.
func TestStrictSchemas(t *testing.T) {
	check := func(name string, raw json.RawMessage) {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		walkObjects(v, func(obj map[string]any) {
			props, _ := obj["properties"].(map[string]any)
			if obj["additionalProperties"] != false {
				t.Errorf("%s: an object without additionalProperties false", name)
			}
			req := map[string]bool{}
			rs, _ := obj["required"].([]any)
			for _, r := range rs {
				req[r.(string)] = true
			}
			for p := range props {
				if !req[p] {
					t.Errorf("%s: property %s not required", name, p)
				}
			}
		})
	}
	for _, name := range ActionNames() {
		s, _ := ActionSchema(name, true)
		check(name, s)
	}
	check("envelope", EnvelopeSchema())
}

func walkObjects(v any, fn func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		if x["type"] == "object" {
			fn(x)
		}
		for _, c := range x {
			walkObjects(c, fn)
		}
	case []any:
		for _, c := range x {
			walkObjects(c, fn)
		}
	}
}

// Every action is exactly one of reader, writer and controller, so the
// engine knows how to run it; only delete_tasks is destructive.
func TestEveryActionHasOneKind(t *testing.T) {
	for _, d := range actionList {
		a := d.New()
		_, isRead := a.(reader)
		_, isWrite := a.(writer)
		_, isControl := a.(controller)
		kinds := 0
		for _, k := range []bool{isRead, isWrite, isControl} {
			if k {
				kinds++
			}
		}
		if kinds != 1 {
			t.Errorf("%s is reader %v, writer %v, controller %v; want exactly one", d.Name, isRead, isWrite, isControl)
		}
		if _, ok := a.(ender); ok != (d.Name == ActFinalAnswer || d.Name == ActFailTask) {
			t.Errorf("%s ender = %v", d.Name, ok)
		}
		if _, ok := a.(destructive); ok != (d.Name == ActDeleteTasks) {
			t.Errorf("%s destructive = %v", d.Name, ok)
		}
		if got, ok := decode(call{Name: d.Name}); !ok || got == nil {
			t.Errorf("decode(%s) failed", d.Name)
		}
	}
}

// IsWrite, which the run inspector marks writes with, follows the
// actions' own kinds: a new write action needs no list elsewhere.
func TestIsWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{ActMoveTasks, true}, {ActCreateSection, true}, {ActDeleteTasks, true}, {ActAddComments, true},
		{ActGetTasks, false}, {ActAskUser, false}, {ActFinalAnswer, false}, {"no_such_action", false}, {"", false},
	} {
		if got := IsWrite(tc.name); got != tc.want {
			t.Errorf("IsWrite(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, d := range actionList {
		if _, w := d.New().(writer); IsWrite(d.Name) != w {
			t.Errorf("IsWrite(%q) = %v, but it is a writer: %v", d.Name, !w, w)
		}
	}
}
