package agent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAnswerHeardOnlyOnceItsWritesRan: a tools reply's final_answer is
// heard (Hooks.Answer, the chat's preview) only when the reply is that
// one call; beside writes, gated or not, it is not heard while they have
// not run (issue 33: [final_answer "Deleted …", delete_tasks] streamed
// "Deleted" while the delete waited for the person's yes). The json
// protocol's reply is one action: its answer is heard as it grows.
func TestAnswerHeardOnlyOnceItsWritesRan(t *testing.T) {
	const claim = "Deleted the birthday cake task for you. "
	final := ToolCall{ID: "c0", Name: ActFinalAnswer, Arguments: `{"answer":"` + claim + `"}`}
	tests := []struct {
		name   string
		calls  []ToolCall
		status Status
		heard  []string
	}{
		{"before a gated delete", []ToolCall{final, {ID: "c1", Name: ActDeleteTasks, Arguments: `{"task_ids":["t2"]}`}}, StatusConfirming, nil},
		{"before an ungated add", []ToolCall{final, {ID: "c1", Name: ActAddTasks, Arguments: `{"tasks":[{"content":"Cake"}]}`}}, "", nil},
		{"alone", []ToolCall{final}, StatusDone, []string{claim}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTalkTasks()
			calls := 0
			model := modelFunc(func(_ context.Context, req Request) (Response, error) {
				calls++
				if calls > 1 { // after the first reply: an answer of its own, not heard here
					return Response{ToolCalls: []ToolCall{{ID: "c9", Name: ActFinalAnswer, Arguments: `{"answer":"Done."}`}}}, nil
				}
				if req.Stream != nil {
					for i, c := range tt.calls {
						// The arguments arrive in two pieces, as a stream
						// brings them.
						half := len(c.Arguments) / 2
						req.Stream(Delta{Call: i, Name: c.Name, Arguments: c.Arguments[:half]})
						req.Stream(Delta{Call: i, Arguments: c.Arguments[half:]})
					}
				}
				return Response{ToolCalls: tt.calls, Usage: Usage{PromptTokens: 100, CompletionTokens: 10}}, nil
			})
			var mu sync.Mutex
			var heard []string
			out := New(model, m, Config{}).Start(t.Context(), Input{Instruction: "delete the cake"}, Hooks{Answer: func(s string) {
				mu.Lock()
				heard = append(heard, s)
				mu.Unlock()
			}})
			if tt.status != "" && out.Status != tt.status {
				t.Fatalf("outcome %s %q, want %s", out.Status, out.Answer, tt.status)
			}
			if _, ok := m.tasks["t2"]; !ok {
				t.Fatal("deleted without a yes")
			}
			mu.Lock()
			defer mu.Unlock()
			var claims []string
			for _, h := range heard {
				if h == claim {
					claims = append(claims, h)
				}
			}
			if len(claims) != len(tt.heard) {
				t.Errorf("heard %q, want the claim heard %d times", heard, len(tt.heard))
			}
		})
	}
}

// TestSlowNoteOnlyWhileTheModelIsSilent: the "model is slow" note is
// for a model that has sent nothing yet. A reply that has begun to
// arrive silences it, even a tools reply whose calls are held until it
// is whole and so never heard as it grows (Hooks.Answer), until the
// call is made again (Delta.Reset).
func TestSlowNoteOnlyWhileTheModelIsSilent(t *testing.T) {
	const slowAfter = 10 * time.Millisecond
	isSlowNote := func(ev Event) bool {
		return ev.Kind == EventNote && strings.Contains(ev.Summary, "model is slow")
	}
	// awaitsNote runs a model call that streams with stream, then waits
	// for the slow note, failing with missing when none comes.
	awaitsNote := func(t *testing.T, missing string, stream func(Request)) {
		noted := make(chan struct{})
		var once sync.Once
		model := modelFunc(func(_ context.Context, req Request) (Response, error) {
			stream(req)
			select {
			case <-noted:
			case <-time.After(10 * time.Second):
				t.Error(missing)
			}
			return tool(ActFinalAnswer, `{"answer":"ok"}`), nil
		})
		New(model, newTalkTasks(), Config{SlowAfter: slowAfter}).Start(t.Context(), Input{Instruction: "hi"}, Hooks{
			Answer: func(string) {},
			Observe: func(ev Event) {
				if isSlowNote(ev) {
					once.Do(func() { close(noted) })
				}
			},
		})
	}
	t.Run("silent", func(t *testing.T) {
		awaitsNote(t, "no slow note while the model sent nothing", func(Request) {})
	})
	t.Run("replying, then made again", func(t *testing.T) {
		awaitsNote(t, "no slow note while the call made again sent nothing", func(req Request) {
			req.Stream(Delta{Call: 0, Name: ActGetProjects, Arguments: `{`})
			req.Stream(Delta{Reset: true}) // a retry after an error, silent so far
		})
	})
	t.Run("replying", func(t *testing.T) {
		replies := []ToolCall{{ID: "c1", Name: ActGetProjects, Arguments: `{}`}, {ID: "c2", Name: ActFinalAnswer, Arguments: `{"answer":"ok"}`}}
		n := 0
		model := modelFunc(func(_ context.Context, req Request) (Response, error) {
			c := replies[min(n, len(replies)-1)]
			n++
			req.Stream(Delta{Call: 0, Name: c.Name, Arguments: c.Arguments})
			time.Sleep(10 * slowAfter) // the rest of the reply takes long
			return Response{ToolCalls: []ToolCall{c}}, nil
		})
		var mu sync.Mutex
		var notes []string
		out := New(model, newTalkTasks(), Config{SlowAfter: slowAfter}).Start(t.Context(), Input{Instruction: "list my projects"}, Hooks{
			Answer: func(string) {},
			Observe: func(ev Event) {
				if isSlowNote(ev) {
					mu.Lock()
					notes = append(notes, ev.Summary)
					mu.Unlock()
				}
			},
		})
		if out.Status != StatusDone {
			t.Fatalf("outcome %s %q", out.Status, out.Answer)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(notes) > 0 {
			t.Errorf("slow notes %q while the reply was arriving", notes)
		}
	})
}
