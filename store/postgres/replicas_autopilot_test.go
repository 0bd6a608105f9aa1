package postgres

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

// inboxGate is a gateAgent whose Todoist inbox holds the tasks the test
// puts there (bot.InboxReader, what autopilot looks at).
type inboxGate struct {
	gateAgent
	mu    *sync.Mutex
	inbox *[]agent.Task
}

func (g inboxGate) Inbox(context.Context) ([]agent.Task, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]agent.Task(nil), *g.inbox...), nil
}

// TestAutopilotBatchRunsUnderTheConversationsLease: an autopilot look
// on replica A while replica B holds the conversation's lease (B's run
// there waits for the model) queues the batch where B's feeder takes
// it: the batch runs once, on B, after B's run, never on A beside it.
func TestAutopilotBatchRunsUnderTheConversationsLease(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t)
	c := &chats{posts: map[string][]string{}, by: map[int]int{}}
	calls, ended, release := make(chan int, 8), make(chan int, 8), make(chan struct{})
	var mu sync.Mutex
	var inbox []agent.Task
	var instrMu sync.Mutex
	var autopilotBy []int // the bot of each autopilot model call
	start := func(i int, st *Store) *bot.Bot {
		g := inboxGate{gateAgent{i, calls, ended, release}, &mu, &inbox}
		return startBot(t, st, recordingAgent{g, func(instr string) {
			if strings.HasPrefix(instr, bot.AutopilotPrefix) {
				instrMu.Lock()
				autopilotBy = append(autopilotBy, i)
				instrMu.Unlock()
			}
		}}, c, i, bot.Config{TimerEvery: 24 * time.Hour})
	}
	botB := start(1, b)
	in := bot.Incoming{Platform: "telegram", ChatID: "c", UserID: "42", DM: true, Text: "tidy", EventID: "e1", At: time.Now()}
	if err := botB.Handle(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-calls:
		if id != 1 {
			t.Fatalf("the run began on bot %d, want 1 (B)", id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for B's run")
	}
	botA := start(0, a) // only now, so that B holds the conversation

	ps, err := botA.Settings(t.Context(), "telegram", "42")
	if err != nil {
		t.Fatal(err)
	}
	if ps.Conversation != "telegram:c:" {
		t.Fatalf("conversation %q, want the direct chat", ps.Conversation)
	}
	ps.Autopilot = true
	if err := botA.SaveSettings(t.Context(), "telegram", "42", ps); err != nil {
		t.Fatal(err)
	}
	if err := botA.Autopilot(t.Context(), "telegram", "42"); err != nil { // the first look notes the empty inbox
		t.Fatal(err)
	}
	mu.Lock()
	inbox = append(inbox, agent.Task{ID: "t1", Content: "milk"})
	mu.Unlock()
	if err := botA.Autopilot(t.Context(), "telegram", "42"); err != nil { // queues the batch
		t.Fatal(err)
	}
	close(release)

	count := func() []int {
		instrMu.Lock()
		defer instrMu.Unlock()
		return append([]int(nil), autopilotBy...)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(count()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the batch did not run")
		}
		time.Sleep(10 * time.Millisecond)
	}
	settled(t, a, botA, botB) // nothing left that could run the batch again
	if got := count(); len(got) != 1 || got[0] != 1 {
		t.Errorf("the batch ran on bots %v, want once on bot 1 (B, the lease holder)", got)
	}
}

// recordingAgent tells seen the instruction of each run it starts.
type recordingAgent struct {
	inboxGate
	seen func(instruction string)
}

func (r recordingAgent) Start(ctx context.Context, in agent.Input, h agent.Hooks) agent.Outcome {
	r.seen(in.Instruction)
	return r.inboxGate.Start(ctx, in, h)
}
