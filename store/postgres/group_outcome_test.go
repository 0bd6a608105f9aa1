package postgres

import (
	"context"
	"errors"
	"net/url"
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
	u := pgtest.URL(t)
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p := pgtest.NewProxy(t, pu.Host)
	s, err := Open(ctx, p.Via(t, u))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
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
	msgs, err := sp.s.RecentMessages(ctx, sp.keyA, time.Time{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Errorf("%d answers in the history, want 1", len(msgs))
	}
	audit, err := sp.s.RunAudit(ctx, sp.runA)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 {
		t.Errorf("%d journal entries, want 1", len(audit))
	}
	if v, err := sp.s.Setting(ctx, sp.usage); err != nil || v != "10" {
		t.Errorf("tokens counted: %q %v, want 10", v, err)
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
