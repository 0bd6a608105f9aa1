package bot

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// timerStore is a memStore that keeps timers too (the stores' own
// timers are held to storetest's conformance suite).
type timerStore struct {
	*memStore
	tmu    sync.Mutex
	timers map[[2]string]timerRec
	// beforeDelete, when set, is called as DeleteTimer begins.
	beforeDelete func()
}

type timerRec struct {
	Timer
	lease time.Time
}

var _ TimerStore = (*timerStore)(nil)

func newTimerStore() *timerStore {
	return &timerStore{memStore: newMemStore(), timers: map[[2]string]timerRec{}}
}

func (s *timerStore) SetTimer(_ context.Context, t Timer) error {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	t.Claim = ""
	s.timers[[2]string{t.Kind, t.Key}] = timerRec{Timer: t}
	return nil
}

func (s *timerStore) Timer(_ context.Context, kind, key string) (Timer, error) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	r, ok := s.timers[[2]string{kind, key}]
	if !ok {
		return Timer{}, ErrNotFound
	}
	return r.Timer, nil
}

func (s *timerStore) DeleteTimer(_ context.Context, kind, key string) error {
	if s.beforeDelete != nil {
		s.beforeDelete()
	}
	s.tmu.Lock()
	defer s.tmu.Unlock()
	delete(s.timers, [2]string{kind, key})
	return nil
}

func (s *timerStore) ClaimTimers(_ context.Context, now time.Time, kinds []string, claim string, lease time.Duration, n int) ([]Timer, error) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	var out []Timer
	for k, r := range s.timers {
		if len(out) < n && slices.Contains(kinds, r.Kind) && !r.Due.After(now) && !r.lease.After(now) {
			r.Claim, r.lease = claim, now.Add(lease)
			s.timers[k] = r
			out = append(out, r.Timer)
		}
	}
	slices.SortFunc(out, func(a, b Timer) int { return a.Due.Compare(b.Due) })
	return out, nil
}

func (s *timerStore) ExtendTimer(_ context.Context, now time.Time, t Timer, lease time.Duration) (bool, error) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	k := [2]string{t.Kind, t.Key}
	r, ok := s.timers[k]
	if !ok || r.Claim != t.Claim || t.Claim == "" {
		return false, nil
	}
	r.lease = now.Add(lease)
	s.timers[k] = r
	return true, nil
}

func (s *timerStore) FinishTimer(_ context.Context, t Timer, next time.Time) error {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	k := [2]string{t.Kind, t.Key}
	r, ok := s.timers[k]
	if !ok || r.Claim != t.Claim || t.Claim == "" {
		return nil
	}
	if next.IsZero() {
		delete(s.timers, k)
		return nil
	}
	s.timers[k] = timerRec{Timer: Timer{Kind: t.Kind, Key: t.Key, Due: next, Data: r.Data}}
	return nil
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestRunTimersFiresDueTimersOnceAndReschedules(t *testing.T) {
	ctx := t.Context()
	st := newTimerStore()
	clk := &clock{now: time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC)}
	b := New(st, &mockAgent{}, Config{Now: clk.Now})
	var fired []string
	b.HandleTimer("tick", func(_ context.Context, tm Timer) (time.Time, error) {
		fired = append(fired, tm.Key+"@"+clk.Now().Format("15:04"))
		if tm.Key == "once" {
			return time.Time{}, nil
		}
		return tm.Due.Add(time.Hour), nil
	})
	for _, tm := range []Timer{
		{Kind: "tick", Key: "once", Due: clk.Now().Add(30 * time.Minute)},
		{Kind: "tick", Key: "hourly", Due: clk.Now().Add(time.Hour)},
		{Kind: "unhandled", Key: "x", Due: clk.Now()},
	} {
		if err := b.SetTimer(ctx, tm); err != nil {
			t.Fatal(err)
		}
	}
	run := func() int {
		t.Helper()
		n, err := b.RunTimers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := run(); n != 0 {
		t.Errorf("ran %d timers before any was due", n)
	}
	clk.Set(clk.Now().Add(30 * time.Minute))
	if n := run(); n != 1 || fired[0] != "once@07:30" {
		t.Errorf("at 07:30 ran %d: %v", n, fired)
	}
	if n := run(); n != 0 {
		t.Errorf("ran %d again at the same time", n)
	}
	clk.Set(clk.Now().Add(3 * time.Hour)) // 10:30: the hourly one is late
	run()
	if tm, err := st.Timer(ctx, "tick", "hourly"); err != nil || !tm.Due.Equal(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("hourly timer after firing = %+v (%v)", tm, err)
	}
	if _, err := st.Timer(ctx, "tick", "once"); !errors.Is(err, ErrNotFound) {
		t.Errorf("one-off timer left: %v", err)
	}
	if tm, _ := st.Timer(ctx, "unhandled", "x"); tm.Claim != "" {
		t.Errorf("a timer without a handler was claimed: %+v", tm)
	}
}

func TestRunTimersRetriesAFailedHandler(t *testing.T) {
	ctx := t.Context()
	st := newTimerStore()
	clk := &clock{now: time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC)}
	b := New(st, &mockAgent{}, Config{Now: clk.Now})
	calls := 0
	b.HandleTimer("tick", func(context.Context, Timer) (time.Time, error) {
		calls++
		if calls == 1 {
			return time.Time{}, errors.New("Todoist is down")
		}
		return time.Time{}, nil
	})
	if err := b.SetTimer(ctx, Timer{Kind: "tick", Key: "k", Due: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RunTimers(ctx); err != nil {
		t.Fatal(err)
	}
	tm, err := st.Timer(ctx, "tick", "k")
	if err != nil || !tm.Due.Equal(clk.Now().Add(timerRetry)) {
		t.Fatalf("after a failure the timer = %+v (%v), want due again in %s", tm, err, timerRetry)
	}
	clk.Set(tm.Due)
	if _, err := b.RunTimers(ctx); err != nil || calls != 2 {
		t.Fatalf("retry: calls %d (%v)", calls, err)
	}
}

func TestTimerLoopRunsDueTimersAtStart(t *testing.T) {
	st := newTimerStore()
	clk := &clock{now: time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)}
	b := New(st, &mockAgent{}, Config{Now: clk.Now})
	fired := make(chan Timer, 1)
	b.HandleTimer("tick", func(_ context.Context, tm Timer) (time.Time, error) {
		fired <- tm
		return time.Time{}, nil
	})
	// Due while the bot was down.
	if err := st.SetTimer(t.Context(), Timer{Kind: "tick", Key: "missed", Due: clk.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	select {
	case tm := <-fired:
		if tm.Key != "missed" {
			t.Errorf("fired %+v", tm)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the timer due during downtime did not fire at start")
	}
}

// TestServesPerson: the digest and autopilot go on for a person the
// allowed users still name (issue 34, defect 6), also by a team mode
// entry for their platform or workspace, and stop otherwise.
func TestServesPerson(t *testing.T) {
	for _, tc := range []struct {
		name    string
		allowed []string
		team    bool
		want    bool
	}{
		{"named", []string{"telegram:42"}, false, true},
		{"removed", []string{"telegram:7"}, false, false},
		{"the whole platform, team mode", []string{"telegram:*"}, true, true},
		{"the whole platform, personal mode", []string{"telegram:*"}, false, false},
		{"another platform's workspace", []string{"slack:team:T1"}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{AllowedUsers: tc.allowed}
			if tc.team {
				cfg.Accounts = &fakeAccounts{}
			}
			if got := New(newMemStore(), &mockAgent{}, cfg).servesPerson("telegram", "42"); got != tc.want {
				t.Errorf("servesPerson = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRunTimersExtendsTheClaimOfASlowHandler: a handler that runs longer
// than the lease keeps its timer: its claim is extended while it runs,
// so another process's pass finds nothing to claim (issue 35: the claim
// lapsed and another replica ran the timer too).
func TestRunTimersExtendsTheClaimOfASlowHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := newTimerStore()
		b := New(st, &mockAgent{}, Config{Now: time.Now})
		var stolen []Timer
		b.HandleTimer("look", func(ctx context.Context, tm Timer) (time.Time, error) {
			time.Sleep(2 * timerLease) // a slow look: Todoist rate limited
			var err error
			stolen, err = st.ClaimTimers(ctx, time.Now(), []string{"look"}, "another", timerLease, 10)
			if err != nil {
				t.Error(err)
			}
			return time.Now().Add(time.Hour), nil
		})
		if err := st.SetTimer(ctx, Timer{Kind: "look", Key: "p", Due: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if n, err := b.RunTimers(ctx); err != nil || n != 1 {
			t.Fatalf("RunTimers = %d, %v", n, err)
		}
		if len(stolen) != 0 {
			t.Errorf("another claimant took %v while its handler ran: the claim was not extended", stolen)
		}
	})
}

// TestRunTimersStopsAHandlerWhoseClaimIsLost: a handler whose timer
// another process took (this one stalled past the lease) has its context
// cancelled at the next extension.
func TestRunTimersStopsAHandlerWhoseClaimIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := newTimerStore()
		b := New(st, &mockAgent{}, Config{Now: time.Now})
		var stopped bool
		b.HandleTimer("look", func(ctx context.Context, tm Timer) (time.Time, error) {
			// The timer is set again meanwhile (its claim dropped), as
			// when another process took it.
			if err := st.SetTimer(ctx, Timer{Kind: "look", Key: "p", Due: time.Now().Add(time.Hour)}); err != nil {
				t.Error(err)
			}
			select {
			case <-ctx.Done():
				stopped = true
			case <-time.After(2 * timerLease):
			}
			return time.Now().Add(time.Hour), ctx.Err()
		})
		if err := st.SetTimer(ctx, Timer{Kind: "look", Key: "p", Due: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.RunTimers(ctx); err != nil {
			t.Fatal(err)
		}
		if !stopped {
			t.Error("the handler ran on after its claim was lost")
		}
	})
}
