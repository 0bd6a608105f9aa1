package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

// TestTimerClaimsDoNotLapseBehindTheBatch: a timer pass used to claim up
// to 50 due timers at once, each for timerLease (5 min), then run their
// handlers one after another. When the handlers before it took longer
// than the lease all together (Todoist slow or rate limited), a timer's
// claim lapsed before its own handler started: another replica's pass
// claimed and ran it, then this pass ran it too (issue 35).
// architecture.md: "Autopilot's timer gives one look per person per
// interval however many replicas run". Now each timer is claimed just
// before its handler, its lease on the database's clock.
func TestTimerClaimsDoNotLapseBehindTheBatch(t *testing.T) {
	a, b := twoReplicas(t)
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2026, 3, 29, 7, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ran := map[string][]string{}
	var botB *bot.Bot
	handler := func(name string) bot.TimerHandler {
		return func(ctx context.Context, tm bot.Timer) (time.Time, error) {
			mu.Lock()
			ran[tm.Key] = append(ran[tm.Key], name)
			mu.Unlock()
			if name == "A" && tm.Key == "person-00" {
				// A slow look (or several before it): 6 minutes pass,
				// and B's pass comes meanwhile.
				mu.Lock()
				now = now.Add(6 * time.Minute)
				mu.Unlock()
				if _, err := botB.RunTimers(ctx); err != nil {
					t.Error(err)
				}
			}
			return clock().Add(time.Hour), nil
		}
	}
	botA := bot.New(a, echoAgent{}, bot.Config{Now: clock})
	botB = bot.New(b, echoAgent{}, bot.Config{Now: clock})
	botA.HandleTimer("rv-look", handler("A"))
	botB.HandleTimer("rv-look", handler("B"))
	for i := range 3 {
		if err := a.SetTimer(ctx, bot.Timer{Kind: "rv-look", Key: fmt.Sprintf("person-%02d", i), Due: now}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := botA.RunTimers(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for k, who := range ran {
		if k == "person-00" {
			continue // its own handler was the slow one: documented ("a handler that takes longer may find its timer handled twice")
		}
		if len(who) != 1 {
			t.Errorf("timer %s (its own handler instant) ran %d times in one interval (by %v), want once: its claim lapsed while the handlers before it in the batch ran", k, len(who), who)
		}
	}
}

// TestTimerLeaseIsOnTheDatabaseClock: a replica whose clock runs an hour
// ahead does not take a timer another claimed a moment ago: the lease
// is measured by the database, not by the claimant's now.
func TestTimerLeaseIsOnTheDatabaseClock(t *testing.T) {
	a, b := twoReplicas(t)
	ctx := context.Background()
	now := time.Now()
	if err := a.SetTimer(ctx, bot.Timer{Kind: "rv-look", Key: "p", Due: now}); err != nil {
		t.Fatal(err)
	}
	got, err := a.ClaimTimers(ctx, now, []string{"rv-look"}, "a", 5*time.Minute, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v, %v", got, err)
	}
	again, err := b.ClaimTimers(ctx, now.Add(time.Hour), []string{"rv-look"}, "b", 5*time.Minute, 10)
	if err != nil || len(again) != 0 {
		t.Errorf("a replica an hour ahead claimed %v (%v); the lease is the database's", again, err)
	}
}
