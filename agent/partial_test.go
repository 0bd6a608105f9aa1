package agent

import (
	"context"
	"strings"
	"testing"
)

// A batch that Todoist applies in part (its second request fails): what
// was applied is journaled, reported to the model and in "Done so far",
// and can be undone, also when a cancel or a shutdown comes at the same
// time (issue 20 item 7).
func TestEnginePartialBatchIsJournaled(t *testing.T) {
	move := tools2(
		ToolCall{ID: "mv", Name: ActMoveTasks, Arguments: `{"moves":[{"task_id":"t1","project_name":"Talks"},{"task_id":"t2","project_name":"Talks"},{"task_id":"t3","project_name":"Talks"}]}`},
		ToolCall{ID: "fa", Name: ActFinalAnswer, Arguments: `{"answer":"Filed all three."}`})
	wantJournal := `created project "Talks"; moved "Finish slides for PyData talk" to Talks`
	journal := func(tr *Transcript) string {
		var out []string
		for _, a := range tr.Journal {
			out = append(out, a.Summary)
		}
		return strings.Join(out, "; ")
	}
	undo := func(t *testing.T, m *memTasks, tr *Transcript) {
		t.Helper()
		if _, err := New(&script{}, m, Config{}).Undo(t.Context(), tr.Journal); err != nil {
			t.Fatal(err)
		}
		if got := m.where(); got != "Finish slides for PyData talk@Inbox, Buy birthday cake@Inbox, Fix links on personal website@Inbox" || len(m.projects) != 1 {
			t.Errorf("after undo: %s, %d projects", got, len(m.projects))
		}
	}

	t.Run("the run goes on", func(t *testing.T) {
		m := newTalkTasks()
		m.cutAt, m.cutErr = 2, &Error{Code: ErrServer, Message: "Todoist is not answering"}
		s := &script{replies: []Response{move, tool(ActFinalAnswer, `{"answer":"Filed one; Todoist failed on the others."}`)}}
		out := New(s, m, Config{}).Start(t.Context(), Input{Instruction: talkRequest}, Hooks{})
		if out.Status != StatusDone || out.Answer != "Filed one; Todoist failed on the others." {
			t.Fatalf("outcome %s %q", out.Status, out.Answer)
		}
		if got := journal(out.Transcript); got != wantJournal {
			t.Errorf("journal = %s, want %s", got, wantJournal)
		}
		obs := lastObs(s.reqs[1], "mv")
		for _, want := range []string{`✓ Created project "Talks": id proj1`, `✓ Moved t1 "Finish slides for PyData talk" to Talks`, "not confirmed: t2, t3", "Todoist is not answering"} {
			if !strings.Contains(obs, want) {
				t.Errorf("observation lacks %q:\n%s", want, obs)
			}
		}
		if got := lastObs(s.reqs[1], "fa"); !strings.Contains(got, "Not accepted") {
			t.Errorf("the first final_answer: %q, want it refused", got)
		}
		checkConversation(t, ProtocolTools, s.reqs[1])
		undo(t, m, out.Transcript)
	})

	t.Run("a fatal error ends the run", func(t *testing.T) {
		m := newTalkTasks()
		m.cutAt, m.cutErr = 2, &Error{Code: ErrUnauthorized, Message: "Todoist refused the token"}
		s := &script{replies: []Response{move}}
		out := New(s, m, Config{}).Start(t.Context(), Input{Instruction: talkRequest}, Hooks{})
		if out.Status != StatusFailed || !strings.Contains(out.Answer, "Done so far:\n• created project \"Talks\"\n• moved") {
			t.Fatalf("outcome %s %q", out.Status, out.Answer)
		}
		undo(t, m, out.Transcript)
	})

	t.Run("a cancel at the same time", func(t *testing.T) {
		m := newTalkTasks()
		m.cutAt, m.cutErr = 2, &Error{Code: ErrServer, Message: "Todoist is not answering"}
		ctx, cancel := context.WithCancel(t.Context())
		m.beforeApply = func(context.Context) { cancel() }
		s := &script{replies: []Response{move, tool(ActFinalAnswer, `{"answer":"Filed all three."}`)}}
		e := New(s, m, Config{})
		out := e.Start(ctx, Input{Instruction: talkRequest}, Hooks{})
		if out.Status != StatusInterrupted {
			t.Fatalf("outcome %s %q", out.Status, out.Answer)
		}
		tr := out.Transcript
		if got := journal(tr); got != wantJournal {
			t.Errorf("journal = %s, want %s", got, wantJournal)
		}
		if !strings.Contains(tr.DoneList(), `created project "Talks"`) {
			t.Errorf("done list: %s", tr.DoneList())
		}
		if tr.Pending == nil || len(tr.Pending.Writes) != 2 {
			t.Fatalf("pending: %+v, want the two writes not applied", tr.Pending)
		}
		for _, w := range tr.Pending.Writes {
			if w.ProjectID != "proj1" {
				t.Errorf("pending write %+v: want the new project's real id", w)
			}
		}
		t.Run("cancelled: undo", func(t *testing.T) {
			undo(t, newTalkTasksLike(m), tr)
		})
		// A shutdown: the run resumes, sends the rest once and finishes.
		tr = reload(t, tr)
		m.cutErr, m.beforeApply = nil, nil
		out = e.Resume(t.Context(), tr, "", Hooks{})
		if out.Status != StatusDone || out.Answer != "Filed all three." {
			t.Fatalf("resumed: %s %q", out.Status, out.Answer)
		}
		if got := m.where(); got != "Finish slides for PyData talk@Talks, Buy birthday cake@Talks, Fix links on personal website@Talks" || len(m.projects) != 2 {
			t.Errorf("state: %s, %d projects", got, len(m.projects))
		}
		for uuid, n := range m.applied {
			if n != 1 {
				t.Errorf("write %s applied %d times", uuid, n)
			}
		}
		if got := len(out.Transcript.Journal); got != 4 {
			t.Errorf("journal has %d entries, want 4", got)
		}
		// Every call of the reply succeeded in the end: its answer stands.
		if len(s.reqs) != 1 {
			t.Errorf("model calls = %d, want 1", len(s.reqs))
		}
		obs := lastObs(Request{Messages: out.Transcript.Messages}, "mv")
		if !strings.Contains(obs, `✓ Moved t1`) || !strings.Contains(obs, `✓ Moved t3`) || !strings.Contains(obs, `✓ Created project "Talks"`) {
			t.Errorf("observation after the resume:\n%s", obs)
		}
		checkConversation(t, ProtocolTools, Request{Messages: out.Transcript.Messages})
		undo(t, m, out.Transcript)
	})
}

// newTalkTasksLike copies m's state, for an undo that leaves m as it is.
func newTalkTasksLike(m *memTasks) *memTasks {
	c := newMemTasks()
	m.mu.Lock()
	defer m.mu.Unlock()
	c.projects = append([]Project(nil), m.projects...)
	for id, t := range m.tasks {
		c.tasks[id] = t
	}
	c.seq = m.seq
	return c
}
