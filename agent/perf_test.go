package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A request that certainly needs the overview (/tidy-inbox) has it read
// before the first model call and shown in the first prompt as
// get_overview's observation; the model's first reply can file every
// task and answer (issue 15 items 1 and 2).
func TestEnginePrefetchesTheOverview(t *testing.T) {
	for _, p := range []Protocol{ProtocolTools, ProtocolJSON} {
		t.Run(string(p), func(t *testing.T) {
			m := newTalkTasks()
			var first Request
			s := &script{fn: func(req Request) Response {
				first = req
				if p == ProtocolJSON {
					return text(`{"thought":"file","action":{"type":"move_tasks","moves":[{"task_id":"t1","project_name":"Talks"}]}}`)
				}
				return tools2(
					ToolCall{Name: ActMoveTasks, Arguments: `{"moves":[{"task_id":"t1","project_name":"Talks"},{"task_id":"t2","project_name":"Home"},{"task_id":"t3","project_name":"Home"}]}`},
					ToolCall{Name: ActFinalAnswer, Arguments: `{"answer":"Filed 3 tasks."}`})
			}}
			out := New(s, m, Config{Protocol: p, MaxSteps: 1}).Start(t.Context(), Input{Instruction: "tidy", Overview: true}, Hooks{})
			if p == ProtocolTools && (out.Status != StatusDone || out.Answer != "Filed 3 tasks.") {
				t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
			}
			if len(s.reqs) != 1 && p == ProtocolTools {
				t.Errorf("%d model calls, want 1", len(s.reqs))
			}
			last := first.Messages[len(first.Messages)-1].Content
			if !strings.Contains(last, "Inbox tasks (3)") || !strings.Contains(last, "\nt2 Buy birthday cake\n") {
				t.Errorf("the first prompt ends with %q, want the overview's observation", last)
			}
			var asked bool
			for _, msg := range first.Messages {
				asked = asked || strings.Contains(msg.Content, ActGetOverview) || len(msg.ToolCalls) == 1 && msg.ToolCalls[0].Name == ActGetOverview
			}
			if !asked {
				t.Error("the observation is not answered to a get_overview call")
			}
		})
	}
}

// Without Overview, nothing is read before the model asks.
func TestEngineReadsNothingUnasked(t *testing.T) {
	m := newTalkTasks()
	s := &script{replies: []Response{tool(ActFinalAnswer, `{"answer":"hi"}`)}}
	out := New(s, m, Config{}).Start(t.Context(), Input{Instruction: "hello"}, Hooks{})
	if out.Status != StatusDone || m.requests != 0 {
		t.Errorf("outcome %s, %d Todoist requests, want 0", out.Status, m.requests)
	}
}

// A reply whose writes all succeed ends the run with its final answer, no
// further model call; a failed write sends the reply back to the model
// (issue 15 item 2).
func TestEngineAnswersWithTheWrites(t *testing.T) {
	for _, tc := range []struct {
		name  string
		task  string
		calls int
	}{
		{"writes succeed", "t1", 1},
		{"a write fails", "nope", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTalkTasks()
			s := &script{replies: []Response{
				tools2(ToolCall{Name: ActFinalAnswer, Arguments: `{"answer":"Moved."}`},
					ToolCall{Name: ActMoveTasks, Arguments: `{"moves":[{"task_id":"` + tc.task + `","project_id":"inbox1"}]}`}),
				tool(ActFinalAnswer, `{"answer":"Could not move it."}`),
			}}
			out := New(s, m, Config{}).Start(t.Context(), Input{Instruction: "move", Overview: true}, Hooks{})
			if out.Status != StatusDone || len(s.reqs) != tc.calls {
				t.Errorf("outcome %s %q after %d model calls, want %d", out.Status, out.Answer, len(s.reqs), tc.calls)
			}
		})
	}
}

// The system prompt and the tool list are byte-identical across calls,
// runs and days, so providers' prompt caches apply; the date comes after
// them (issue 15 item 4).
func TestStablePromptPrefix(t *testing.T) {
	prefix := func(req Request) string {
		tools, err := json.Marshal(req.Tools)
		if err != nil {
			t.Fatal(err)
		}
		return req.Messages[0].Content + "\x00" + string(tools)
	}
	var prefixes []string
	var dates []string
	for i, day := range []time.Time{time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC), time.Date(2026, 12, 25, 18, 0, 0, 0, time.UTC)} {
		s := &script{replies: []Response{tool(ActGetOverview, `{}`), tool(ActFinalAnswer, `{"answer":"ok"}`)}}
		out := New(s, newTalkTasks(), Config{Now: func() time.Time { return day }}).
			Start(t.Context(), Input{Instruction: []string{"tidy", "what's due?"}[i]}, Hooks{})
		if out.Status != StatusDone {
			t.Fatalf("outcome %s %q", out.Status, out.Answer)
		}
		for _, req := range s.reqs {
			prefixes = append(prefixes, prefix(req))
			dates = append(dates, req.Messages[1].Content)
		}
	}
	for i, p := range prefixes {
		if p != prefixes[0] {
			t.Errorf("request %d's system prompt and tools differ from the first's", i)
		}
	}
	if strings.Contains(prefixes[0], "2026") {
		t.Error("the stable prefix holds the date")
	}
	if dates[0] != "Today is Tuesday, 24 November 2026.\n" || dates[3] != "Today is Friday, 25 December 2026.\n" {
		t.Errorf("dates = %q", dates)
	}
}
