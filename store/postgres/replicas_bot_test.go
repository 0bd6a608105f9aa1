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
		bt := bot.New(st, echoAgent{}, bot.Config{Workers: 2, AllowedUsers: []string{"telegram:42"}})
		bt.AddPlatform(chatPlatform{c, i})
		if err := bt.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bt.Stop)
		bots = append(bots, bt)
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
