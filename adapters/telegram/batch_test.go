package telegram_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

// gated holds chat 42's first update until chat 43's update was handed
// over: stored one after another, as polling did before, the second
// never comes and the first gives up.
type gated struct {
	recorder
	other chan struct{}
	once  sync.Once
	// failOnce fails the first "b" of chat 42 (a store briefly down).
	failOnce bool
	failed   bool
}

func (g *gated) Handle(ctx context.Context, in bot.Incoming) error {
	switch {
	case in.ChatID == "43":
		g.once.Do(func() { close(g.other) })
	case in.ChatID == "42" && in.Text == "a":
		select {
		case <-g.other:
		case <-time.After(5 * time.Second):
			return errors.New("chat 43 was not stored meanwhile: the batch is stored one update after another")
		}
	case in.ChatID == "42" && in.Text == "b":
		g.mu.Lock()
		fail := g.failOnce && !g.failed
		g.failed = g.failed || fail
		g.mu.Unlock()
		if fail {
			return errors.New("disk full")
		}
	}
	return g.recorder.Handle(ctx, in)
}

// TestPollStoresChatsAtOnceInOrder: the updates of one getUpdates answer
// are stored chat by chat at once, each chat's in order; an update not
// stored holds its chat's later ones and is not confirmed, and is stored
// once when delivered again.
func TestPollStoresChatsAtOnceInOrder(t *testing.T) {
	for _, fail := range []bool{false, true} {
		a, srv := newAdapter(t, "")
		srv.PushText(42, 7, "a")
		srv.PushText(43, 8, "x")
		srv.PushText(42, 7, "b")
		srv.PushText(42, 7, "c")
		h := &gated{other: make(chan struct{}), failOnce: fail}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Poll(ctx, h) }()
		deadline := time.Now().Add(10 * time.Second)
		for (srv.Pending() > 0 || len(h.got()) < 4) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		var chat42 []string
		seen := map[string]int{}
		for _, in := range h.got() {
			seen[in.EventID]++
			if in.ChatID == "42" {
				chat42 = append(chat42, in.Text)
			}
		}
		// A redelivered update already stored reaches the handler again
		// (the bot drops it by its event id); chat 42's order holds.
		if len(chat42) < 3 || chat42[0] != "a" || chat42[len(chat42)-2] != "b" || chat42[len(chat42)-1] != "c" {
			t.Errorf("fail=%v: chat 42 got %v, want a, b, c in order", fail, chat42)
		}
		if len(seen) != 4 {
			t.Errorf("fail=%v: handed over %v, want the 4 updates", fail, seen)
		}
		if srv.Pending() != 0 {
			t.Errorf("fail=%v: %d updates not confirmed", fail, srv.Pending())
		}
	}
}
