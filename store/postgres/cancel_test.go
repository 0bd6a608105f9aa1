package postgres

import (
	"strings"
	"testing"
	"time"

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
		time.Sleep(2 * time.Second)
		c.mu.Lock()
		defer c.mu.Unlock()
		t.Fatalf("/cancel sent to replica B did not stop the run on A within 5 s; the chat shows: %q", strings.Join(c.posts["c"], " | "))
	}
}
