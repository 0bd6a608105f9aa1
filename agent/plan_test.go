package agent

import (
	"fmt"
	"strings"
	"testing"
)

// checkConversation fails t unless req is a valid conversation for its
// protocol: under tools, every tool call of an assistant message is
// answered exactly once before the next assistant message, and no tool
// result answers a call that was not made; under json, every assistant
// message is followed by one user message (its observation or a repair).
func checkConversation(t *testing.T, p Protocol, req Request) {
	t.Helper()
	if err := conversationProblem(p, req.Messages); err != "" {
		t.Fatal(err)
	}
}

func conversationProblem(p Protocol, msgs []Message) string {
	if p == ProtocolJSON {
		for i, m := range msgs {
			if m.Role == RoleTool {
				return fmt.Sprintf("message %d: a tool message under the json protocol", i)
			}
			if m.Role == RoleAssistant && (i+1 >= len(msgs) || msgs[i+1].Role != RoleUser) {
				return fmt.Sprintf("message %d: an assistant message not followed by its observation", i)
			}
		}
		return ""
	}
	open := map[string]int{}
	for i, m := range msgs {
		switch m.Role {
		case RoleAssistant:
			for id, n := range open {
				if n == 0 {
					return fmt.Sprintf("message %d: tool call %s was never answered", i, id)
				}
			}
			open = map[string]int{}
			for _, tc := range m.ToolCalls {
				if _, dup := open[tc.ID]; dup {
					return fmt.Sprintf("message %d: tool call id %s twice", i, tc.ID)
				}
				open[tc.ID] = 0
			}
		case RoleTool:
			n, ok := open[m.ToolCallID]
			if !ok {
				return fmt.Sprintf("message %d: a result for %s, which was not called", i, m.ToolCallID)
			}
			if n > 0 {
				return fmt.Sprintf("message %d: tool call %s answered twice", i, m.ToolCallID)
			}
			open[m.ToolCallID] = 1
		default:
			for id, n := range open {
				if n == 0 {
					return fmt.Sprintf("message %d (%s): tool call %s not answered before it", i, m.Role, id)
				}
			}
		}
	}
	for id, n := range open {
		if n == 0 {
			return fmt.Sprintf("the conversation ends with tool call %s unanswered", id)
		}
	}
	return ""
}

// A reply that deletes and announces the deletion in one go: the
// announcement is delivered only if the delete ran, and even then the
// model hears the user's answer first (issue 20 item 1).
func TestEngineRefusedWriteIsNeverAnnounced(t *testing.T) {
	tests := []struct {
		answer      string
		wantDeleted bool
		wantObs     string
	}{
		{"no", false, "The user said no"},
		{"yes, but only the first one", false, "They said: yes, but only the first one"},
		{"yes", true, `Deleted t1 "Finish slides for PyData talk"`},
	}
	for _, tt := range tests {
		t.Run(tt.answer, func(t *testing.T) {
			m := newTalkTasks()
			s := &script{replies: []Response{
				tools2(ToolCall{ID: "del", Name: ActDeleteTasks, Arguments: `{"task_ids":["t1","t2"]}`},
					ToolCall{ID: "fa", Name: ActFinalAnswer, Arguments: `{"answer":"Deleted both tasks."}`}),
				tool(ActFinalAnswer, `{"answer":"Second answer."}`),
			}}
			e := New(s, m, Config{})
			out := e.Start(t.Context(), Input{Instruction: "delete the slides and the cake"}, Hooks{})
			if out.Status != StatusConfirming {
				t.Fatalf("outcome %s %q", out.Status, out.Answer)
			}
			out = e.Resume(t.Context(), out.Transcript, tt.answer, Hooks{})
			if out.Status != StatusDone || out.Answer != "Second answer." {
				t.Fatalf("outcome %s %q; want the model asked again after the answer", out.Status, out.Answer)
			}
			if len(s.reqs) != 2 {
				t.Fatalf("model calls = %d, want 2", len(s.reqs))
			}
			_, kept := m.tasks["t1"]
			if kept == tt.wantDeleted {
				t.Errorf("t1 kept = %v after %q", kept, tt.answer)
			}
			req := s.reqs[1]
			checkConversation(t, ProtocolTools, req)
			if got := lastObs(req, "del"); !strings.Contains(got, tt.wantObs) {
				t.Errorf("observation of the delete = %q, want %q", got, tt.wantObs)
			}
			if got := lastObs(req, "fa"); !strings.Contains(got, "Not run") {
				t.Errorf("observation of the first final_answer = %q, want it not run", got)
			}
			checkConversation(t, ProtocolTools, Request{Messages: out.Transcript.Messages})
		})
	}
}

// Nothing of a reply runs past its question: the calls after ask_user
// are answered as not run and the model plans again with the answer;
// the calls before it run (issue 20 item 2).
func TestEngineNothingRunsPastAQuestion(t *testing.T) {
	for _, p := range []Protocol{ProtocolTools, ProtocolJSON} {
		t.Run(string(p), func(t *testing.T) {
			m := newTalkTasks()
			s := &script{replies: []Response{
				tools2(ToolCall{ID: "read", Name: ActGetInboxTasks, Arguments: `{}`},
					ToolCall{ID: "ask", Name: ActAskUser, Arguments: `{"question":"Move it?"}`},
					ToolCall{ID: "mv", Name: ActMoveTasks, Arguments: `{"moves":[{"task_id":"t2","project_name":"Birthday"}]}`},
					ToolCall{ID: "fa", Name: ActFinalAnswer, Arguments: `{"answer":"Moved it."}`}),
				tool(ActFinalAnswer, `{"answer":"Left it where it is."}`),
			}}
			if p == ProtocolJSON {
				// One action a reply: the question, then the answer.
				s.replies = []Response{
					text(`{"thought":"ask","action":{"type":"ask_user","question":"Move it?"}}`),
					text(`{"thought":"ok","action":{"type":"final_answer","answer":"Left it where it is."}}`),
				}
			}
			e := New(s, m, Config{Protocol: p})
			out := e.Start(t.Context(), Input{Instruction: "the cake"}, Hooks{})
			if out.Status != StatusAsking || out.Question != "Move it?" {
				t.Fatalf("outcome %s %q", out.Status, out.Answer)
			}
			if p == ProtocolTools && !strings.Contains(transcriptText(out.Transcript), "Inbox tasks (3)") {
				t.Error("the read before the question did not run")
			}
			out = e.Resume(t.Context(), out.Transcript, "No", Hooks{})
			if out.Status != StatusDone || out.Answer != "Left it where it is." {
				t.Fatalf("outcome %s %q", out.Status, out.Answer)
			}
			if got := m.where(); strings.Contains(got, "@Birthday") || len(m.projects) != 1 {
				t.Errorf("state: %s; the move after the question ran", got)
			}
			req := s.reqs[len(s.reqs)-1]
			checkConversation(t, p, req)
			if p == ProtocolTools {
				if got := lastObs(req, "ask"); got != "The user answered: No" {
					t.Errorf("ask_user observation = %q", got)
				}
				for _, id := range []string{"mv", "fa"} {
					if got := lastObs(req, id); !strings.Contains(got, "Not run") || !strings.Contains(got, "question") {
						t.Errorf("observation of %s = %q, want it not run because of the question", id, got)
					}
				}
			}
		})
	}
}

// A transcript saved at a question by the engine before the rule, with
// the calls after the question still queued, resumes under the rule.
func TestEngineResumesAnOldTranscriptWithQueuedCalls(t *testing.T) {
	m := newTalkTasks()
	s := &script{replies: []Response{tool(ActFinalAnswer, `{"answer":"Left it."}`)}}
	tr := &Transcript{V: TranscriptVersion, Protocol: ProtocolTools, Instruction: "the cake", Status: StatusAsking,
		Messages: []Message{
			{Role: RoleSystem, Content: SystemPrompt(ProtocolTools)},
			{Role: RoleUser, Content: "the cake"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{
				{ID: "ask", Name: ActAskUser, Arguments: `{"question":"Move it?"}`},
				{ID: "mv", Name: ActMoveTasks, Arguments: `{"moves":[{"task_id":"t2","project_name":"Birthday"}]}`},
				{ID: "fa", Name: ActFinalAnswer, Arguments: `{"answer":"Moved it."}`}}},
		},
		Calls: []call{
			{ID: "ask", Name: ActAskUser, Args: []byte(`{"question":"Move it?"}`)},
			{ID: "mv", Name: ActMoveTasks, Args: []byte(`{"moves":[{"task_id":"t2","project_name":"Birthday"}]}`)},
			{ID: "fa", Name: ActFinalAnswer, Args: []byte(`{"answer":"Moved it."}`)},
		},
		Wait:  &wait{Kind: "ask", CallID: "ask", Question: "Move it?"},
		Steps: 1,
	}
	tr = reload(t, tr)
	out := New(s, m, Config{}).Resume(t.Context(), tr, "No", Hooks{})
	if out.Status != StatusDone || out.Answer != "Left it." {
		t.Fatalf("outcome %s %q", out.Status, out.Answer)
	}
	if got := m.where(); strings.Contains(got, "@Birthday") {
		t.Errorf("state: %s", got)
	}
	checkConversation(t, ProtocolTools, s.reqs[0])
}

// A user's answer is progress: read → ask → read → ask → read goes on
// (issue 20 item 12).
func TestEngineAnswerResetsLoopCounts(t *testing.T) {
	m := newTalkTasks()
	s := &script{replies: []Response{
		tool(ActGetInboxTasks, `{}`),
		tool(ActAskUser, `{"question":"Which one?"}`),
		tool(ActGetInboxTasks, `{}`),
		tool(ActAskUser, `{"question":"And now?"}`),
		tool(ActGetInboxTasks, `{}`),
		tool(ActFinalAnswer, `{"answer":"Nothing to do."}`),
	}}
	e := New(s, m, Config{})
	out := e.Start(t.Context(), Input{Instruction: "x"}, Hooks{})
	for _, a := range []string{"the cake", "the slides"} {
		if out.Status != StatusAsking {
			t.Fatalf("outcome %s %q", out.Status, out.Answer)
		}
		out = e.Resume(t.Context(), out.Transcript, a, Hooks{})
	}
	if out.Status != StatusDone || out.Answer != "Nothing to do." {
		t.Fatalf("outcome %s %q", out.Status, out.Answer)
	}
}

func transcriptText(tr *Transcript) string {
	var b strings.Builder
	for _, m := range tr.Messages {
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	return b.String()
}
