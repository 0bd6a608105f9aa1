package inspector

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

// memSource is an in-memory Source.
type memSource map[string]*bot.Run

func (m memSource) Run(_ context.Context, id string) (*bot.Run, error) {
	r, ok := m[id]
	if !ok {
		return nil, fmt.Errorf("run %s: %w", id, bot.ErrNotFound)
	}
	return r, nil
}

func (m memSource) Runs(context.Context, ...bot.RunStatus) ([]*bot.Run, error) {
	var out []*bot.Run
	for _, r := range m {
		out = append(out, r)
	}
	return out, nil
}

var t0 = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)

// questionRun is a tools-protocol run that read the projects, asked which
// project, deleted a task after the user confirmed (a gated write), and
// was then undone. content is the task's name (hostile in some tests).
func questionRun(t testing.TB, id, content string) *bot.Run {
	t.Helper()
	str := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	msgs := []agent.Message{
		{Role: agent.RoleSystem, Content: "system prompt"},
		{Role: agent.RoleUser, Content: "earlier message"},
		{Role: agent.RoleAssistant, Content: "earlier answer"},
		{Role: agent.RoleUser, Content: "clean up " + content},
		{Role: agent.RoleAssistant, Content: "I need the projects first.", ToolCalls: []agent.ToolCall{{ID: "c1", Name: agent.ActGetProjects, Arguments: `{}`}}},
		{Role: agent.RoleTool, ToolCallID: "c1", Content: "Projects (2):\nP1 Inbox\nP2 Home — " + content},
		{Role: agent.RoleAssistant, Content: "Ask which one.", ToolCalls: []agent.ToolCall{{ID: "c2", Name: agent.ActAskUser, Arguments: `{"question":"Delete ` + content[:0] + `which task?","options":["T1","T2"]}`}}},
		{Role: agent.RoleTool, ToolCallID: "c2", Content: "The user answered: T1"},
		{Role: agent.RoleAssistant, Content: "Delete " + content, ToolCalls: []agent.ToolCall{{ID: "c3", Name: agent.ActDeleteTasks, Arguments: `{"task_ids":["T1"],"note":` + str(content) + `}`}}},
		{Role: agent.RoleTool, ToolCallID: "c3", Content: "✓ deleted T1 " + content + "\n" + longObservation},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c4", Name: agent.ActFinalAnswer, Arguments: `{"answer":"Deleted."}`}}},
		{Role: agent.RoleTool, ToolCallID: "c4", Content: "Done."},
	}
	u := func(p, c int) *agent.Usage { return &agent.Usage{PromptTokens: p, CompletionTokens: c, Calls: 1} }
	spans := []agent.Span{
		{Step: 1, Kind: agent.SpanModel, Op: "complete", Start: t0, Dur: 1200 * time.Millisecond, Usage: u(1500, 40)},
		{Step: 1, Kind: agent.SpanTasks, Op: "projects", Start: t0.Add(1200 * time.Millisecond), Dur: 310 * time.Millisecond},
		{Step: 2, Kind: agent.SpanModel, Op: "complete", Start: t0.Add(2 * time.Second), Dur: 900 * time.Millisecond, Usage: u(1700, 30)},
		{Step: 2, Kind: agent.SpanWait, Op: "answer", Start: t0.Add(3 * time.Second), Dur: 2 * time.Hour},
		{Step: 3, Kind: agent.SpanModel, Op: "complete", Start: t0.Add(2 * time.Hour), Dur: 800 * time.Millisecond, Usage: u(1800, 25)},
		{Step: 3, Kind: agent.SpanTasks, Op: "tasks", Start: t0.Add(2 * time.Hour), Dur: 250 * time.Millisecond},
		{Step: 3, Kind: agent.SpanWait, Op: "answer", Start: t0.Add(2 * time.Hour), Dur: 45 * time.Second},
		{Step: 3, Kind: agent.SpanTasks, Op: "apply", Start: t0.Add(2 * time.Hour), Dur: 420 * time.Millisecond},
		{Step: 4, Kind: agent.SpanModel, Op: "complete", Start: t0.Add(2 * time.Hour), Dur: 700 * time.Millisecond, Usage: u(1900, 12)},
	}
	tr := &agent.Transcript{V: agent.TranscriptVersion, Protocol: agent.ProtocolTools, Instruction: "clean up " + content, Status: agent.StatusDone,
		Messages: msgs, Steps: 4, Usage: agent.Usage{PromptTokens: 6900, CompletionTokens: 107, Calls: 4}, Spans: spans, Answer: "Deleted " + content,
		Journal: []agent.Applied{{Write: agent.Write{Kind: agent.DeleteTask, ID: "T1"}, Summary: "deleted “" + content + "”"}}}
	raw, err := agent.MarshalTranscript(tr)
	if err != nil {
		t.Fatal(err)
	}
	return &bot.Run{ID: id, ThreadKey: "telegram:42:", Platform: "telegram", ChatID: "42", UserID: "42", Status: bot.RunDone,
		Instruction: "clean up " + content, Transcript: raw, Usage: tr.Usage, Answer: "Deleted " + content, Undone: true, Created: t0, Updated: t0}
}

// longObservation is clipped on the page until expanded.
var longObservation = "Remaining tasks:\n" + func() string {
	s := ""
	for i := range 30 {
		s += fmt.Sprintf("T%d task number %d in Home\n", 100+i, i)
	}
	return s + "END-OF-OBSERVATION"
}()

// demoRun is a /tidy-inbox run as a person would see it: a read, a batch
// of moves with a long observation, a question, the last move and the
// answer. It is the README's screenshot.
func demoRun(t testing.TB) *bot.Run {
	t.Helper()
	moved := "Moved 5 tasks:\n" +
		"✓ 6Jf8 “Send slides to Anna” → Work\n" +
		"✓ 6Jf9 “Book flights for the offsite” → Work\n" +
		"✓ 6JfA “Review Q3 budget” → Work\n" +
		"✓ 6JfB “Buy birthday cake” → Home\n" +
		"✓ 6JfC “Renew car insurance” → Home\n" +
		"Inbox now holds 1 task: 6JfD “Call the plumber”.\n" +
		"Projects now: Work 12 open tasks, Home 9 open tasks."
	msgs := []agent.Message{
		{Role: agent.RoleSystem, Content: "system prompt"},
		{Role: agent.RoleUser, Content: "Tidy my inbox"},
		{Role: agent.RoleAssistant, Content: "I'll read the inbox and the projects first.", ToolCalls: []agent.ToolCall{{ID: "c1", Name: agent.ActGetOverview, Arguments: `{}`}}},
		{Role: agent.RoleTool, ToolCallID: "c1", Content: "Projects: 2Fx1 Inbox (6 tasks), 2Fx2 Work, 2Fx3 Home\nInbox:\n6Jf8 Send slides to Anna\n6Jf9 Book flights for the offsite\n6JfA Review Q3 budget\n6JfB Buy birthday cake\n6JfC Renew car insurance\n6JfD Call the plumber"},
		{Role: agent.RoleAssistant, Content: "Five tasks clearly belong to Work or Home.", ToolCalls: []agent.ToolCall{{ID: "c2", Name: agent.ActMoveTasks,
			Arguments: `{"moves":[{"task_id":"6Jf8","project_id":"2Fx2"},{"task_id":"6Jf9","project_id":"2Fx2"},{"task_id":"6JfA","project_id":"2Fx2"},{"task_id":"6JfB","project_id":"2Fx3"},{"task_id":"6JfC","project_id":"2Fx3"}]}`}}},
		{Role: agent.RoleTool, ToolCallID: "c2", Content: moved},
		{Role: agent.RoleAssistant, Content: "The plumber could be Work (the office) or Home.", ToolCalls: []agent.ToolCall{{ID: "c3", Name: agent.ActAskUser, Arguments: `{"question":"Which project for “Call the plumber”?","options":["Home","Work"]}`}}},
		{Role: agent.RoleTool, ToolCallID: "c3", Content: "The user answered: Home"},
		{Role: agent.RoleAssistant, Content: "Home it is; then I'm done.", ToolCalls: []agent.ToolCall{
			{ID: "c4", Name: agent.ActMoveTasks, Arguments: `{"moves":[{"task_id":"6JfD","project_id":"2Fx3"}]}`},
			{ID: "c5", Name: agent.ActFinalAnswer, Arguments: `{"answer":"Filed 5 tasks into Work and Home, and “Call the plumber” into Home, as you said. Your inbox is empty."}`}}},
		{Role: agent.RoleTool, ToolCallID: "c4", Content: "✓ 6JfD “Call the plumber” → Home"},
		{Role: agent.RoleTool, ToolCallID: "c5", Content: "Done."},
	}
	u := func(p, c int) *agent.Usage { return &agent.Usage{PromptTokens: p, CompletionTokens: c, Calls: 1} }
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	spans := []agent.Span{
		{Step: 1, Kind: agent.SpanModel, Op: "complete", Start: at(0), Dur: 1400 * time.Millisecond, Usage: u(1850, 64)},
		{Step: 1, Kind: agent.SpanTasks, Op: "snapshot", Start: at(1400 * time.Millisecond), Dur: 420 * time.Millisecond},
		{Step: 2, Kind: agent.SpanModel, Op: "complete", Start: at(2 * time.Second), Dur: 2300 * time.Millisecond, Usage: u(2210, 180)},
		{Step: 2, Kind: agent.SpanTasks, Op: "apply", Start: at(4300 * time.Millisecond), Dur: 610 * time.Millisecond},
		{Step: 3, Kind: agent.SpanModel, Op: "complete", Start: at(5 * time.Second), Dur: 1100 * time.Millisecond, Usage: u(2480, 52)},
		{Step: 3, Kind: agent.SpanWait, Op: "answer", Start: at(6 * time.Second), Dur: 3*time.Minute + 12*time.Second},
		{Step: 4, Kind: agent.SpanModel, Op: "complete", Start: at(3 * time.Minute), Dur: 1600 * time.Millisecond, Usage: u(2560, 95)},
		{Step: 4, Kind: agent.SpanTasks, Op: "apply", Start: at(3 * time.Minute), Dur: 380 * time.Millisecond},
	}
	answer := "Filed 5 tasks into Work and Home, and “Call the plumber” into Home, as you said. Your inbox is empty."
	var journal []agent.Applied
	for _, s := range []string{"moved “Send slides to Anna” to Work", "moved “Book flights for the offsite” to Work", "moved “Review Q3 budget” to Work",
		"moved “Buy birthday cake” to Home", "moved “Renew car insurance” to Home", "moved “Call the plumber” to Home"} {
		journal = append(journal, agent.Applied{Write: agent.Write{Kind: agent.MoveTask}, Summary: s})
	}
	tr := &agent.Transcript{V: agent.TranscriptVersion, Protocol: agent.ProtocolTools, Instruction: "Tidy my inbox", Status: agent.StatusDone,
		Messages: msgs, Steps: 4, Usage: agent.Usage{PromptTokens: 9100, CompletionTokens: 391, Calls: 4}, Spans: spans, Answer: answer, Journal: journal}
	raw, err := agent.MarshalTranscript(tr)
	if err != nil {
		t.Fatal(err)
	}
	return &bot.Run{ID: "01JD3QX7", ThreadKey: "telegram:42:", Platform: "telegram", ChatID: "42", UserID: "42", Status: bot.RunDone,
		Instruction: "Tidy my inbox", Transcript: raw, Usage: tr.Usage, Answer: answer, Created: t0, Updated: t0}
}
