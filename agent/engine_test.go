package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// reload is tr saved and read back (MarshalTranscript, then
// UnmarshalTranscript), as a restart finds it.
func reload(t *testing.T, tr *Transcript) *Transcript {
	t.Helper()
	raw, err := MarshalTranscript(tr)
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalTranscript(raw)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// talkRequest is a request that names each of newTalkTasks' tasks, so
// that writes to them are what the person asked for (see scope in
// injection.go).
const talkRequest = "file the slides, the cake and the website"

func newTalkTasks() *memTasks {
	m := newMemTasks()
	m.addTask("t1", "Finish slides for PyData talk")
	m.addTask("t2", "Buy birthday cake")
	m.addTask("t3", "Fix links on personal website")
	return m
}

func TestEngineJSONRepairsAndFinishes(t *testing.T) {
	m := newTalkTasks()
	s := &script{replies: []Response{
		text("My apologies for the confusion. Here is the correct response:\n```json\n{\"thought\":\"look\",\"action\":{\"type\":\"get_overview\"}}\n```"),
		text(`{"thought":"loop","action":{"type":"Loop through each task in the inbox"}}`),
		text(`{"thought":"move","action":{"type":"move_tasks","moves":[{"task_id":"t1","project_name":"PyData"},{"task_id":"t2","project_name":"Birthday"},{"task_id":"t3","project_name":"pydata"}]}}`),
		text(`{"thought":"done","action":{"type":"final_answer","answer":"Filed 3 tasks."}}`),
	}}
	var events []string
	e := New(s, m, Config{Protocol: ProtocolJSON})
	var saves int
	out := e.Start(t.Context(), Input{Instruction: talkRequest}, Hooks{
		Save:    func(context.Context, *Transcript) error { saves++; return nil },
		Observe: func(ev Event) { events = append(events, ev.Summary) },
	})
	if out.Status != StatusDone || out.Answer != "Filed 3 tasks." {
		t.Fatalf("outcome %s %q (err %v)", out.Status, out.Answer, out.Err)
	}
	if len(s.reqs) != 4 {
		t.Errorf("model calls = %d, want 4 (the apology is repaired locally)", len(s.reqs))
	}
	repair := s.reqs[2].Messages[len(s.reqs[2].Messages)-1].Content
	for _, want := range []string{"there is no action", "Loop through each task", "move_tasks"} {
		if !strings.Contains(repair, want) {
			t.Errorf("repair prompt lacks %q:\n%s", want, repair)
		}
	}
	if got := m.where(); got != "Finish slides for PyData talk@PyData, Buy birthday cake@Birthday, Fix links on personal website@PyData" {
		t.Errorf("state: %s", got)
	}
	if m.requests != 2 {
		t.Errorf("Todoist requests = %d, want 2 (overview, one batch)", m.requests)
	}
	if joined := strings.Join(events, " | "); !strings.Contains(joined, "📁 Created Birthday, PyData · ➡️ Moved 3 tasks into 2 projects") {
		t.Errorf("events: %s", joined)
	}
	if saves == 0 {
		t.Error("transcript never saved")
	}
}

func TestEngineGivesUpAfterTwoRepairs(t *testing.T) {
	m := newTalkTasks()
	s := &script{replies: []Response{text("I will tidy now."), text("Sure!"), text("Done, I think.")}}
	out := New(s, m, Config{Protocol: ProtocolJSON}).Start(t.Context(), Input{Instruction: talkRequest}, Hooks{})
	if out.Status != StatusFailed || !strings.Contains(out.Answer, "could not use") {
		t.Fatalf("outcome %s %q", out.Status, out.Answer)
	}
	if len(s.reqs) != 3 {
		t.Errorf("model calls = %d, want 3", len(s.reqs))
	}
}

func TestEngineUnknownProjectIDWithoutAPICall(t *testing.T) {
	m := newTalkTasks()
	m.projects = append(m.projects, Project{ID: "p_birthday", Name: "Birthday"})
	s := &script{replies: []Response{
		tool(ActGetOverview, `{}`),
		tool(ActMoveTasks, `{"moves":[{"task_id":"t2","project_id":"birthday_id"}]}`),
		tool(ActFinalAnswer, `{"answer":"ok"}`),
	}}
	out := New(s, m, Config{}).Start(t.Context(), Input{Instruction: "file cake"}, Hooks{})
	if out.Status != StatusDone {
		t.Fatalf("outcome %s %q", out.Status, out.Answer)
	}
	obs := s.reqs[2].Messages[len(s.reqs[2].Messages)-1].Content
	if !strings.Contains(obs, "no project with id birthday_id") || !strings.Contains(obs, `p1 "Birthday"`) {
		t.Errorf("observation: %s", obs)
	}
	if m.requests != 1 {
		t.Errorf("Todoist requests = %d, want 1: the bad id is caught locally", m.requests)
	}
}

func TestEngineAskAndResumeThroughJSON(t *testing.T) {
	m := newTalkTasks()
	s := &script{replies: []Response{
		tool(ActAskUser, `{"question":"Which project?","options":["Work","Home"]}`),
		tool(ActMoveTasks, `{"moves":[{"task_id":"t2","project_name":"Home"}]}`),
		tool(ActFinalAnswer, `{"answer":"Moved."}`),
	}}
	e := New(s, m, Config{})
	out := e.Start(t.Context(), Input{Instruction: "file the cake"}, Hooks{})
	if out.Status != StatusAsking || out.Question != "Which project?" || len(out.Options) != 2 {
		t.Fatalf("outcome %+v", out)
	}
	tr := reload(t, out.Transcript)
	if again := e.Resume(t.Context(), tr, "", Hooks{}); again.Status != StatusAsking {
		t.Fatalf("resume without an answer: %s", again.Status)
	}
	out = e.Resume(t.Context(), tr, "Home", Hooks{})
	if out.Status != StatusDone || out.Answer != "Moved." {
		t.Fatalf("outcome %s %q", out.Status, out.Answer)
	}
	if !strings.Contains(s.reqs[1].Messages[len(s.reqs[1].Messages)-1].Content, "The user answered: Home") {
		t.Error("the answer did not reach the model")
	}
	if len(out.Transcript.Journal) != 2 {
		t.Errorf("journal = %+v", out.Transcript.Journal)
	}
}

func TestEngineLoopDetection(t *testing.T) {
	m := newTalkTasks()
	s := &script{fn: func(Request) Response { return tool(ActGetInboxTasks, `{}`) }}
	out := New(s, m, Config{}).Start(t.Context(), Input{Instruction: talkRequest}, Hooks{})
	if out.Status != StatusStopped || !strings.Contains(out.Answer, "repeating") || !strings.Contains(out.Answer, "Nothing was changed") {
		t.Fatalf("outcome %s %q", out.Status, out.Answer)
	}
}

func TestEngineStepLimitPartialAnswer(t *testing.T) {
	m := newTalkTasks()
	n := 0
	s := &script{fn: func(Request) Response {
		n++
		ids := []string{"t1", "t2", "t3", "t1"}
		return tool(ActMoveTasks, `{"moves":[{"task_id":"`+ids[(n-1)%4]+`","project_name":"P`+string(rune('0'+n))+`"}]}`)
	}}
	out := New(s, m, Config{MaxSteps: 3}).Start(t.Context(), Input{Instruction: talkRequest}, Hooks{})
	if out.Status != StatusStopped || !strings.Contains(out.Answer, "limit of 3 steps") || !strings.Contains(out.Answer, "Done so far") {
		t.Fatalf("outcome %s %q", out.Status, out.Answer)
	}
}

func TestEngineConfirmNoDeletesNothing(t *testing.T) {
	m := newTalkTasks()
	s := &script{replies: []Response{
		tool(ActDeleteTasks, `{"task_ids":["t2"]}`),
		tool(ActFinalAnswer, `{"answer":"Kept it."}`),
	}}
	e := New(s, m, Config{})
	out := e.Start(t.Context(), Input{Instruction: "delete cake"}, Hooks{})
	if out.Status != StatusConfirming || out.Label != "Delete 1 task" {
		t.Fatalf("outcome %+v", out)
	}
	out = e.Resume(t.Context(), out.Transcript, "no", Hooks{})
	if out.Status != StatusDone {
		t.Fatalf("outcome %s", out.Status)
	}
	if _, ok := m.tasks["t2"]; !ok {
		t.Error("the task was deleted after a no")
	}
}

func TestEngineResumedWriteAppliedOnce(t *testing.T) {
	m := newTalkTasks()
	s := &script{replies: []Response{
		tool(ActMoveTasks, `{"moves":[{"task_id":"t2","project_name":"Birthday"}]}`),
		tool(ActFinalAnswer, `{"answer":"ok"}`),
	}}
	e := New(s, m, Config{})
	// Crash right after the write was sent: the save that precedes the
	// send holds the pending uuids; the process dies before the next save.
	var saved []byte
	ctx, cancel := context.WithCancel(t.Context())
	out := e.Start(ctx, Input{Instruction: talkRequest}, Hooks{Save: func(_ context.Context, tr *Transcript) error {
		if tr.Pending != nil && saved == nil {
			saved, _ = MarshalTranscript(tr)
			// The write still goes through (memTasks ignores ctx);
			// then the run stops: a crash after the send.
			cancel()
		}
		return nil
	}})
	_ = out
	tr, err := UnmarshalTranscript(saved)
	if err != nil {
		t.Fatal(err)
	}
	out = e.Resume(t.Context(), tr, "", Hooks{})
	if out.Status != StatusDone {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	for uuid, n := range m.applied {
		if n != 1 {
			t.Errorf("write %s applied %d times", uuid, n)
		}
	}
	if len(m.projects) != 2 {
		t.Errorf("projects = %+v: a resumed write made a duplicate", m.projects)
	}
}

// A reply with a malformed write and final_answer must not end the run as
// done: the answer claims a change that was never made (issue 7 item 3).
func TestEngineFinalAnswerRejectedAfterMalformedCall(t *testing.T) {
	tests := []struct {
		name string
		bad  ToolCall
	}{
		{"malformed arguments", ToolCall{Name: ActMoveTasks, Arguments: `{"moves":[{"task_id":"t1","project_name":`}},
		{"missing field", ToolCall{Name: ActMoveTasks, Arguments: `{"mvoes":[]}`}},
		{"unknown action", ToolCall{Name: "move_task", Arguments: `{"moves":[{"task_id":"t1","project_name":"PyData"}]}`}},
		{"failing write", ToolCall{Name: ActMoveTasks, Arguments: `{"moves":[{"task_id":"nope","project_name":"PyData"}]}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTalkTasks()
			s := &script{replies: []Response{
				tools2(tt.bad, ToolCall{ID: "fa1", Name: ActFinalAnswer, Arguments: `{"answer":"Moved the slides task."}`}),
				tool(ActMoveTasks, `{"moves":[{"task_id":"t1","project_name":"PyData"}]}`),
				tool(ActFinalAnswer, `{"answer":"Now it is moved."}`),
			}}
			out := New(s, m, Config{}).Start(t.Context(), Input{Instruction: "file the slides task"}, Hooks{})
			if out.Status != StatusDone || out.Answer != "Now it is moved." {
				t.Fatalf("outcome %s %q; want the answer given after the fix", out.Status, out.Answer)
			}
			if got := lastObs(s.reqs[1], "fa1"); !strings.Contains(got, "Not accepted") {
				t.Errorf("observation of the first final_answer = %q, want it refused", got)
			}
			if got := m.where(); !strings.Contains(got, "Finish slides for PyData talk@PyData") {
				t.Errorf("state: %s", got)
			}
		})
	}
}

// Loop detection counts identical calls since the last change, so the
// read → move → read cycle /tidy-inbox asks for runs to the end
// (issue 7 item 4), while a write repeated without effect is stopped.
func TestEngineLoopDetectionAllowsProgress(t *testing.T) {
	t.Run("read move read move read", func(t *testing.T) {
		m := newTalkTasks()
		s := &script{replies: []Response{
			tool(ActGetInboxTasks, `{}`),
			tool(ActMoveTasks, `{"moves":[{"task_id":"t1","project_name":"PyData"}]}`),
			tool(ActGetInboxTasks, `{}`),
			tool(ActMoveTasks, `{"moves":[{"task_id":"t2","project_name":"Birthday"}]}`),
			tool(ActGetInboxTasks, `{}`),
			tool(ActMoveTasks, `{"moves":[{"task_id":"t3","project_name":"Website"}]}`),
			tool(ActGetInboxTasks, `{}`),
			tool(ActFinalAnswer, `{"answer":"The inbox is empty."}`),
		}}
		out := New(s, m, Config{}).Start(t.Context(), Input{Instruction: talkRequest}, Hooks{})
		if out.Status != StatusDone || out.Answer != "The inbox is empty." {
			t.Fatalf("outcome %s %q", out.Status, out.Answer)
		}
	})
	t.Run("a write that changes nothing", func(t *testing.T) {
		m := newTalkTasks()
		s := &script{fn: func(Request) Response {
			return tool(ActMoveTasks, `{"moves":[{"task_id":"t1","project_name":"PyData"}]}`)
		}}
		out := New(s, m, Config{}).Start(t.Context(), Input{Instruction: talkRequest}, Hooks{})
		if out.Status != StatusStopped || !strings.Contains(out.Answer, "repeating") || !strings.Contains(out.Answer, "moved") {
			t.Fatalf("outcome %s %q", out.Status, out.Answer)
		}
		if len(s.reqs) != 4 {
			t.Errorf("model calls = %d, want 4: the move, then three that changed nothing", len(s.reqs))
		}
	})
	t.Run("reads between writes that change nothing", func(t *testing.T) {
		m := newTalkTasks()
		n := 0
		s := &script{fn: func(Request) Response {
			n++
			if n%2 == 1 {
				return tool(ActGetInboxTasks, `{}`)
			}
			return tool(ActMoveTasks, `{"moves":[{"task_id":"nope","project_name":"PyData"}]}`)
		}}
		out := New(s, m, Config{}).Start(t.Context(), Input{Instruction: talkRequest}, Hooks{})
		if out.Status != StatusStopped || !strings.Contains(out.Answer, "repeating") {
			t.Fatalf("outcome %s %q", out.Status, out.Answer)
		}
	})
}

// A cancel that arrives while a write is being sent takes effect after
// it: what Todoist applied is journaled (so it is reported and undoable),
// and no other step runs (issue 7 item 5).
func TestEngineCancelDuringWriteKeepsWhatWasApplied(t *testing.T) {
	m := newTalkTasks()
	s := &script{replies: []Response{
		tool(ActMoveTasks, `{"moves":[{"task_id":"t2","project_name":"Birthday"}]}`),
		tool(ActFinalAnswer, `{"answer":"ok"}`),
	}}
	ctx, cancel := context.WithCancel(t.Context())
	m.beforeApply = func(context.Context) { cancel() } // /cancel pressed mid-write
	out := New(s, m, Config{}).Start(ctx, Input{Instruction: "file the cake"}, Hooks{})
	if out.Status != StatusInterrupted {
		t.Fatalf("outcome %s %q", out.Status, out.Answer)
	}
	if got := m.where(); !strings.Contains(got, "Buy birthday cake@Birthday") {
		t.Fatalf("state: %s", got)
	}
	tr := out.Transcript
	if tr.Pending != nil {
		t.Errorf("the write is still pending: %+v", tr.Pending)
	}
	var summaries []string
	for _, a := range tr.Journal {
		if len(a.Inverse) == 0 {
			t.Errorf("journal entry %q has no inverse", a.Summary)
		}
		summaries = append(summaries, a.Summary)
	}
	if got, want := strings.Join(summaries, "; "), `created project "Birthday"; moved "Buy birthday cake" to Birthday`; got != want {
		t.Errorf("journal = %s, want %s", got, want)
	}
	if len(s.reqs) != 1 {
		t.Errorf("model calls = %d, want 1: the cancel stops the run before the next step", len(s.reqs))
	}
	// What was journaled can be undone.
	if _, err := New(s, m, Config{}).Undo(t.Context(), tr.Journal); err != nil {
		t.Fatal(err)
	}
	if got := m.where(); !strings.Contains(got, "Buy birthday cake@Inbox") {
		t.Errorf("after undo: %s", got)
	}
}

// Two reads of one reply run concurrently: get_sections naming a project
// Todoist does not know builds its hint from the project list while
// get_projects replaces that list. Run with -race (issue 7 item 10).
func TestEngineParallelReadsDoNotRace(t *testing.T) {
	for range 20 {
		m := newTalkTasks()
		// The reads overlap: get_sections answers only once get_projects
		// has been called, and neither waits for the other after that.
		called := make(chan struct{})
		m.projectsFn = func() ([]Project, error) {
			close(called)
			return []Project{{ID: "inbox1", Name: "Inbox", IsInbox: true}, {ID: "p_work", Name: "Work"}}, nil
		}
		m.sectionsFn = func(string) ([]Section, error) {
			<-called
			return nil, &Error{Code: ErrNotFound, Message: "project not found"}
		}
		s := &script{replies: []Response{
			tools2(ToolCall{Name: ActGetSections, Arguments: `{"project_id":"p_wrok"}`}, ToolCall{Name: ActGetProjects, Arguments: `{}`}),
			tool(ActFinalAnswer, `{"answer":"ok"}`),
		}}
		out := New(s, m, Config{}).Start(t.Context(), Input{Instruction: "sections of work"}, Hooks{})
		if out.Status != StatusDone {
			t.Fatalf("outcome %s %q", out.Status, out.Answer)
		}
		if got := lastObs(s.reqs[1], "c0_get_sections"); !strings.Contains(got, "no project with id p_wrok") {
			t.Errorf("get_sections observation: %q", got)
		}
	}
}

// The token budget is checked before each call with the request's counted
// tokens, so one call cannot overshoot it (issue 8 item 7).
func TestEngineTokenBudgetCheckedBeforeTheCall(t *testing.T) {
	count := func(req Request) int {
		n := 0
		for _, m := range req.Messages {
			n += len(m.Content) / 4
		}
		return n
	}
	t.Run("an oversized first request is never sent", func(t *testing.T) {
		s := &script{replies: []Response{tool(ActFinalAnswer, `{"answer":"ok"}`)}}
		out := New(s, newTalkTasks(), Config{TokenBudget: 5000, CountTokens: count}).
			Start(t.Context(), Input{Instruction: strings.Repeat("tidy ", 8000)}, Hooks{})
		if out.Status != StatusStopped || !strings.Contains(out.Answer, "budget of 5000 tokens") {
			t.Fatalf("outcome %s %q", out.Status, out.Answer)
		}
		if len(s.reqs) != 0 {
			t.Errorf("model calls = %d, want 0", len(s.reqs))
		}
	})
	t.Run("a call that would cross the budget is not made", func(t *testing.T) {
		// Each message counts 250 tokens: the first request (system and
		// instruction, 500, plus 100 of answer) fits, the second (four
		// messages, after 110 used) would not.
		n := 0
		s := &script{fn: func(Request) Response {
			n++
			return tool(ActMoveTasks, fmt.Sprintf(`{"moves":[{"task_id":"t%d","project_name":"P%d"}]}`, n, n))
		}}
		out := New(s, newTalkTasks(), Config{TokenBudget: 1000, MaxTokens: 100, CountTokens: func(req Request) int { return 250 * len(req.Messages) }}).
			Start(t.Context(), Input{Instruction: talkRequest}, Hooks{})
		if out.Status != StatusStopped || !strings.Contains(out.Answer, "budget") {
			t.Fatalf("outcome %s %q", out.Status, out.Answer)
		}
		if used := out.Transcript.Usage.Total(); used > 1000 {
			t.Errorf("usage %d, over the budget", used)
		}
		for i, req := range s.reqs {
			if got := 250*len(req.Messages) + req.MaxTokens; got > 1000 {
				t.Errorf("request %d may cost %d tokens alone", i, got)
			}
		}
	})
}

// Tokens are counted only for a call near the budget: PromptBound
// settles the others, and a call near the budget gets the answer limit
// the count leaves, as if every call were counted.
func TestEngineCountsTokensNearTheBudgetOnly(t *testing.T) {
	for _, tt := range []struct {
		name       string
		budget     int
		wantCounts int
		wantMax    int
	}{
		{"far from the budget", 200_000, 0, 1000},
		// The tool schemas alone make the bound larger than 8,000.
		{"near the budget", 8000, 1, 8000 - 500},
	} {
		t.Run(tt.name, func(t *testing.T) {
			counts := 0
			count := func(req Request) int {
				counts++
				if b := PromptBound(req); tt.budget-b >= 1000 {
					t.Errorf("counted with a bound of %d: the call was not near the budget", b)
				}
				return 500
			}
			s := &script{replies: []Response{tool(ActFinalAnswer, `{"answer":"ok"}`)}}
			out := New(s, newTalkTasks(), Config{TokenBudget: tt.budget, MaxTokens: 1000, CountTokens: count}).
				Start(t.Context(), Input{Instruction: "hello"}, Hooks{})
			if out.Status != StatusDone {
				t.Fatalf("outcome %s %q", out.Status, out.Answer)
			}
			if counts != tt.wantCounts {
				t.Errorf("tokens counted %d times, want %d", counts, tt.wantCounts)
			}
			if got := s.reqs[0].MaxTokens; got != min(tt.wantMax, 1000) {
				t.Errorf("answer limit %d, want %d", got, min(tt.wantMax, 1000))
			}
		})
	}
}

// PromptBound is never below the default estimate, whatever the texts.
func TestPromptBoundCoversTheEstimate(t *testing.T) {
	for _, req := range []Request{
		{},
		{Messages: []Message{{Role: RoleUser}}},
		{Messages: []Message{{Role: RoleUser, Content: "a"}, {Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "f", Arguments: "{}"}}}}},
		{Messages: []Message{{Role: RoleSystem, Content: SystemPrompt(ProtocolTools)}}, Tools: tools(true, nil)},
		{Messages: []Message{{Role: RoleSystem, Content: SystemPrompt(ProtocolJSON)}}, Format: &ResponseFormat{Kind: FormatJSONSchema, Schema: EnvelopeSchema()}},
		{Tools: []Tool{{}}, Format: &ResponseFormat{}},
	} {
		if est, bound := estimateTokens(req), PromptBound(req); est > bound {
			t.Errorf("estimate %d above the bound %d for %+v", est, bound, req)
		}
	}
}

// The history given to the model is bounded by tokens as well as by count
// (issue 8 item 5): a 900 KB message of earlier in the conversation is
// not re-sent whole with every later message.
func TestEngineHistoryBoundedByTokens(t *testing.T) {
	s := &script{replies: []Response{tool(ActFinalAnswer, `{"answer":"ok"}`)}}
	history := []HistoryMessage{
		{Role: RoleUser, Text: "oldest: " + strings.Repeat("a", 4000)},
		{Role: RoleUser, Text: "huge: " + strings.Repeat("b ", 450_000)},
		{Role: RoleAssistant, Text: "I filed it."},
		{Role: RoleUser, Text: "thanks"},
	}
	out := New(s, newTalkTasks(), Config{HistoryTokens: 2000}).
		Start(t.Context(), Input{Instruction: "what's due?", History: history}, Hooks{})
	if out.Status != StatusDone {
		t.Fatalf("outcome %s %q", out.Status, out.Answer)
	}
	msgs := s.reqs[0].Messages
	var got []string
	total := 0
	for _, m := range msgs[2 : len(msgs)-1] { // between the system prompt and date, and the instruction
		got = append(got, clip(m.Content, 12))
		total += estimateTokens(Request{Messages: []Message{m}})
	}
	if total > 2000 {
		t.Errorf("history holds %d tokens, want at most 2000", total)
	}
	if j := strings.Join(got, " | "); !strings.HasPrefix(j, "huge: b b b ") || !strings.HasSuffix(j, "I filed it. | thanks") || strings.Contains(j, "oldest") {
		t.Errorf("history = %s; want the newest messages, the huge one clipped, the oldest dropped", j)
	}
	if last := msgs[len(msgs)-1]; last.Content != "what's due?" {
		t.Errorf("instruction = %q", last.Content)
	}
}

// A short history, whose byte bound fits in HistoryTokens, is given whole
// without counting a token (the tokenizer is neither run nor loaded); a
// long one is counted as before.
func TestEngineShortHistoryIsNotCounted(t *testing.T) {
	history := []HistoryMessage{{Role: RoleUser, Text: "file the cake"}, {Role: RoleAssistant, Text: "Filed."}, {Role: RoleUser, Text: "thanks"}}
	for _, tc := range []struct {
		name          string
		historyTokens int
		wantCounted   bool
	}{{"fits", 2000, false}, {"near the bound", 50, true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{replies: []Response{tool(ActFinalAnswer, `{"answer":"ok"}`)}}
			counted := 0
			count := func(req Request) int {
				if len(req.Messages) == 1 && req.Messages[0].Role != RoleSystem && len(req.Tools) == 0 {
					counted++
				}
				return estimateTokens(req)
			}
			out := New(s, newTalkTasks(), Config{HistoryTokens: tc.historyTokens, CountTokens: count}).
				Start(t.Context(), Input{Instruction: "what's due?", History: history}, Hooks{})
			if out.Status != StatusDone {
				t.Fatalf("outcome %s %q", out.Status, out.Answer)
			}
			if got := counted > 0; got != tc.wantCounted {
				t.Errorf("history messages counted %d times, want counting %v", counted, tc.wantCounted)
			}
			msgs := s.reqs[0].Messages
			var got []string
			for _, m := range msgs[2 : len(msgs)-1] {
				got = append(got, m.Content)
			}
			if j := strings.Join(got, " | "); j != "file the cake | Filed. | thanks" {
				t.Errorf("history = %s, want all three in order", j)
			}
		})
	}
}

// An unusable reply of 1 MB is quoted back clipped, and the conversation
// does not carry it whole either (issue 8 item 6).
func TestEngineRepairQuotesAClippedValue(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	tests := []struct {
		name  string
		proto Protocol
		reply Response
	}{
		{"not json", ProtocolTools, tool(ActMoveTasks, `{"moves": "`+huge)},
		{"huge property name", ProtocolTools, tool(ActCompleteTasks, `{"task_ids":["t1"],"`+huge+`":1}`)},
		{"huge value", ProtocolTools, tool(ActCreateProject, `{"name":"`+huge+`"}`)},
		{"huge action name", ProtocolTools, tool(huge, `{}`)},
		{"json protocol prose", ProtocolJSON, text(huge)},
		{"json protocol action name", ProtocolJSON, text(`{"thought":"x","action":{"type":"` + huge + `"}}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &script{replies: []Response{tt.reply, tool(ActFinalAnswer, `{"answer":"ok"}`)}}
			if tt.proto == ProtocolJSON {
				s.replies[1] = text(`{"thought":"x","action":{"type":"final_answer","answer":"ok"}}`)
			}
			out := New(s, newTalkTasks(), Config{Protocol: tt.proto}).Start(t.Context(), Input{Instruction: talkRequest}, Hooks{})
			if out.Status != StatusDone {
				t.Fatalf("outcome %s %q", out.Status, out.Answer)
			}
			size := 0
			var repair string
			for _, m := range s.reqs[1].Messages[1:] {
				size += len(m.Content)
				for _, c := range m.ToolCalls {
					size += len(c.Name) + len(c.Arguments)
				}
				if strings.Contains(m.Content, "could not be used") {
					repair = m.Content
				}
			}
			if size > 8000 {
				t.Errorf("the repair request carries %d bytes of conversation, want a clipped quote", size)
			}
			if !strings.Contains(repair, "You sent: ") || !strings.Contains(repair, "xxx…") {
				t.Errorf("repair prompt = %q", clip(repair, 2000))
			}
		})
	}
}

// Every failure reaches the user through one wording; internal detail
// stays in Outcome.Err.
func TestEngineFailureWords(t *testing.T) {
	tests := []struct {
		name  string
		model Model
		tasks func(*memTasks)
		save  func(context.Context, *Transcript) error
		want  string
	}{
		{"model without a code", modelFunc(func(context.Context, Request) (Response, error) {
			return Response{}, fmt.Errorf("dial tcp 10.0.0.1:443: connection refused")
		}), nil, nil, "I couldn't finish: the model service is not answering.\nNothing was changed."},
		{"model with a code", modelFunc(func(context.Context, Request) (Response, error) {
			return Response{}, &Error{Code: ErrInvalid, Message: "the model does not exist"}
		}), nil, nil, "I couldn't finish: the model service said: the model does not exist.\nNothing was changed."},
		{"save", &script{replies: []Response{tool(ActGetLabels, `{}`)}}, nil,
			func(context.Context, *Transcript) error { return fmt.Errorf("disk full") },
			"I couldn't finish: I could not save my progress.\nNothing was changed."},
		{"fatal read", &script{replies: []Response{tool(ActGetProjects, `{}`)}},
			func(m *memTasks) {
				m.projectsFn = func() ([]Project, error) {
					return nil, &Error{Code: ErrUnauthorized, Message: "Todoist refused the token"}
				}
			}, nil, "I couldn't finish: Todoist refused the token.\nNothing was changed."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTalkTasks()
			if tt.tasks != nil {
				tt.tasks(m)
			}
			out := New(tt.model, m, Config{}).Start(t.Context(), Input{Instruction: talkRequest}, Hooks{Save: tt.save})
			if out.Status != StatusFailed || out.Answer != tt.want {
				t.Errorf("outcome %s %q, want %q", out.Status, out.Answer, tt.want)
			}
			if out.Err == nil {
				t.Error("no cause for the log")
			}
		})
	}
}

// Under the "writes" policy every write waits for a yes, with a label and
// a question its action words.
func TestEngineGateWordsEachWrite(t *testing.T) {
	tests := []struct {
		name, args      string
		label, question string
	}{
		{ActCreateProject, `{"name":"Trip"}`, "Create project", `Create the project "Trip"?`},
		{ActMoveTasks, `{"moves":[{"task_id":"t1","project_name":"X"},{"task_id":"t2","project_name":"X"}]}`, "Move 2 tasks", "Move 2 tasks?"},
		{ActAddTasks, `{"tasks":[{"content":"Call mum"}]}`, "Add 1 task", "Add 1 task?"},
		{ActUpdateTasks, `{"updates":[{"task_id":"t1","priority":"p1"}]}`, "Update 1 task", "Change 1 task?"},
		{ActCompleteTasks, `{"task_ids":["t2","t3"]}`, "Complete 2 tasks", `Mark "Buy birthday cake", "Fix links on personal website" done?`},
		{ActDeleteTasks, `{"task_ids":["t2"]}`, "Delete 1 task", `Delete "Buy birthday cake"? This cannot be undone.`},
		{ActCreateSection, `{"project_id":"inbox1","name":"Next"}`, "Create section", `Create the section "Next"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &script{replies: []Response{tool(tt.name, tt.args)}}
			out := New(s, newTalkTasks(), Config{Confirm: ConfirmWrites}).Start(t.Context(), Input{Instruction: talkRequest + "; a Trip project, a Next section, call mum"}, Hooks{})
			if out.Status != StatusConfirming || out.Label != tt.label || out.Question != tt.question {
				t.Errorf("outcome %s %q %q, want %q %q", out.Status, out.Label, out.Question, tt.label, tt.question)
			}
		})
	}
}

// final_answer sent before the other calls of its reply is judged after
// them: the calls run first, and a failure among them refuses the answer
// (issue 7 item 3).
func TestEngineFinalAnswerWaitsForTheOtherCalls(t *testing.T) {
	t.Run("they succeed", func(t *testing.T) {
		m := newTalkTasks()
		s := &script{replies: []Response{
			tools2(ToolCall{ID: "fa", Name: ActFinalAnswer, Arguments: `{"answer":"Moved the cake."}`},
				ToolCall{Name: ActMoveTasks, Arguments: `{"moves":[{"task_id":"t2","project_name":"Birthday"}]}`}),
		}}
		out := New(s, m, Config{}).Start(t.Context(), Input{Instruction: "file the cake"}, Hooks{})
		if out.Status != StatusDone || out.Answer != "Moved the cake." {
			t.Fatalf("outcome %s %q", out.Status, out.Answer)
		}
		if got := m.where(); !strings.Contains(got, "Buy birthday cake@Birthday") {
			t.Errorf("state: %s; the answer claims a move that was not made", got)
		}
	})
	t.Run("one fails", func(t *testing.T) {
		m := newTalkTasks()
		s := &script{replies: []Response{
			tools2(ToolCall{ID: "fa", Name: ActFinalAnswer, Arguments: `{"answer":"Moved the cake."}`},
				ToolCall{Name: ActMoveTasks, Arguments: `{"moves":[{"task_id":"t9","project_name":"Birthday"}]}`}),
			tool(ActFinalAnswer, `{"answer":"There is no such task."}`),
		}}
		out := New(s, m, Config{}).Start(t.Context(), Input{Instruction: "file the cake"}, Hooks{})
		if out.Status != StatusDone || out.Answer != "There is no such task." {
			t.Fatalf("outcome %s %q", out.Status, out.Answer)
		}
	})
}

// TestEngineSavesAReplyOfControlsOnlyWithItsEnd: a reply that only
// answers is saved once, by the run's end (which the bot stores with the
// run's state in one transaction), not also as a step; a reply with a
// read is saved after its step, as before; a reply that begins with a
// write is saved with it pending, before it is sent, not also as a step
// (and before the next model call when that write was refused unplanned).
func TestEngineSavesAReplyOfControlsOnlyWithItsEnd(t *testing.T) {
	for _, tt := range []struct {
		name    string
		replies []Response
		allow   []string // Input.Allow
		// want is the status of each save, in order.
		want []Status
	}{
		{"answers at once", []Response{tool(ActFinalAnswer, `{"answer":"Hi."}`)}, nil, []Status{StatusDone}},
		{"reads, then answers", []Response{tool(ActGetProjects, `{}`), tool(ActFinalAnswer, `{"answer":"Hi."}`)},
			nil, []Status{StatusInterrupted, StatusInterrupted, StatusDone}},
		// A reply that begins with a write is saved with the write
		// pending (before it is sent), not also as a step.
		{"writes, then answers", []Response{tool(ActMoveTasks, `{"moves":[{"task_id":"t2","project_name":"Birthday"}]}`), tool(ActFinalAnswer, `{"answer":"Moved."}`)},
			nil, []Status{"pending", StatusInterrupted, StatusDone}},
		// A write not offered is refused before it is planned: the
		// reply is saved before the next model call all the same.
		{"a write not offered, then answers", []Response{tool(ActDeleteTasks, `{"task_ids":["t2"]}`), tool(ActFinalAnswer, `{"answer":"I can't."}`)},
			[]string{ActGetProjects, ActFinalAnswer}, []Status{StatusInterrupted, StatusDone}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []Status
			out := New(&script{replies: tt.replies}, newTalkTasks(), Config{}).Start(t.Context(), Input{Instruction: talkRequest, Allow: tt.allow},
				Hooks{Save: func(_ context.Context, tr *Transcript) error {
					st := tr.Status
					if tr.Pending != nil {
						st = "pending"
					}
					got = append(got, st)
					return nil
				}})
			if out.Status != StatusDone {
				t.Fatalf("outcome %s (err %v)", out.Status, out.Err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("saves %v, want %v", got, tt.want)
			}
		})
	}
}
