package outbound

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestSendQueueAfterItsLanesStopped: a call queued once the lanes have
// stopped is answered ErrStopped at once, never left in a lane that no
// one reads (which kept WaitIdle waiting and the answer unrecorded).
func TestSendQueueAfterItsLanesStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		quit := make(chan struct{})
		s := New("telegram", slog.New(slog.DiscardHandler), quit)
		stopped := make(chan struct{})
		go func() { s.Run(t.Context()); close(stopped) }()
		close(quit)
		<-stopped
		never := func(context.Context) error { t.Error("a call was made after the lanes stopped"); return nil }
		for i := range 20 { // a lane with room used to be picked half the time
			var got error
			s.PostThen(fmt.Sprint("c", i), "send", never, func(err error) { got = err })
			if !errors.Is(got, ErrStopped) {
				t.Fatalf("postThen after stop: %v, want ErrStopped", got)
			}
			if err := s.Do(t.Context(), fmt.Sprint("c", i), "edit", never); !errors.Is(err, ErrStopped) {
				t.Fatalf("do after stop: %v, want ErrStopped", err)
			}
		}
		if err := s.WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRateLimitHoldsOnlyItsChat: a 429 in one chat holds that chat's
// calls, in order, for the Retry-After, while another chat on the same
// lane is served at once (one 429 used to pause every lane).
func TestRateLimitHoldsOnlyItsChat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		quit := make(chan struct{})
		s := New("slack", slog.New(slog.DiscardHandler), quit)
		go s.Run(t.Context())
		other := ""
		for i := 0; other == ""; i++ {
			if k := fmt.Sprint("D", i); k != "D0" && s.Lane(k) == s.Lane("D0") {
				other = k
			}
		}
		const after = 30 * time.Second
		start := time.Now()
		var mu sync.Mutex
		var order []string
		at := map[string]time.Duration{}
		limited := true
		call := func(name string) func(context.Context) error {
			return func(context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				if name == "D0 answer" && limited {
					limited = false
					return RetryLater(errors.New("429"), after)
				}
				order = append(order, name)
				at[name] = time.Since(start)
				return nil
			}
		}
		s.Post("D0", "send", call("D0 answer"))
		s.Post("D0", "send", call("D0 details"))
		var skipped error
		s.PostDroppable("D0", "edit", call("D0 progress"), func(err error) { skipped = err })
		s.Post(other, "send", call("other answer"))
		if err := s.WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		if want := []string{"other answer", "D0 answer", "D0 details"}; fmt.Sprint(order) != fmt.Sprint(want) {
			t.Errorf("calls made %q, want %q", order, want)
		}
		if at["other answer"] != 0 {
			t.Errorf("the other chat's post waited %v behind a 429 it did not get", at["other answer"])
		}
		if at["D0 answer"] < after {
			t.Errorf("the limited chat was tried again after %v, want its Retry-After %v", at["D0 answer"], after)
		}
		if !errors.Is(skipped, ErrSkipped) {
			t.Errorf("a progress edit behind the 429: %v, want ErrSkipped", skipped)
		}
		close(quit)
	})
}

// TestDroppedEditKeepsItsChatQuiet: after a progress edit's 429 the
// chat's next edits are dropped without a call until the Retry-After
// is over, while another chat's edit is made.
func TestDroppedEditKeepsItsChatQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		quit := make(chan struct{})
		defer close(quit)
		s := New("telegram", slog.New(slog.DiscardHandler), quit)
		go s.Run(t.Context())
		var mu sync.Mutex
		calls := map[string]int{}
		edit := func(chat string) func(context.Context) error {
			return func(context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				calls[chat]++
				if chat == "A" {
					return RetryLater(errors.New("429"), 10*time.Second)
				}
				return nil
			}
		}
		results := map[string][]error{}
		post := func(chat string) {
			done := make(chan struct{})
			s.PostDroppable(chat, "edit", edit(chat), func(err error) { results[chat] = append(results[chat], err); close(done) })
			<-done
		}
		post("A")
		post("A")
		post("B")
		time.Sleep(11 * time.Second)
		post("A")
		if calls["A"] != 2 || calls["B"] != 1 {
			t.Errorf("calls %v, want A's second edit dropped without a call, B's made, A's after the pause made", calls)
		}
		for _, err := range results["A"] {
			if !errors.Is(err, ErrSkipped) {
				t.Errorf("an edit of the limited chat: %v, want ErrSkipped", err)
			}
		}
	})
}
