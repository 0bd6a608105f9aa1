package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

// TestCancelOnAnotherReplicaDuringTheFirstStep: replica A runs a
// message's run, waiting for the model's first reply (the run is not
// stored until its first save: only its job is). The person's /cancel
// reaches replica B, which stores it (the job stands for the run) and
// wakes A: the run stops, as on one process. (Issue 35: B found no run,
// answered "Nothing is running here." and A's run went on.)
func TestCancelOnAnotherReplicaDuringTheFirstStep(t *testing.T) {
	a, b := twoReplicas(t)
	c := &chats{posts: map[string][]string{}, by: map[int]int{}}
	calls, ended, release := make(chan int, 8), make(chan int, 8), make(chan struct{})
	start := func(i int, st *Store) *bot.Bot {
		return startBot(t, st, gateAgent{i, calls, ended, release}, c, i, bot.Config{})
	}
	botA := start(0, a)
	in := bot.Incoming{Platform: "telegram", ChatID: "c", UserID: "42", DM: true, Text: "delete all my tasks", EventID: "e1", At: time.Now()}
	if err := botA.Handle(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-calls:
		if id != 0 {
			t.Fatalf("run began on bot %d", id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no model call")
	}
	botB := start(1, b)
	cancel := bot.Incoming{Platform: "telegram", ChatID: "c", UserID: "42", DM: true, Command: "cancel", EventID: "e2", At: time.Now()}
	if err := botB.Handle(t.Context(), cancel); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
		// stopped, as on one process
	case <-time.After(5 * time.Second):
		close(release) // the model answers: the run goes on to its end
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_ = botA.WaitIdle(ctx) // its posts are in the chat
		c.mu.Lock()
		defer c.mu.Unlock()
		t.Fatalf("/cancel sent to replica B did not stop the run on A within 5 s; the chat shows: %q", strings.Join(c.posts["c"], " | "))
	}
}

// saveAgent saves one step once released, then ends as the engine does
// when a save fails; the save's error goes to saved.
type saveAgent struct {
	calls   chan int
	release chan struct{}
	saved   chan error
}

func (g saveAgent) Start(ctx context.Context, in agent.Input, h agent.Hooks) agent.Outcome {
	g.calls <- 0
	<-g.release
	tr := &agent.Transcript{V: agent.TranscriptVersion, Instruction: in.Instruction}
	err := h.Save(ctx, tr)
	g.saved <- err
	if err != nil {
		tr.Status = agent.StatusInterrupted
		return agent.Outcome{Status: agent.StatusInterrupted, Err: err, Transcript: tr}
	}
	tr.Status = agent.StatusDone
	return agent.Outcome{Status: agent.StatusDone, Answer: "did: " + in.Instruction, Transcript: tr}
}

func (g saveAgent) Resume(ctx context.Context, tr *agent.Transcript, _ string, h agent.Hooks) agent.Outcome {
	return g.Start(ctx, agent.Input{Instruction: tr.Instruction}, h)
}

func (saveAgent) Undo(context.Context, []agent.Applied) (agent.UndoReport, error) {
	return agent.UndoReport{}, nil
}

// TestCancelStoredRefusesTheNextSave: a /cancel stored for a
// conversation (its notification lost, and before the sweep reads the
// cancels) while its run waits for the model refuses the run's next
// save, the step's own transaction reading the cancels with the lease
// (bot.CancelFence: no read of their own a step): the save fails with
// bot.ErrCancelStored, and the run stops as /cancel stops it.
func TestCancelStoredRefusesTheNextSave(t *testing.T) {
	t.Parallel()
	a, _ := twoReplicas(t)
	c := &chats{posts: map[string][]string{}, by: map[int]int{}}
	g := saveAgent{calls: make(chan int, 8), release: make(chan struct{}), saved: make(chan error, 8)}
	bt := startBot(t, a, g, c, 0, bot.Config{})
	in := bot.Incoming{Platform: "telegram", ChatID: "c", UserID: "42", DM: true, Text: "delete all my tasks", EventID: "e1", At: time.Now()}
	if err := bt.Handle(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.calls:
	case <-time.After(20 * time.Second):
		t.Fatal("no model call")
	}
	// What Cancel stores, without its NOTIFY.
	if _, err := a.pool.Exec(t.Context(), `INSERT INTO cancels (thread_key) VALUES ('telegram:c:')`); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	select {
	case err := <-g.saved:
		if !errors.Is(err, bot.ErrCancelStored) {
			t.Fatalf("the step's save after a stored /cancel: %v, want bot.ErrCancelStored", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no save")
	}
	if err := bt.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	posts := strings.Join(c.posts["c"], " | ")
	c.mu.Unlock()
	if !strings.Contains(posts, "Stopped, as you asked.") || strings.Contains(posts, "did: ") {
		t.Errorf("the chat after a /cancel stored during the run: %q", posts)
	}
}

// TestCancelOfAQueuedMessageStopsItsRun: a person's message waits as a
// job (its conversation is leased by replica B, which has not begun it)
// and their /cancel reaches replica A, which answers that it stops the
// run; when the run then begins (on A, once B let the conversation go),
// its first save must be refused as a /cancel stored since it began
// would refuse it: the person was told it stops.
func TestCancelOfAQueuedMessageStopsItsRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoReplicas(t)
	const key = "telegram:c:"
	if ok, err := b.Hold(ctx, key); err != nil || !ok {
		t.Fatalf("B holds %s: %v %v", key, ok, err)
	}
	c := &chats{posts: map[string][]string{}, by: map[int]int{}}
	g := saveAgent{calls: make(chan int, 8), release: make(chan struct{}), saved: make(chan error, 8)}
	bt := startBot(t, a, g, c, 0, bot.Config{})
	in := bot.Incoming{Platform: "telegram", ChatID: "c", UserID: "42", DM: true, Text: "delete all my tasks", EventID: "e1", At: time.Now()}
	if err := bt.Handle(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	cancel := bot.Incoming{Platform: "telegram", ChatID: "c", UserID: "42", DM: true, Command: "cancel", EventID: "e2", At: time.Now()}
	if err := bt.Handle(t.Context(), cancel); err != nil {
		t.Fatal(err)
	}
	releaseAndWantRefused(t, b, key, c, g, "a run whose message was cancelled while queued")
}

// TestCancelStopsTheRunNotTheMessageQueuedBehindIt: a /cancel sent
// while a run works (in its first step: only its job is stored) and the
// person's next message waits behind it stops that run only, as on one
// process: the next message's run begins after it and saves.
func TestCancelStopsTheRunNotTheMessageQueuedBehindIt(t *testing.T) {
	t.Parallel()
	a, _ := twoReplicas(t)
	c := &chats{posts: map[string][]string{}, by: map[int]int{}}
	g := saveAgent{calls: make(chan int, 8), release: make(chan struct{}), saved: make(chan error, 8)}
	bt := startBot(t, a, g, c, 0, bot.Config{})
	first := bot.Incoming{Platform: "telegram", ChatID: "c", UserID: "42", DM: true, Text: "delete all my tasks", EventID: "e1", At: time.Now()}
	if err := bt.Handle(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.calls:
	case <-time.After(20 * time.Second):
		t.Fatal("no model call")
	}
	next := bot.Incoming{Platform: "telegram", ChatID: "c", UserID: "42", DM: true, Text: "add milk", EventID: "e2", At: time.Now()}
	if err := bt.Handle(t.Context(), next); err != nil {
		t.Fatal(err)
	}
	// The /cancel as another replica stores it (its NOTIFY stops the
	// run here, or its save is refused).
	if ok, err := a.Cancel(t.Context(), "telegram:c:"); err != nil || !ok {
		t.Fatalf("store the /cancel: %v %v", ok, err)
	}
	close(g.release)
	for i, refused := range []bool{true, false} {
		select {
		case err := <-g.saved:
			if (err != nil) != refused {
				t.Fatalf("save of run %d: %v, want refused %v", i+1, err, refused)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no save of run %d", i+1)
		}
	}
	if err := bt.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	posts := strings.Join(c.posts["c"], " | ")
	c.mu.Unlock()
	if !strings.Contains(posts, "did: add milk") || strings.Contains(posts, "did: delete") {
		t.Errorf("the chat: %q", posts)
	}
}

// TestCancelOfAStoredRunWaitingToResumeStopsIt: a run stored working
// by a replica that died waits to be resumed (its conversation still
// leased by the dead replica, here B holding it); the person's /cancel
// reaches replica A, which stores it and answers that it stops the run.
// When A resumes the run (once B let the conversation go), its first
// save must be refused: the cancel was stored for this run, so the
// resumed run's cancel mark must not take it in.
func TestCancelOfAStoredRunWaitingToResumeStopsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoReplicas(t)
	const key = "telegram:c:"
	if ok, err := b.Hold(ctx, key); err != nil || !ok {
		t.Fatalf("B holds %s: %v %v", key, ok, err)
	}
	now := time.Now()
	r := &bot.Run{ID: "r1", ThreadKey: key, Platform: "telegram", ChatID: "c", UserID: "42", DM: true,
		Status: bot.RunWorking, Instruction: "delete all my tasks", Created: now, Updated: now}
	if err := b.Commit(ctx, bot.Change{Run: r}); err != nil {
		t.Fatal(err)
	}
	c := &chats{posts: map[string][]string{}, by: map[int]int{}}
	g := saveAgent{calls: make(chan int, 8), release: make(chan struct{}), saved: make(chan error, 8)}
	bt := startBot(t, a, g, c, 0, bot.Config{})
	cancel := bot.Incoming{Platform: "telegram", ChatID: "c", UserID: "42", DM: true, Command: "cancel", EventID: "e2", At: time.Now()}
	if err := bt.Handle(t.Context(), cancel); err != nil {
		t.Fatal(err)
	}
	releaseAndWantRefused(t, b, key, c, g, "a stored run cancelled while it waited to resume")
}

// releaseAndWantRefused waits for A's answer to the /cancel (sent
// after the cancel is stored), lets B release key, and wants the first
// save of the run A then begins refused as a stored /cancel would refuse
// it. A run that never begins on A fails the test: the promise checked
// is that run's refusal.
func releaseAndWantRefused(t *testing.T, b *Store, key string, c *chats, g saveAgent, run string) {
	t.Helper()
	told := waitForPost(t, c, "c", "Stopping at the next step…", 20*time.Second)
	if _, err := b.Release(context.Background(), key, false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.calls:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not begin on A within 20 s of B releasing %s (the chat: %q)", run, key, told)
	}
	close(g.release)
	select {
	case err := <-g.saved:
		if !errors.Is(err, bot.ErrCancelStored) {
			t.Errorf("the first save of %s (the chat said %q): %v, want bot.ErrCancelStored", run, told, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no save")
	}
}

// waitForPost waits up to limit for a post in chat holding want, and
// returns the chat's posts; it fails the test when none comes.
func waitForPost(t *testing.T, c *chats, chat, want string, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		c.mu.Lock()
		posts := strings.Join(c.posts[chat], " | ")
		c.mu.Unlock()
		if strings.Contains(posts, want) {
			return posts
		}
		if time.Now().After(deadline) {
			t.Fatalf("no post %q in chat %s within %v; the chat: %q", want, chat, limit, posts)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
