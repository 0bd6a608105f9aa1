package agent

import (
	"context"
	"sync"
	"testing"
	"time"
)

// tickClock advances by one second on every reading, so each span's
// length is the number of readings inside it.
type tickClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *tickClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func (c *tickClock) skip(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestSpansTimeModelCallsTodoistRequestsAndWaits(t *testing.T) {
	m := newTalkTasks()
	s := &script{replies: []Response{
		tool(ActGetProjects, `{}`),
		tool(ActAskUser, `{"question":"Which project?","options":["Work","Home"]}`),
		tool(ActMoveTasks, `{"moves":[{"task_id":"t2","project_name":"Home"}]}`),
		tool(ActFinalAnswer, `{"answer":"Moved."}`),
	}}
	clock := &tickClock{t: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)}
	e := New(s, m, Config{Now: clock.now})
	out := e.Start(t.Context(), Input{Instruction: "file the cake"}, Hooks{})
	if out.Status != StatusAsking {
		t.Fatalf("status %s", out.Status)
	}
	tr := reload(t, out.Transcript)
	clock.skip(time.Hour) // the user takes an hour to answer
	out = e.Resume(t.Context(), tr, "Home", Hooks{})
	if out.Status != StatusDone {
		t.Fatalf("status %s %q", out.Status, out.Answer)
	}
	type row struct {
		step int
		kind SpanKind
		op   string
	}
	var got []row
	var waited time.Duration
	models := 0
	for _, sp := range out.Transcript.Spans {
		got = append(got, row{sp.Step, sp.Kind, sp.Op})
		if sp.Dur <= 0 {
			t.Errorf("span %+v has no length", sp)
		}
		switch sp.Kind {
		case SpanWait:
			waited += sp.Dur
		case SpanModel:
			models++
			if sp.Usage == nil || sp.Usage.PromptTokens != 100 || sp.Usage.CompletionTokens != 10 {
				t.Errorf("model span %+v: usage %+v, want 100 prompt and 10 completion tokens", sp, sp.Usage)
			}
		}
	}
	want := []row{
		{1, SpanModel, "complete"}, {1, SpanTasks, "projects"},
		{2, SpanModel, "complete"}, {2, SpanWait, "answer"},
		{3, SpanModel, "complete"},
	}
	if len(got) < len(want) {
		t.Fatalf("spans %+v, want at least %+v", got, want)
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("span %d = %+v, want %+v (all: %+v)", i, got[i], w, got)
		}
	}
	var applied bool
	for _, r := range got {
		applied = applied || (r.kind == SpanTasks && r.op == "apply" && r.step == 3)
	}
	if !applied {
		t.Errorf("no apply span in step 3: %+v", got)
	}
	if models != 4 {
		t.Errorf("%d model spans, want 4", models)
	}
	if waited < time.Hour || waited > time.Hour+10*time.Second {
		t.Errorf("waited %s, want about the hour the user took", waited)
	}
}

func TestTimedTasksKeepsTimeZoner(t *testing.T) {
	if _, ok := newTimedTasks(newMemTasks()).(TimeZoner); ok {
		t.Error("a Tasks without a time zone gained one")
	}
	if _, ok := newTimedTasks(zoned{newMemTasks()}).(TimeZoner); !ok {
		t.Error("the time zone of the wrapped Tasks was lost")
	}
}

type zoned struct{ *memTasks }

func (zoned) TimeZone(context.Context) (*time.Location, error) { return time.UTC, nil }
