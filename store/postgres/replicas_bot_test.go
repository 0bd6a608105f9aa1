package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

// echoAgent answers each instruction at once with "did: " and it.
type echoAgent struct{}

func (echoAgent) Start(_ context.Context, in agent.Input, _ agent.Hooks) agent.Outcome {
	time.Sleep(time.Millisecond) // runs overlap
	tr := &agent.Transcript{V: agent.TranscriptVersion, Instruction: in.Instruction, Status: agent.StatusDone}
	return agent.Outcome{Status: agent.StatusDone, Answer: "did: " + in.Instruction, Transcript: tr}
}

func (echoAgent) Resume(_ context.Context, tr *agent.Transcript, _ string, _ agent.Hooks) agent.Outcome {
	tr.Status = agent.StatusDone
	return agent.Outcome{Status: agent.StatusDone, Answer: "resumed", Transcript: tr}
}

func (echoAgent) Undo(context.Context, []agent.Applied) (agent.UndoReport, error) {
	return agent.UndoReport{}, nil
}

// chats records what every bot posted, by chat, in order.
type chats struct {
	mu    sync.Mutex
	posts map[string][]string
	by    map[int]int // answers posted by each bot
}

type chatPlatform struct {
	c  *chats
	id int
}

func (p chatPlatform) Name() string { return "telegram" }

func (p chatPlatform) Send(_ context.Context, m bot.Outgoing) (string, error) {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	p.c.posts[m.ChatID] = append(p.c.posts[m.ChatID], m.Text)
	if strings.HasPrefix(m.Text, "did: ") {
		p.c.by[p.id]++
	}
	return fmt.Sprint(len(p.c.posts[m.ChatID])), nil
}

// startBot starts bot i of a test on st: model ag, two workers,
// telegram:42 allowed (with cfg's other fields), its posts recorded in
// c; it stops at the test's end.
func startBot(t *testing.T, st *Store, ag bot.Agent, c *chats, i int, cfg bot.Config) *bot.Bot {
	t.Helper()
	cfg.Workers, cfg.AllowedUsers = 2, []string{"telegram:42"}
	bt := bot.New(st, ag, cfg)
	bt.AddPlatform(chatPlatform{c, i})
	if err := bt.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bt.Stop)
	return bt
}

// TestTwoBotsShareTheWork runs two bots in this process, each on its own
// store (as two replicas) on one database, under the race detector in
// make test: messages handed to either are each answered once, every
// conversation's in order, and both bots do some of the work.
func TestTwoBotsShareTheWork(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t)
	c := &chats{posts: map[string][]string{}, by: map[int]int{}}
	var bots []*bot.Bot
	for i, st := range []*Store{a, b} {
		bots = append(bots, startBot(t, st, echoAgent{}, c, i, bot.Config{}))
	}
	const people, each = 8, 6
	var wg sync.WaitGroup
	for p := range people {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range each {
				in := bot.Incoming{Platform: "telegram", ChatID: fmt.Sprint("c", p), UserID: "42", DM: true,
					Text: fmt.Sprintf("m%d", m), EventID: fmt.Sprintf("e%d-%d", p, m), At: time.Now()}
				if err := bots[(p+m)%2].Handle(t.Context(), in); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	answers := func(p int) []string {
		c.mu.Lock()
		defer c.mu.Unlock()
		var out []string
		for _, s := range c.posts[fmt.Sprint("c", p)] {
			if a, ok := strings.CutPrefix(s, "did: "); ok {
				out = append(out, a)
			}
		}
		return out
	}
	deadline := time.Now().Add(20 * time.Second)
	for p := 0; p < people; {
		if len(answers(p)) >= each {
			p++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("person %d: answers %v", p, answers(p))
		}
		time.Sleep(10 * time.Millisecond)
	}
	for p := range people {
		got := answers(p)
		want := make([]string, each)
		for m := range want {
			want[m] = fmt.Sprint("m", m)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("person %d: answers %v, want %v", p, got, want)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by[0] == 0 || c.by[1] == 0 {
		t.Errorf("answers by each bot: %v; want both to work", c.by)
	}
}

// gateAgent answers each instruction with "did: " and it once the test
// closes release; a call whose run is interrupted first ends
// interrupted. calls gets the id of its bot as each call begins, and
// ended as each interrupted call ends.
type gateAgent struct {
	id           int
	calls, ended chan int
	release      chan struct{}
}

func (g gateAgent) call(ctx context.Context, instruction string) agent.Outcome {
	g.calls <- g.id
	select {
	case <-g.release:
		tr := &agent.Transcript{V: agent.TranscriptVersion, Instruction: instruction, Status: agent.StatusDone}
		return agent.Outcome{Status: agent.StatusDone, Answer: "did: " + instruction, Transcript: tr}
	case <-ctx.Done():
		g.ended <- g.id
		return agent.Outcome{Status: agent.StatusInterrupted, Err: ctx.Err()}
	}
}

func (g gateAgent) Start(ctx context.Context, in agent.Input, _ agent.Hooks) agent.Outcome {
	return g.call(ctx, in.Instruction)
}

func (g gateAgent) Resume(ctx context.Context, tr *agent.Transcript, _ string, _ agent.Hooks) agent.Outcome {
	return g.call(ctx, tr.Instruction)
}

func (gateAgent) Undo(context.Context, []agent.Applied) (agent.UndoReport, error) {
	return agent.UndoReport{}, nil
}

// settled waits for bots to be idle (their runs ended, what they
// queued posted), then fails the test unless s holds no work a replica
// could take up later (a job, a working or queued run, an outbox
// entry: what Pending reads), so that nothing more is posted.
func settled(t *testing.T, s *Store, bots ...*bot.Bot) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for i, bt := range bots {
		if err := bt.WaitIdle(ctx); err != nil {
			t.Fatalf("bot %d idle: %v", i, err)
		}
	}
	jobs, err := s.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := s.Runs(ctx, bot.RunWorking, bot.RunQueued)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Outbox(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs)+len(runs)+len(out) > 0 {
		t.Errorf("work left once the bots are idle: %d jobs, %d unfinished runs, %d outbox entries; a replica's sweep would take it up", len(jobs), len(runs), len(out))
	}
}

// leasePID returns the server process of s's lease connection.
func leasePID(t *testing.T, s *Store) uint32 {
	t.Helper()
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	if s.leases.conn == nil {
		t.Fatal("no lease connection")
	}
	return s.leases.conn.PgConn().PID()
}

// TestReplicaThatLosesItsLeasesStopsItsRuns: when the lease connection
// of replica A is killed while a run of A waits for the model, A
// interrupts the run (it does not post its answer), and the run goes
// on where its conversation is leased next: its answer is posted once.
func TestReplicaThatLosesItsLeasesStopsItsRuns(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t)
	c := &chats{posts: map[string][]string{}, by: map[int]int{}}
	calls, ended, release := make(chan int, 8), make(chan int, 8), make(chan struct{})
	start := func(i int, st *Store) *bot.Bot {
		return startBot(t, st, gateAgent{i, calls, ended, release}, c, i, bot.Config{})
	}
	botA := start(0, a)
	in := bot.Incoming{Platform: "telegram", ChatID: "c", UserID: "42", DM: true, Text: "tidy", EventID: "e1", At: time.Now()}
	if err := botA.Handle(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	wait := func(ch <-chan int, what string) int {
		t.Helper()
		select {
		case id := <-ch:
			return id
		case <-time.After(20 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
			return 0
		}
	}
	if id := wait(calls, "the run's model call"); id != 0 {
		t.Fatalf("the run began on bot %d, want 0 (A)", id)
	}
	botB := start(1, b) // B only now, so that A runs the run

	pid := leasePID(t, a)
	var app string
	if err := a.pool.QueryRow(t.Context(), `SELECT application_name FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&app); err != nil {
		t.Fatal(err)
	}
	if app != leaseApp {
		t.Errorf("application_name of the lease connection: got %q, want %q", app, leaseApp)
	}
	var killed bool
	if err := a.pool.QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, pid).Scan(&killed); err != nil || !killed {
		t.Fatalf("kill the lease connection of A: %v, %v", killed, err)
	}
	// A interrupts its call, and one replica (A again, or B) calls the
	// model again, in either order.
	interrupted := false
	timeout := time.After(20 * time.Second)
	for again := false; !interrupted || !again; {
		select {
		case id := <-ended:
			if id != 0 {
				t.Fatalf("bot %d interrupted a run, want 0 (A)", id)
			}
			interrupted = true
		case <-calls:
			again = true
		case <-timeout:
			if !again {
				t.Fatal("timed out waiting for the run to go on")
			}
			t.Error("A did not interrupt its run after losing its lease")
			interrupted = true // the posts tell the rest
		}
	}
	close(release)

	answers := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.by[0] + c.by[1]
	}
	deadline := time.Now().Add(20 * time.Second)
	for answers() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the answer was not posted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	settled(t, a, botA, botB) // nothing left that could answer again
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.by[0] + c.by[1]; n != 1 {
		t.Errorf("answers posted: %d (by bot: %v), want 1; posts: %q", n, c.by, c.posts["c"])
	}
}
