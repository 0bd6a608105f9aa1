package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A person's own confirmation policy (Input.Confirm) wins over the
// engine's, also after a restart (it is kept in the transcript).
func TestInputConfirmOverridesTheEngine(t *testing.T) {
	move := `{"moves":[{"task_id":"t2","project_name":"Birthday"}]}`
	t.Run("writes under an engine that never asks", func(t *testing.T) {
		s := &script{replies: []Response{tool(ActMoveTasks, move)}}
		tr := startConfirming(t, New(s, newTalkTasks(), Config{Confirm: ConfirmNever}), Input{Instruction: "x", Confirm: ConfirmWrites})
		if tr.Confirm != ConfirmWrites {
			t.Errorf("saved transcript's policy %q, want writes", tr.Confirm)
		}
	})
	t.Run("never under an engine that asks for writes", func(t *testing.T) {
		s := &script{replies: []Response{tool(ActMoveTasks, move), tool(ActFinalAnswer, `{"answer":"Moved."}`)}}
		out := New(s, newTalkTasks(), Config{Confirm: ConfirmWrites}).Start(t.Context(), Input{Instruction: talkRequest, Confirm: ConfirmNever}, Hooks{})
		if out.Status != StatusDone {
			t.Fatalf("status %s (%s), want done without asking", out.Status, out.Question)
		}
	})
	t.Run("empty: the engine's", func(t *testing.T) {
		s := &script{replies: []Response{tool(ActMoveTasks, move)}}
		out := New(s, newTalkTasks(), Config{Confirm: ConfirmWrites}).Start(t.Context(), Input{Instruction: "x"}, Hooks{})
		if out.Status != StatusConfirming {
			t.Fatalf("status %s, want confirming", out.Status)
		}
	})
}

// startConfirming starts in on e, wants it to stop for a confirmation,
// and returns its transcript as saved and read back (JSON), as a restart
// finds it.
func startConfirming(t *testing.T, e *Engine, in Input) Transcript {
	t.Helper()
	out := e.Start(t.Context(), in, Hooks{})
	if out.Status != StatusConfirming {
		t.Fatalf("status %s, want confirming", out.Status)
	}
	raw, err := json.Marshal(out.Transcript)
	if err != nil {
		t.Fatal(err)
	}
	var tr Transcript
	if err := json.Unmarshal(raw, &tr); err != nil {
		t.Fatal(err)
	}
	return tr
}

// Input.Language puts one system message after the date; without it the
// prompt is as before.
func TestInputLanguageIsInThePrompt(t *testing.T) {
	s := &script{replies: []Response{tool(ActFinalAnswer, `{"answer":"Klaar."}`)}}
	New(s, newTalkTasks(), Config{}).Start(t.Context(), Input{Instruction: "x", Language: "Dutch"}, Hooks{})
	msgs := s.reqs[0].Messages
	if len(msgs) < 3 || msgs[2].Role != RoleSystem || !strings.Contains(msgs[2].Content, "Always answer in Dutch") {
		t.Errorf("third message %+v, want the language", msgs[2])
	}
	s = &script{replies: []Response{tool(ActFinalAnswer, `{"answer":"Done."}`)}}
	New(s, newTalkTasks(), Config{}).Start(t.Context(), Input{Instruction: "x"}, Hooks{})
	for _, m := range s.reqs[0].Messages {
		if strings.Contains(m.Content, "Always answer in") {
			t.Errorf("a language message without a language: %q", m.Content)
		}
	}
}

// Input.TimeZone dates the prompt in the person's zone, not the to-do
// service's.
func TestInputTimeZoneDatesThePrompt(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 11, 25, 23, 30, 0, 0, time.UTC) }
	for _, tt := range []struct{ zone, want string }{{"Asia/Tokyo", "26"}, {"", "25"}} {
		s := &script{replies: []Response{tool(ActFinalAnswer, `{"answer":"ok"}`)}}
		New(s, newTalkTasks(), Config{Now: now}).Start(t.Context(), Input{Instruction: "x", TimeZone: tt.zone}, Hooks{})
		if got := s.reqs[0].Messages[1].Content; !strings.Contains(got, ", "+tt.want+" November") {
			t.Errorf("zone %q: %q, want the %s", tt.zone, got, tt.want)
		}
	}
}

// Input.Model goes on every Request of the run, also after a restart
// (it is kept in the transcript); empty, requests name no model.
func TestInputModelOnEveryRequestAcrossResume(t *testing.T) {
	move := `{"moves":[{"task_id":"t2","project_name":"Birthday"}]}`
	s := &script{replies: []Response{tool(ActMoveTasks, move)}}
	tr := startConfirming(t, New(s, newTalkTasks(), Config{Confirm: ConfirmWrites}), Input{Instruction: "x", Model: "gpt-best"})
	s2 := &script{replies: []Response{tool(ActFinalAnswer, `{"answer":"Moved."}`)}}
	if out := New(s2, newTalkTasks(), Config{Confirm: ConfirmWrites}).Resume(t.Context(), &tr, "yes", Hooks{}); out.Status != StatusDone {
		t.Fatalf("resumed status %s, want done", out.Status)
	}
	for i, r := range append(s.reqs, s2.reqs...) {
		if r.Model != "gpt-best" {
			t.Errorf("request %d model %q, want gpt-best", i, r.Model)
		}
	}
	if len(s2.reqs) == 0 {
		t.Error("the resumed run asked no model")
	}
	s = &script{replies: []Response{tool(ActFinalAnswer, `{"answer":"Done."}`)}}
	New(s, newTalkTasks(), Config{}).Start(t.Context(), Input{Instruction: "x"}, Hooks{})
	if s.reqs[0].Model != "" {
		t.Errorf("model %q without Input.Model, want none", s.reqs[0].Model)
	}
}
