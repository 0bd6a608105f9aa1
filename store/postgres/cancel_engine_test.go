package postgres

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

// cancelModel reads the projects (a step the engine saves), calling
// first, once, before; then answers.
type cancelModel struct {
	calls  atomic.Int32
	before func()
}

func (m *cancelModel) Complete(_ context.Context, req agent.Request) (agent.Response, error) {
	use := agent.Usage{PromptTokens: 100, CompletionTokens: 10, Calls: 1}
	if m.calls.Add(1) == 1 {
		m.before()
		return agent.Response{Content: "reading", FinishReason: "tool_calls", Usage: use,
			ToolCalls: []agent.ToolCall{{ID: "call_1", Name: agent.ActGetProjects, Arguments: "{}"}}}, nil
	}
	return agent.Response{Content: "done", FinishReason: "tool_calls", Usage: use,
		ToolCalls: []agent.ToolCall{{ID: "call_2", Name: agent.ActFinalAnswer, Arguments: `{"answer":"did: it"}`}}}, nil
}

// inboxOnly is a Todoist account with an empty Inbox.
type inboxOnly struct{}

var inbox = agent.Project{ID: "inbox", Name: "Inbox", IsInbox: true}

func (inboxOnly) Projects(context.Context) ([]agent.Project, error) {
	return []agent.Project{inbox}, nil
}
func (inboxOnly) Tasks(context.Context, agent.TaskQuery) ([]agent.Task, error) { return nil, nil }
func (inboxOnly) Sections(context.Context, string) ([]agent.Section, error)    { return nil, nil }
func (inboxOnly) Labels(context.Context) ([]agent.Label, error)                { return nil, nil }
func (inboxOnly) Snapshot(context.Context) (agent.Snapshot, error) {
	return agent.Snapshot{Projects: []agent.Project{inbox}}, nil
}
func (inboxOnly) Apply(context.Context, []agent.Write) ([]agent.WriteResult, error) { return nil, nil }

// TestCancelStoredStopsAnEngineRunAsAsked: as
// TestCancelStoredRefusesTheNextSave, with the real agent engine, which
// ends a run whose save failed as failed ("I couldn't finish: I could
// not save my progress."): a /cancel stored (its notification lost)
// while the run's model call is under way refuses the step's save
// (bot.ErrCancelStored), and the person must read that the run stopped
// as asked, the run cancelled, not failed.
func TestCancelStoredStopsAnEngineRunAsAsked(t *testing.T) {
	t.Parallel()
	a, _ := twoReplicas(t)
	c := &chats{posts: map[string][]string{}, by: map[int]int{}}
	m := &cancelModel{before: func() {
		// What Cancel stores, without its NOTIFY.
		if _, err := a.pool.Exec(context.Background(), `INSERT INTO cancels (thread_key) VALUES ('telegram:c:')`); err != nil {
			t.Error(err)
		}
	}}
	eng := agent.New(m, inboxOnly{}, agent.Config{Confirm: agent.ConfirmDestructive})
	bt := startBot(t, a, eng, c, 0, bot.Config{})
	in := bot.Incoming{Platform: "telegram", ChatID: "c", UserID: "42", DM: true, Text: "tidy my inbox", EventID: "e1", At: time.Now()}
	if err := bt.Handle(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		runs, err := a.ThreadRuns(t.Context(), "telegram:c:")
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 1 && runs[0].Status != bot.RunWorking && runs[0].Status != bot.RunQueued {
			if runs[0].Status != bot.RunCancelled {
				t.Errorf("the run after a /cancel stored during its step: %s, want %s", runs[0].Status, bot.RunCancelled)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end: %+v", runs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := bt.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	posts := strings.Join(c.posts["c"], " | ")
	c.mu.Unlock()
	if !strings.Contains(posts, "Stopped, as you asked.") || strings.Contains(posts, "couldn't finish") || strings.Contains(posts, "did: ") {
		t.Errorf("the chat after a /cancel stored during the run: %q", posts)
	}
	if n := m.calls.Load(); n != 1 {
		t.Errorf("model calls: %d, want 1 (the run stops at the refused save)", n)
	}
}
