package bot

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// TestAnswerDoesNotWaitForProgressEdits: while the platform answers
// every edit of the status message with a 429 (Retry-After 30 s), the
// run's end is not held for the edits' retries (it was, five times
// Retry-After per edit): a progress edit that is rate limited, or finds
// the platform paused, is dropped (a later one shows the same lines),
// and the answer is posted once the platform's pause is over.
func TestAnswerDoesNotWaitForProgressEdits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const after = 30 * time.Second
		var (
			mu       sync.Mutex
			edits    int
			ended    time.Time
			answered time.Time
		)
		plat := newTelegram()
		plat.onEdit = func(string, Outgoing) error {
			mu.Lock()
			defer mu.Unlock()
			edits++
			return RetryLater(errors.New("429 too many requests"), after)
		}
		plat.onSend = func(m Outgoing) error {
			if strings.HasPrefix(m.Text, "did: ") {
				mu.Lock()
				answered = time.Now()
				mu.Unlock()
			}
			return nil
		}
		ag := &mockAgent{StartFn: scripted(func(ctx context.Context, h agent.Hooks) {
			for i, s := range []string{"🔎 Read the inbox: 9 tasks", "📁 Created Birthday", "➡️ Moved 9 tasks"} {
				if i > 0 {
					time.Sleep(3 * time.Second)
				}
				h.Observe(agent.Event{Kind: agent.EventAction, Summary: s})
			}
			mu.Lock()
			ended = time.Now()
			mu.Unlock()
		})}
		h := startHarness(t, ag, plat, Config{Workers: 1, AllowedUsers: []string{"telegram:42"}})
		h.handle(t, msg("tidy", "e1"))
		time.Sleep(time.Hour)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if answered.IsZero() {
			t.Fatal("the answer was never posted")
		}
		if wait := answered.Sub(ended); wait > after {
			t.Errorf("the answer was posted %v after the run ended, want at most one Retry-After (%v)", wait, after)
		}
		if edits > 3 {
			t.Errorf("%d edits tried for 3 progress lines under 429s, want at most 3", edits)
		}
	})
}
