package bot

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
)

func digestSnapshot() agent.Snapshot {
	return agent.Snapshot{
		Projects: []agent.Project{{ID: "inbox", Name: "Inbox", IsInbox: true}, {ID: "home", Name: "Home"}},
		Tasks: []agent.Task{
			{ID: "1", Content: "Call mum", ProjectID: "home", DueDate: "2026-11-25"},
			{ID: "2", Content: "Pay rent", ProjectID: "home", DueDate: "2026-11-23"},
			{ID: "3", Content: "Dentist", ProjectID: "home", DueDate: "2026-11-24T23:30:00Z"}, // 00:30 on the 25th in Amsterdam
			{ID: "4", Content: "Buy milk", ProjectID: "inbox"},
			{ID: "5", Content: "Someday", ProjectID: "home", DueDate: "2026-12-01"},
		},
	}
}

func (e *settingsEnv) runTimers(t *testing.T) int {
	t.Helper()
	n, err := e.bot.RunTimers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.bot.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

func digests(p *fakePlatform) []Outgoing {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Outgoing
	for _, m := range p.sent {
		if strings.HasPrefix(m.Text, "☀️") {
			out = append(out, m)
		}
	}
	return out
}

func TestDigestAtEightInThePersonsZone(t *testing.T) {
	e := newSettingsEnv(t) // 06:00 UTC; Todoist's zone Europe/Amsterdam
	e.agent.snap = digestSnapshot()
	e.say(t, settingsIn("digest 08:00"))
	e.clk.Set(time.Date(2026, 11, 25, 6, 59, 0, 0, time.UTC))
	e.runTimers(t)
	if n := len(digests(e.plat)); n != 0 {
		t.Fatalf("%d digests before 08:00 in Amsterdam", n)
	}
	e.clk.Set(time.Date(2026, 11, 25, 7, 0, 5, 0, time.UTC)) // 08:00:05 in Amsterdam
	e.runTimers(t)
	ds := digests(e.plat)
	if len(ds) != 1 {
		t.Fatalf("%d digests at 08:00 in Amsterdam, want 1", len(ds))
	}
	d := ds[0]
	for _, want := range []string{"Wednesday 25 November", "Due today (2):\n• Call mum\n• Dentist", "Overdue (1):\n• Pay rent (due 23 Nov)", "Inbox: 1 task waiting"} {
		if !strings.Contains(d.Text, want) {
			t.Errorf("digest lacks %q:\n%s", want, d.Text)
		}
	}
	if strings.Contains(d.Text, "Someday") {
		t.Errorf("digest lists a task due later:\n%s", d.Text)
	}
	var labels []string
	for _, b := range d.Buttons {
		labels = append(labels, b.Label)
	}
	if got := strings.Join(labels, "|"); got != "Move overdue to today|Tidy inbox|Snooze digest" {
		t.Errorf("buttons %s", got)
	}
	if d.ChatID != "c1" {
		t.Errorf("digest posted in chat %q, want the private one", d.ChatID)
	}
	// The next one is tomorrow at 08:00 there, and nothing more today.
	tm, _ := e.st.Timer(t.Context(), TimerDigest, "telegram:42")
	if want := time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC); !tm.Due.Equal(want) {
		t.Errorf("next digest %s, want %s", tm.Due, want)
	}
	e.clk.Set(time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC))
	e.runTimers(t)
	if n := len(digests(e.plat)); n != 1 {
		t.Errorf("%d digests by 09:00, want 1", n)
	}
	if e.agent.reads != 1 {
		t.Errorf("%d Todoist reads, want 1", e.agent.reads)
	}
	if len(e.agent.inputs) != 0 {
		t.Errorf("the digest started %d runs (model calls)", len(e.agent.inputs))
	}
}

func TestDigestNothingToSaySendsNothing(t *testing.T) {
	e := newSettingsEnv(t)
	e.agent.snap = agent.Snapshot{Projects: []agent.Project{{ID: "inbox", IsInbox: true}},
		Tasks: []agent.Task{{ID: "5", Content: "Someday", ProjectID: "x", DueDate: "2026-12-01"}}}
	e.say(t, settingsIn("digest 08:00"))
	e.clk.Set(time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC))
	if n := e.runTimers(t); n != 1 {
		t.Fatalf("%d timers ran", n)
	}
	if n := len(digests(e.plat)); n != 0 {
		t.Errorf("%d digests on a day with nothing to say", n)
	}
}

// After downtime a digest is sent once when under two hours late, and
// skipped when later.
func TestDigestAfterDowntime(t *testing.T) {
	for _, tt := range []struct {
		name  string
		start time.Time
		want  int
	}{
		{"an hour late: sent once", time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC), 1},
		{"three hours late: skipped", time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newSettingsEnv(t)
			e.agent.snap = digestSnapshot()
			e.say(t, settingsIn("digest 08:00"))
			e.bot.Stop()
			// Two restarts later, on the same store.
			for range 2 {
				e.clk.Set(tt.start)
				b := New(e.st, e.agent, Config{AllowedUsers: []string{"telegram:42"}, Now: e.clk.Now, TimerEvery: time.Hour})
				b.AddPlatform(e.plat)
				if err := b.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
				if _, err := b.RunTimers(t.Context()); err != nil {
					t.Fatal(err)
				}
				if err := b.WaitIdle(t.Context()); err != nil {
					t.Fatal(err)
				}
				b.Stop()
			}
			if n := len(digests(e.plat)); n != tt.want {
				t.Errorf("%d digests, want %d", n, tt.want)
			}
			tm, _ := e.st.Timer(t.Context(), TimerDigest, "telegram:42")
			if want := time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC); !tm.Due.Equal(want) {
				t.Errorf("next digest %s, want %s", tm.Due, want)
			}
		})
	}
}

// press presses button data on the digest, as event, and waits for
// what it does.
func (e *settingsEnv) press(t *testing.T, data, event string) {
	t.Helper()
	in := Incoming{Platform: "telegram", ChatID: "c1", UserID: "42", Button: data, ButtonRef: "cb-" + event, EventID: event, DM: true}
	if err := e.bot.Handle(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	if err := e.bot.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestDigestButtons(t *testing.T) {
	e := newSettingsEnv(t)
	e.agent.snap = digestSnapshot()
	e.say(t, settingsIn("digest 08:00"))
	e.clk.Set(time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC))
	e.runTimers(t)
	e.press(t, digestMove, "p1")
	e.press(t, digestTidy, "p2")
	got := e.agent.startedList()
	if len(got) != 2 || got[0] != MoveOverdueInstruction || got[1] != TidyInboxInstruction {
		t.Errorf("runs %q", got)
	}
	e.press(t, digestSnooze, "p3")
	e.press(t, digestSnooze, "p3") // delivered twice
	if last := e.plat.last(); !strings.Contains(last.Text, "again in an hour") {
		t.Errorf("snooze answered %q", last.Text)
	}
	e.clk.Set(time.Date(2026, 11, 25, 8, 0, 30, 0, time.UTC))
	e.runTimers(t)
	if n := len(digests(e.plat)); n != 2 {
		t.Errorf("%d digests after the snooze, want 2", n)
	}
	e.clk.Set(time.Date(2026, 11, 25, 9, 30, 0, 0, time.UTC))
	e.runTimers(t)
	if n := len(digests(e.plat)); n != 2 {
		t.Errorf("%d digests later, want 2 (a snooze fires once)", n)
	}
}

// Two bots sharing a store (replicas), both finding the digest due at
// once, send it once.
func TestDigestOnceAcrossReplicas(t *testing.T) {
	e := newSettingsEnv(t)
	e.agent.snap = digestSnapshot()
	e.say(t, settingsIn("digest 08:00"))
	other := New(e.st, e.agent, Config{AllowedUsers: []string{"telegram:42"}, Now: e.clk.Now, TimerEvery: time.Hour})
	other.AddPlatform(e.plat)
	if err := other.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer other.Stop()
	e.clk.Set(time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC))
	var wg sync.WaitGroup
	for _, b := range []*Bot{e.bot, other, e.bot, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.RunTimers(t.Context()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, b := range []*Bot{e.bot, other} {
		if err := b.WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(digests(e.plat)); n != 1 {
		t.Errorf("%d digests from two replicas, want 1", n)
	}
	// Even when a claim lapsed mid-send and another replica ran the
	// timer again: the day's key is taken.
	if err := e.st.SetTimer(t.Context(), Timer{Kind: TimerDigest, Key: "telegram:42", Due: e.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	e.runTimers(t)
	if n := len(digests(e.plat)); n != 1 {
		t.Errorf("%d digests after the timer ran again the same day, want 1", n)
	}
}

// TestTimersRepairedAtStart: a digest or autopilot timer that is gone
// (a database copied by tidybot migrate --from before it copied
// timers, or a version that kept none) is set again when the bot
// starts; one that is there keeps its due time, and a person with
// neither gets none.
func TestTimersRepairedAtStart(t *testing.T) {
	ctx := t.Context()
	e := newSettingsEnv(t)
	e.say(t, settingsIn("digest 08:00"))
	e.say(t, settingsIn("autopilot on"))
	for _, kind := range []string{TimerDigest, TimerAutopilot} {
		if err := e.st.DeleteTimer(ctx, kind, "telegram:42"); err != nil {
			t.Fatal(err)
		}
	}
	// Another person wants a digest and has their timer, due later
	// (snoozed, or a retry): it stays as it is.
	later := Timer{Kind: TimerDigest, Key: "telegram:7", Due: e.clk.Now().Add(3 * time.Hour)}
	if err := e.st.SetSetting(ctx, personKey("telegram", "7"), `{"digest":"08:00","tz":"UTC"}`); err != nil {
		t.Fatal(err)
	}
	if err := e.st.SetTimer(ctx, later); err != nil {
		t.Fatal(err)
	}
	// A third set settings without a digest or autopilot.
	if err := e.st.SetSetting(ctx, personKey("telegram", "8"), `{"digest":"off","lang":"Dutch"}`); err != nil {
		t.Fatal(err)
	}

	e.restart(t)

	tm, err := e.st.Timer(ctx, TimerDigest, "telegram:42")
	if err != nil || !tm.Due.Equal(time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC)) {
		t.Errorf("digest timer %+v (%v), want 07:00 UTC", tm, err)
	}
	// Due at once (the first look notes the inbox), or a minute on if the
	// start pass already looked.
	if tm, err := e.st.Timer(ctx, TimerAutopilot, "telegram:42"); err != nil || tm.Due.After(e.clk.Now().Add(time.Minute)) {
		t.Errorf("autopilot timer %+v (%v), want due within a minute", tm, err)
	}
	if tm, err := e.st.Timer(ctx, TimerDigest, "telegram:7"); err != nil || !tm.Due.Equal(later.Due) {
		t.Errorf("a present digest timer became %+v (%v), want due %v", tm, err, later.Due)
	}
	for _, kind := range []string{TimerDigest, TimerAutopilot} {
		if tm, err := e.st.Timer(ctx, kind, "telegram:8"); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s timer %+v (%v) for a person who wants none", kind, tm, err)
		}
	}
}

// TestDigestTimerRepairedAtASettingsChange: a person whose digest timer
// is gone has it set again when they change any setting.
func TestDigestTimerRepairedAtASettingsChange(t *testing.T) {
	e := newSettingsEnv(t)
	e.say(t, settingsIn("digest 08:00"))
	if err := e.st.DeleteTimer(t.Context(), TimerDigest, "telegram:42"); err != nil {
		t.Fatal(err)
	}
	e.say(t, settingsIn("language Dutch"))
	tm, err := e.st.Timer(t.Context(), TimerDigest, "telegram:42")
	if err != nil || !tm.Due.Equal(time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC)) {
		t.Errorf("timer %+v (%v), want 07:00 UTC", tm, err)
	}
}

// timerCalls is a timerStore that counts the calls that read or set a
// timer one by one (not the timer loop's claims).
type timerCalls struct {
	*timerStore
	n atomic.Int32
}

func (s *timerCalls) Timer(ctx context.Context, kind, key string) (Timer, error) {
	s.n.Add(1)
	return s.timerStore.Timer(ctx, kind, key)
}

func (s *timerCalls) SetTimer(ctx context.Context, t Timer) error {
	s.n.Add(1)
	return s.timerStore.SetTimer(ctx, t)
}

func (s *timerCalls) DeleteTimer(ctx context.Context, kind, key string) error {
	s.n.Add(1)
	return s.timerStore.DeleteTimer(ctx, kind, key)
}

// TestRunStartReadsNoTimer: a message of a person with the digest and
// autopilot on starts its run without a timer call (on PostgreSQL each
// is a round trip on every message); their timers are repaired at
// start and at a settings change instead.
func TestRunStartReadsNoTimer(t *testing.T) {
	st := newTimerStore()
	calls := &timerCalls{timerStore: st}
	e := newSettingsEnvOn(t, st, calls)
	e.say(t, settingsIn("digest 08:00"))
	e.say(t, settingsIn("autopilot on"))
	calls.n.Store(0)
	e.say(t, msg("hello", "m1"))
	if n := calls.n.Load(); n != 0 {
		t.Errorf("a run's start made %d timer calls, want 0", n)
	}
}

// TestDigestNotToAPersonNoLongerAllowed (issue 34, defect 6): the owner
// takes a person off TIDYBOT_ALLOWED_USERS ("nobody else is served",
// docs/settings.md) and restarts the bot: their digest timer, when due,
// sends nothing (in personal mode it would list the owner's tasks) and
// goes.
func TestDigestNotToAPersonNoLongerAllowed(t *testing.T) {
	e := newSettingsEnv(t)
	e.agent.snap = digestSnapshot()
	e.say(t, settingsIn("digest 08:00"))
	e.cfg.AllowedUsers = []string{"telegram:7"} // 42 removed by the owner
	e.restart(t)
	if e.bot.Allowed("telegram", "42") {
		t.Fatal("42 still allowed")
	}
	e.clk.Set(time.Date(2026, 11, 25, 7, 0, 5, 0, time.UTC)) // 08:00:05 in Amsterdam
	e.runTimers(t)
	if ds := digests(e.plat); len(ds) != 0 {
		t.Errorf("a person no longer allowed got the digest in chat %s:\n%s", ds[0].ChatID, ds[0].Text)
	}
	if _, err := e.st.Timer(t.Context(), TimerDigest, "telegram:42"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the digest timer of a person no longer allowed stayed (%v)", err)
	}
}

// TestDigestSnoozedTwice (issue 34, defect 7): "Snooze digest (the
// digest again in an hour)" pressed on the snoozed digest sends it again
// an hour later: each snooze has its own event key (one key a day for
// every snoozed digest took the second for a duplicate of the first).
func TestDigestSnoozedTwice(t *testing.T) {
	e := newSettingsEnv(t)
	e.agent.snap = digestSnapshot()
	e.say(t, settingsIn("digest 08:00"))
	e.clk.Set(time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC))
	e.runTimers(t)
	e.press(t, digestSnooze, "snooze-1")
	e.clk.Set(time.Date(2026, 11, 25, 8, 0, 30, 0, time.UTC))
	e.runTimers(t)
	if n := len(digests(e.plat)); n != 2 {
		t.Fatalf("%d digests after the first snooze, want 2", n)
	}
	e.press(t, digestSnooze, "snooze-2") // on the snoozed digest
	if last := e.plat.last(); !strings.Contains(last.Text, "again in an hour") {
		t.Fatalf("snooze answered %q", last.Text)
	}
	e.clk.Set(time.Date(2026, 11, 25, 9, 1, 0, 0, time.UTC))
	e.runTimers(t)
	if n := len(digests(e.plat)); n != 3 {
		t.Errorf("%d digests an hour after the second snooze, want 3: the bot promised it again in an hour", n)
	}
}
