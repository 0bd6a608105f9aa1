package postgres

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

// markFailsOnce is a Store whose first CancelMark fails, as a read on a
// cut connection does. It makes a job's first reads one by one
// (bot.ReadStart), so that its CancelMark is the one they call.
type markFailsOnce struct {
	*Store
	failed atomic.Bool
}

func (s *markFailsOnce) ReadStart(ctx context.Context, q bot.StartQuery) (bot.StartReads, error) {
	return bot.ReadStart(ctx, s, q)
}

func (s *markFailsOnce) CancelMark(ctx context.Context, key, jobID, runID string) (int64, error) {
	if s.failed.CompareAndSwap(false, true) {
		return 0, errors.New("conn closed")
	}
	return s.Store.CancelMark(ctx, key, jobID, runID)
}

// TestCancelMarkUnreadDoesNotLetAnOldCancelStopTheRun: a /cancel of a
// conversation's past, then a message there whose run cannot read the
// conversation's cancels as it begins (a cut link). The run must not
// take a mark of 0, under which that old /cancel refuses its every save:
// it does not begin, its job stays stored, and the replica that takes
// the conversation next runs it and saves. (Before, the run began with
// mark 0 and its first save failed with bot.ErrCancelStored.)
func TestCancelMarkUnreadDoesNotLetAnOldCancelStopTheRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoReplicas(t)
	const key = "telegram:c:"
	if _, err := a.pool.Exec(ctx, `INSERT INTO cancels (thread_key) VALUES ($1)`, key); err != nil {
		t.Fatal(err)
	}
	c := &chats{posts: map[string][]string{}, by: map[int]int{}}
	g := saveAgent{calls: make(chan int, 8), release: make(chan struct{}), saved: make(chan error, 8)}
	close(g.release)
	cfg := bot.Config{Workers: 2, AllowedUsers: []string{"telegram:42"}}
	botA := bot.New(&markFailsOnce{Store: a}, g, cfg)
	botA.AddPlatform(chatPlatform{c, 0})
	if err := botA.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(botA.Stop)
	in := bot.Incoming{Platform: "telegram", ChatID: "c", UserID: "42", DM: true, Text: "add milk", EventID: "e1", At: time.Now()}
	if err := botA.Handle(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	// Replica B, taking the conversation once A lets it go.
	startBot(t, b, g, c, 1, bot.Config{})
	select {
	case err := <-g.saved:
		if err != nil {
			t.Fatalf("the first save of a run begun after an old /cancel, its cancels unread at first: %v, want nil", err)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("the message's run did not save within 25 s")
	}
}
