package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// sharedPair is a run's end (conversation a: its answer in the history,
// its journal, its tokens) and a save of another run (conversation b),
// both waiting in the group, taken by the test as a committer would.
type sharedPair struct {
	s      *Store
	p      *pgtest.Proxy
	direct *pgx.Conn // to the server, not through the relay
	keyA   string
	runA   string
	usage  string
	runB   string
	batch  []*groupWrite
	errs   [2]chan error
}

func newSharedPair(t *testing.T, name string, wctx context.Context) *sharedPair {
	t.Helper()
	ctx := context.Background()
	s, p, u := storeViaProxy(t)
	direct, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close(context.Background()) })
	sp := &sharedPair{s: s, p: p, direct: direct, keyA: "telegram:" + name + "a:", runA: name + "-run-a",
		usage: "usage:test:" + name, runB: name + "-run-b-marker"}
	keyB := "telegram:" + name + "b:"
	now := time.Now()
	fences := map[string]context.Context{}
	for _, k := range []string{sp.keyA, keyB} {
		if ok, err := s.Hold(ctx, k); !ok || err != nil {
			t.Fatalf("hold %s: %v %v", k, ok, err)
		}
		fences[k] = s.Fence(wctx, k)
	}
	ra := &bot.Run{ID: sp.runA, ThreadKey: sp.keyA, Platform: "telegram", Status: bot.RunWorking, Created: now, Updated: now}
	rb := &bot.Run{ID: "keys-" + name, ThreadKey: keyB, Platform: "telegram", Status: bot.RunWorking, Created: now, Updated: now}
	for _, r := range []*bot.Run{ra, rb} { // the keys kept from here on
		if err := s.SaveRun(s.Fence(ctx, r.ThreadKey), r); err != nil {
			t.Fatal(err)
		}
	}
	s.group.slot <- struct{}{} // a transaction in flight: the next ones wait
	end := *ra
	end.Status, end.Answer = bot.RunDone, "Added."
	saved := &bot.Run{ID: sp.runB, ThreadKey: keyB, Platform: "telegram", Status: bot.RunWorking, Created: now, Updated: now}
	for i := range sp.errs {
		sp.errs[i] = make(chan error, 1)
	}
	go func() {
		sp.errs[0] <- s.Commit(fences[sp.keyA], bot.Change{Run: &end,
			Message: &bot.Message{ThreadKey: sp.keyA, Role: bot.RoleAssistant, Text: "Added.", RunID: end.ID, At: now},
			Audit:   []bot.AuditEntry{{RunID: end.ID, ThreadKey: sp.keyA, Summary: "added a task", At: now}},
			Count:   map[string]int{sp.usage: 10}})
	}()
	go func() { sp.errs[1] <- s.SaveRun(fences[keyB], saved) }()
	waitUntil(t, func() bool {
		s.group.mu.Lock()
		defer s.group.mu.Unlock()
		if len(s.group.waiting) != 2 {
			return false
		}
		sp.batch, s.group.waiting = s.group.waiting, nil // taken, as the committer takes them
		return true
	})
	return sp
}

// committed waits until the server has committed the shared
// transaction (the save's row is there, seen past the relay).
func (sp *sharedPair) committed(t *testing.T) {
	t.Helper()
	waitUntil(t, func() bool {
		var n int
		if err := sp.direct.QueryRow(context.Background(), `SELECT count(*) FROM runs WHERE id = $1`, sp.runB).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
}

// check: the run's end was written once (one answer in the history,
// one journal entry, its tokens counted once), and no caller was told
// its write failed when it was made.
func (sp *sharedPair) check(t *testing.T, wantNil bool) {
	t.Helper()
	ctx := context.Background()
	<-sp.s.group.slot
	for i, ch := range sp.errs {
		if err := <-ch; wantNil && err != nil {
			t.Errorf("write %d: %v, but it was committed", i, err)
		}
	}
	// Read past the relay: the store's idle connections may be the
	// ones the test cut.
	var msgs, audit int
	var usage string
	if err := sp.direct.QueryRow(ctx, `SELECT (SELECT count(*) FROM messages WHERE thread_key = $1), (SELECT count(*) FROM audit WHERE run_id = $2),
		(SELECT convert_from(value, 'UTF8') FROM settings WHERE key = $3)`, sp.keyA, sp.runA, sp.usage).Scan(&msgs, &audit, &usage); err != nil {
		t.Fatal(err)
	}
	if msgs != 1 {
		t.Errorf("%d answers in the history, want 1", msgs)
	}
	if audit != 1 {
		t.Errorf("%d journal entries, want 1", audit)
	}
	if usage != `"10"` {
		t.Errorf("tokens counted: %s, want 10", usage)
	}
}

// TestSharedCommitLostAnswerIsNotRedone: when the connection is lost
// after the shared transaction's COMMIT reached the server (its answer
// lost), the writes were made: none is made again alone (a run's end
// would be in the history twice, its tokens counted twice).
func TestSharedCommitLostAnswerIsNotRedone(t *testing.T) {
	t.Parallel()
	sp := newSharedPair(t, "lostans", context.Background())
	reached, resume := sp.p.PauseAt(sp.runB)
	done := make(chan struct{})
	go func() {
		sp.s.commitGroup(context.Background(), sp.batch)
		close(done)
	}()
	<-reached
	sp.p.Cut() // the server's answer is lost
	resume()
	sp.committed(t)
	sp.p.Heal()
	sp.p.CloseAll() // as keepalives end the connection
	<-done
	sp.check(t, false)
}

// TestSharedCommitOutlivesItsCommittersContext: the committer's context
// canceled while the shared transaction is in flight does not end the
// others' writes, nor have them made twice.
func TestSharedCommitOutlivesItsCommittersContext(t *testing.T) {
	t.Parallel()
	sp := newSharedPair(t, "cancelled", context.Background())
	reached, resume := sp.p.PauseAt(sp.runB)
	cctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		sp.s.commitGroup(cctx, sp.batch)
		close(done)
	}()
	<-reached
	cancel()
	time.Sleep(50 * time.Millisecond) // let pgx act on the cancellation (if it does)
	resume()
	<-done
	sp.committed(t)
	sp.check(t, true)
}

// TestSharedCommitEndsWithAllItsWriters: a shared transaction hung in
// flight ends once the contexts of all its writes have (a shutdown),
// as a transaction of one write would: Close is not held up for ever.
// Each is told that its outcome is unknown.
func TestSharedCommitEndsWithAllItsWriters(t *testing.T) {
	t.Parallel()
	wctx, cancel := context.WithCancel(context.Background())
	sp := newSharedPair(t, "shutdown", wctx)
	reached, resume := sp.p.PauseAt(sp.runB)
	defer resume()
	done := make(chan struct{})
	go func() {
		sp.s.commitGroup(context.Background(), sp.batch)
		close(done)
	}()
	<-reached
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the shared transaction outlived all its writers' contexts")
	}
	<-sp.s.group.slot
	for i, ch := range sp.errs {
		if err := <-ch; !errors.Is(err, context.Canceled) && !errors.Is(err, errCommitUnknown) {
			t.Errorf("write %d: %v, want its end told", i, err)
		}
	}
}

// TestSharedCommitRefusesEachGuardAlone: in one shared transaction, a
// run's save made after a cancel of its conversation (its cancel mark
// passed) and an intake under a polling lead taken since by another
// replica are each refused alone, with their own error; the save of
// another conversation riding with them is made, once.
func TestSharedCommitRefusesEachGuardAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	now := time.Now()
	keys := []string{"telegram:gcancel:", "telegram:gok:", "telegram:gpoll:"}
	fences := map[string]context.Context{}
	for _, k := range keys[:2] {
		if ok, err := s.Hold(ctx, k); !ok || err != nil {
			t.Fatalf("hold %s: %v %v", k, ok, err)
		}
		fences[k] = s.Fence(ctx, k)
		r := &bot.Run{ID: "keys-" + k, ThreadKey: k, Platform: "telegram", Status: bot.RunWorking, Created: now, Updated: now}
		if err := s.SaveRun(fences[k], r); err != nil { // the keys kept from here on
			t.Fatal(err)
		}
	}
	if err := s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: keys[2], Role: bot.RoleUser, Text: "first", At: now}}); err != nil {
		t.Fatal(err)
	}
	lead, release, err := s.LeadPolling(ctx, "telegram:gpoll")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := s.pool.Exec(ctx, `UPDATE poll_leads SET epoch = epoch + 1000 WHERE name = $1`, "telegram:gpoll"); err != nil {
		t.Fatal(err)
	}
	canceled := s.FenceCancels(fences[keys[0]], keys[0], 0)
	if _, err := s.pool.Exec(ctx, `INSERT INTO cancels (thread_key) VALUES ($1)`, keys[0]); err != nil {
		t.Fatal(err)
	}
	runs := []*bot.Run{
		{ID: "g-canceled", ThreadKey: keys[0], Platform: "telegram", Status: bot.RunWorking, Created: now, Updated: now},
		{ID: "g-ok", ThreadKey: keys[1], Platform: "telegram", Status: bot.RunWorking, Created: now, Updated: now},
	}
	writes := []func() error{
		func() error { return s.SaveRun(canceled, runs[0]) },
		func() error { return s.SaveRun(fences[keys[1]], runs[1]) },
		func() error {
			return s.Commit(lead, bot.Change{EventKey: "ev-gpoll", EventAt: now,
				Message: &bot.Message{ThreadKey: keys[2], Role: bot.RoleUser, Text: "polled", At: now}})
		},
	}
	errs := together(t, s, nil, writes...)
	if err := <-errs[0]; !errors.Is(err, bot.ErrCancelStored) {
		t.Errorf("the canceled run's save: %v, want bot.ErrCancelStored", err)
	}
	if err := <-errs[1]; err != nil {
		t.Errorf("the other save: %v", err)
	}
	if err := <-errs[2]; !errors.Is(err, bot.ErrFenced) {
		t.Errorf("the intake under a lost lead: %v, want bot.ErrFenced", err)
	}
	if _, err := s.Run(ctx, "g-canceled"); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("the canceled run was saved: %v", err)
	}
	if r, err := s.Run(ctx, "g-ok"); err != nil || r.Status != bot.RunWorking {
		t.Errorf("the other run: %+v %v", r, err)
	}
	msgs, err := s.RecentMessages(ctx, keys[2], time.Time{}, 10)
	if err != nil || len(msgs) != 1 {
		t.Errorf("the intake under a lost lead was stored: %d messages %v", len(msgs), err)
	}
}

// TestCloseWhileAWriteWaits: Close while a write waits for the shared
// transaction in flight returns, and the write is answered (made, or
// refused as the store closed), not left waiting.
func TestCloseWhileAWriteWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	const key = "telegram:closing:"
	if ok, err := s.Hold(ctx, key); !ok || err != nil {
		t.Fatalf("hold: %v %v", ok, err)
	}
	now := time.Now()
	s.group.slot <- struct{}{} // in flight
	defer func() { <-s.group.slot }()
	done := make(chan error, 1)
	go func() {
		done <- s.SaveRun(s.Fence(ctx, key), &bot.Run{ID: "closing-r", ThreadKey: key, Platform: "telegram", Status: bot.RunWorking, Created: now, Updated: now})
	}()
	waitUntil(t, func() bool {
		s.group.mu.Lock()
		defer s.group.mu.Unlock()
		return len(s.group.waiting) == 1
	})
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	for _, ch := range []chan error{closed, done} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("Close or the waiting write did not return")
		}
	}
}
