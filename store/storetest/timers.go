package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

var allKinds = []string{"digest", "autopilot"}

func claimKeys(ts []bot.Timer) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Kind+"/"+t.Key)
	}
	return out
}

func testTimers(t *testing.T, open Open) {
	ctx := t.Context()
	s := fresh(t, open)
	if _, err := s.Timer(ctx, "digest", "telegram:1"); !errors.Is(err, bot.ErrNotFound) {
		t.Fatalf("Timer of none: %v, want ErrNotFound", err)
	}
	for _, tm := range []bot.Timer{
		{Kind: "digest", Key: "telegram:1", Due: t0.Add(time.Hour), Data: "2026-11-22"},
		{Kind: "digest", Key: "slack:U1", Due: t0},
		{Kind: "autopilot", Key: "telegram:1", Due: t0.Add(-time.Minute)},
		{Kind: "other", Key: "x", Due: t0.Add(-time.Hour)},
	} {
		if err := s.SetTimer(ctx, tm); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []bot.Timer{{Kind: "digest", Due: t0}, {Key: "k", Due: t0}, {Kind: "digest", Key: "k"}} {
		if err := s.SetTimer(ctx, bad); err == nil {
			t.Errorf("SetTimer(%+v): no error", bad)
		}
	}
	got, err := s.Timer(ctx, "digest", "telegram:1")
	if err != nil || !got.Due.Equal(t0.Add(time.Hour)) || got.Data != "2026-11-22" || got.Claim != "" {
		t.Errorf("Timer = %+v (%v)", got, err)
	}
	// Due at or before now, of the kinds asked, earliest first.
	due, err := s.ClaimTimers(ctx, t0, allKinds, "c1", 5*time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := fmt.Sprint(claimKeys(due)), "[autopilot/telegram:1 digest/slack:U1]"; g != w {
		t.Errorf("claimed %s, want %s", g, w)
	}
	for _, tm := range due {
		if tm.Claim != "c1" {
			t.Errorf("claimed %+v without its claim", tm)
		}
	}
	// Claimed: not again within the lease.
	if again, err := s.ClaimTimers(ctx, t0.Add(time.Minute), allKinds, "c2", 5*time.Minute, 10); err != nil || len(again) != 0 {
		t.Errorf("claimed again within the lease: %v (%v)", claimKeys(again), err)
	}
	// Finished: one rescheduled, one deleted.
	if err := s.FinishTimer(ctx, due[0], t0.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishTimer(ctx, due[1], time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Timer(ctx, "autopilot", "telegram:1"); err != nil || !got.Due.Equal(t0.Add(24*time.Hour)) || got.Claim != "" {
		t.Errorf("rescheduled timer = %+v (%v)", got, err)
	}
	if _, err := s.Timer(ctx, "digest", "slack:U1"); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("finished with no next time: %v, want ErrNotFound", err)
	}
	// A lapsed lease is claimed again; n bounds a claim. The lease is
	// a microsecond: lapsed by the next call on any store's clock (the
	// database's on PostgreSQL, the now passed on bbolt).
	if err := s.SetTimer(ctx, bot.Timer{Kind: "digest", Key: "slack:U2", Due: t0}); err != nil {
		t.Fatal(err)
	}
	first, err := s.ClaimTimers(ctx, t0.Add(2*time.Hour), allKinds, "c3", time.Microsecond, 1)
	if err != nil || len(first) != 1 {
		t.Fatalf("claim 1: %v (%v)", claimKeys(first), err)
	}
	lapsed, err := s.ClaimTimers(ctx, t0.Add(2*time.Hour+2*time.Minute), allKinds, "c4", time.Minute, 10)
	if err != nil || len(lapsed) != 2 {
		t.Errorf("after the lease: %v (%v), want the lapsed and the other", claimKeys(lapsed), err)
	}
	// The first claimant's finish no longer counts.
	if err := s.FinishTimer(ctx, first[0], time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Timer(ctx, first[0].Kind, first[0].Key); err != nil {
		t.Errorf("a lapsed claim's finish deleted the timer: %v", err)
	}
	if err := s.DeleteTimer(ctx, "digest", "telegram:1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTimer(ctx, "digest", "telegram:1"); err != nil {
		t.Errorf("delete of none: %v", err)
	}
	if _, err := s.Timer(ctx, "digest", "telegram:1"); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("deleted timer: %v", err)
	}
	// The kind no one asked for was never claimed.
	if got, err := s.Timer(ctx, "other", "x"); err != nil || got.Claim != "" {
		t.Errorf("timer of another kind = %+v (%v)", got, err)
	}
	check(t, s)
}

// testTimersClaimedOnce: claimants racing (replicas) get each due timer
// once between them.
func testTimersClaimedOnce(t *testing.T, open Open) {
	ctx := t.Context()
	s := fresh(t, open)
	const timers, claimants = 40, 4
	for i := range timers {
		if err := s.SetTimer(ctx, bot.Timer{Kind: "digest", Key: fmt.Sprint("p", i), Due: t0.Add(-time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for c := range claimants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := s.ClaimTimers(ctx, t0, allKinds, fmt.Sprint("c", c), time.Hour, 3)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, tm := range got {
					seen[tm.Key]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != timers {
		t.Errorf("%d timers claimed, want %d", len(seen), timers)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("timer %s claimed %d times", k, n)
		}
	}
}

// testTimerSetDuringClaimWins: a timer set again while claimed (a person
// changed their digest time) keeps the new time; the claimant's finish
// changes nothing.
func testTimerSetDuringClaimWins(t *testing.T, open Open) {
	ctx := t.Context()
	s := fresh(t, open)
	if err := s.SetTimer(ctx, bot.Timer{Kind: "digest", Key: "p", Due: t0}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ClaimTimers(ctx, t0, allKinds, "c1", time.Hour, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v (%v)", claimKeys(got), err)
	}
	if err := s.SetTimer(ctx, bot.Timer{Kind: "digest", Key: "p", Due: t0.Add(3 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishTimer(ctx, got[0], t0.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if tm, err := s.Timer(ctx, "digest", "p"); err != nil || !tm.Due.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("timer = %+v (%v), want due at the time set meanwhile", tm, err)
	}
}

// testTimerClaimExtended: a claim extended is not taken by another
// claimant after its first lease; one the timer was set again under is
// not extended.
func testTimerClaimExtended(t *testing.T, open Open) {
	ctx := t.Context()
	s := fresh(t, open)
	if err := s.SetTimer(ctx, bot.Timer{Kind: "digest", Key: "p", Due: t0}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ClaimTimers(ctx, t0, allKinds, "c1", time.Microsecond, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v (%v)", claimKeys(got), err)
	}
	if ok, err := s.ExtendTimer(ctx, t0, got[0], time.Hour); err != nil || !ok {
		t.Fatalf("extend a claim held: %v, %v; want true", ok, err)
	}
	if again, err := s.ClaimTimers(ctx, t0.Add(time.Minute), allKinds, "c2", time.Hour, 10); err != nil || len(again) != 0 {
		t.Errorf("claimed after the first lease although extended: %v (%v)", claimKeys(again), err)
	}
	if err := s.SetTimer(ctx, bot.Timer{Kind: "digest", Key: "p", Due: t0}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.ExtendTimer(ctx, t0, got[0], time.Hour); err != nil || ok {
		t.Errorf("extend a claim the timer was set again under: %v, %v; want false", ok, err)
	}
	if ok, err := s.ExtendTimer(ctx, t0, bot.Timer{Kind: "digest", Key: "none", Claim: "c1"}, time.Hour); err != nil || ok {
		t.Errorf("extend a timer that is not there: %v, %v; want false", ok, err)
	}
}

// testTimersSurviveReopen: timers are stored, so a restart finds them.
func testTimersSurviveReopen(t *testing.T, open Open) {
	ctx := t.Context()
	s, reopen := open(t)
	if err := s.SetTimer(ctx, bot.Timer{Kind: "digest", Key: "p", Due: t0, Data: "d"}); err != nil {
		t.Fatal(err)
	}
	s = reopen()
	got, err := s.ClaimTimers(ctx, t0.Add(time.Minute), allKinds, "c", time.Hour, 10)
	if err != nil || len(got) != 1 || got[0].Data != "d" || !got[0].Due.Equal(t0) {
		t.Fatalf("after reopen: %+v (%v)", got, err)
	}
	check(t, s)
}
