package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/tidybot/tidybot/bot"
)

// txID is the id of the last committed write transaction: bbolt adds one
// per write transaction, so two readings count the transactions between.
func txID(t testing.TB, s *Store) int {
	t.Helper()
	var id int
	if err := s.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		t.Fatal(err)
	}
	return id
}

// holdWriter keeps the writer in a transaction until release, so that
// the writes queued meanwhile share the next one. It runs in a synctest
// bubble, whose Wait says when the writer is held.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	hold := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- s.update(t.Context(), func(*bolt.Tx) error { <-hold; return nil }) }()
	synctest.Wait()
	return func() {
		t.Helper()
		close(hold)
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// queue runs each write in its own goroutine and returns once all of
// them wait for the writer (in a synctest bubble); wait gives their
// errors, in order.
func queue(writes ...func() error) (wait func() []error) {
	errs := make([]error, len(writes))
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Go(func() { errs[i] = w() })
	}
	synctest.Wait()
	return func() []error { wg.Wait(); return errs }
}

// sideBySide commits intake(i) and intake(j) queued together behind a
// held transaction, in a synctest bubble: the writer sees writes side
// by side.
func sideBySide(t *testing.T, s *Store, i, j int) {
	t.Helper()
	release := holdWriter(t, s)
	wait := queue(
		func() error { return s.Commit(t.Context(), intake(i)) },
		func() error { return s.Commit(t.Context(), intake(j)) },
	)
	release()
	noErrors(t, wait())
}

// noErrors fails t at the first of errs that is not nil.
func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// jobIDs lists the stored jobs' ids, sorted: writes queued together
// land in either order.
func jobIDs(t *testing.T, s *Store) string {
	t.Helper()
	jobs, err := s.Jobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	return strings.Join(ids, " ")
}

func intake(i int) bot.Change {
	key := fmt.Sprintf("slack:T1:D%d:", i%10)
	return bot.Change{EventKey: fmt.Sprint("slack:Ev", i), EventAt: t0, Thread: &bot.Thread{Key: key},
		Message: &bot.Message{ThreadKey: key, Role: bot.RoleUser, Text: fmt.Sprint("m", i), At: t0},
		Job:     &bot.Job{ID: fmt.Sprint("job", i), ThreadKey: key}}
}

// A write that finds the writer idle commits at once: the bubble's clock,
// which moves only while every goroutine waits on it, does not move.
func TestLoneWriteCommitsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := open(t)
		defer s.Close()
		first, start := txID(t, s), time.Now()
		for i := range 3 {
			if err := s.Commit(t.Context(), intake(i)); err != nil {
				t.Fatal(err)
			}
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("3 lone commits waited %v on a timer, want 0", d)
		}
		if got := txID(t, s) - first; got != 3 {
			t.Errorf("3 lone commits took %d transactions, want 3", got)
		}
	})
}

// The writes that arrive while a transaction commits go together into
// the next one.
func TestQueuedWritesShareATransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := open(t)
		defer s.Close()
		const n = 50
		first := txID(t, s)
		release := holdWriter(t, s)
		writes := make([]func() error, n)
		for i := range writes {
			writes[i] = func() error { return s.Commit(t.Context(), intake(i)) }
		}
		wait := queue(writes...)
		release()
		for i, err := range wait() {
			if err != nil {
				t.Errorf("commit %d: %v", i, err)
			}
		}
		if got := txID(t, s) - first; got != 2 {
			t.Errorf("%d transactions, want 2 (the held one, then all %d queued writes)", got, n)
		}
		if jobs, _ := s.Jobs(t.Context()); len(jobs) != n {
			t.Errorf("%d jobs, want %d", len(jobs), n)
		}
	})
}

// While writes come side by side (the last transaction held more than
// one), the writer waits groupWindow for more before it commits, so that
// writes arriving a moment apart share one transaction's fsyncs; once a
// window brings no company, the next lone write commits at once again.
func TestWritesSideBySideWaitForTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := open(t)
		defer s.Close()
		ctx := t.Context()
		sideBySide(t, s, 1, 2)

		// A write, and another half a window later: one transaction,
		// committed when the window ends.
		first, start := txID(t, s), time.Now()
		wait := queue(
			func() error { return s.Commit(ctx, intake(3)) },
			func() error { time.Sleep(groupWindow / 2); return s.Commit(ctx, intake(4)) },
		)
		noErrors(t, wait())
		if got := txID(t, s) - first; got != 1 {
			t.Errorf("two writes half a window apart took %d transactions, want 1", got)
		}
		if d := time.Since(start); d != groupWindow {
			t.Errorf("committed after %v, want the window, %v", d, groupWindow)
		}

		// Still side by side: a lone write waits out the window, finds no
		// company, and the next lone write commits at once.
		for i, want := range []time.Duration{groupWindow, 0} {
			start := time.Now()
			if err := s.Commit(ctx, intake(5+i)); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d != want {
				t.Errorf("lone write %d committed after %v, want %v", i+1, d, want)
			}
		}
		// Side by side again, a delivery does not wait for the window,
		// nor does what joined before it: until it commits, a crash
		// posts its message again.
		ob := bot.Outbound{ID: "a1", Platform: "slack", Msg: bot.Outgoing{ChatID: "D1", Text: "done"}, Created: t0}
		if err := s.Commit(ctx, bot.Change{Send: []bot.Outbound{ob}}); err != nil {
			t.Fatal(err)
		}
		sideBySide(t, s, 7, 8)
		start = time.Now()
		wait = queue(
			func() error { return s.Commit(ctx, intake(9)) },
			func() error { return s.Delivered(ctx, ob, "1.1") },
		)
		noErrors(t, wait())
		if d := time.Since(start); d != 0 {
			t.Errorf("a delivery committed after %v, want at once", d)
		}
		if got := jobIDs(t, s); got != "job1 job2 job3 job4 job5 job6 job7 job8 job9" {
			t.Errorf("jobs %s", got)
		}
	})
}

// A function that fails (or panics) gets its own error, and what it
// wrote is rolled back; the writes that shared its transaction land.
func TestFailingWriteFailsAlone(t *testing.T) {
	boom := errors.New("boom")
	for _, tt := range []struct {
		name string
		fail func()
		want func(error) bool
	}{
		{"error", func() {}, func(err error) bool { return errors.Is(err, boom) }},
		{"panic", func() { panic("bad index") }, func(err error) bool { return err != nil && !errors.Is(err, boom) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, _ := open(t)
				defer s.Close()
				release := holdWriter(t, s)
				ok := func(i int) func() error { return func() error { return s.Commit(t.Context(), intake(i)) } }
				failing := func() error {
					return s.update(t.Context(), func(tx *bolt.Tx) error {
						if err := tx.Bucket(bucketSettings).Put([]byte("half"), []byte("done")); err != nil {
							return err
						}
						tt.fail()
						return boom
					})
				}
				wait := queue(ok(0), ok(1), failing, ok(2), ok(3))
				release()
				errs := wait()
				for i, err := range errs {
					if i == 2 {
						if !tt.want(err) {
							t.Errorf("the failing write: %v", err)
						}
					} else if err != nil {
						t.Errorf("write %d beside it: %v", i, err)
					}
				}
				if got := jobIDs(t, s); got != "job0 job1 job2 job3" {
					t.Errorf("jobs %s, want those of the 4 writes beside it", got)
				}
				if _, err := s.Setting(t.Context(), "half"); !errors.Is(err, bot.ErrNotFound) {
					t.Errorf("the failing write was applied in part: %v", err)
				}
			})
		})
	}
}

// A duplicate event among concurrent commits is a result, not a failed
// transaction: the writes beside it run once, and land.
func TestDuplicateCostsNoRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := open(t)
		defer s.Close()
		if err := s.Commit(t.Context(), intake(0)); err != nil {
			t.Fatal(err)
		}
		release := holdWriter(t, s)
		// The probe is queued first: a rerun of the shared transaction
		// would run it again.
		var runs atomic.Int32
		waitProbe := queue(func() error {
			return s.update(t.Context(), func(*bolt.Tx) error { runs.Add(1); return nil })
		})
		commit := func(c bot.Change) func() error { return func() error { return s.Commit(t.Context(), c) } }
		retry := intake(0)
		retry.Job.ID = "retried"
		wait := queue(commit(intake(1)), commit(retry), commit(intake(2)), commit(retry))
		release()
		if err := waitProbe()[0]; err != nil {
			t.Fatal(err)
		}
		errs := wait()
		for i, err := range errs {
			if dup := i%2 == 1; dup != errors.Is(err, bot.ErrDuplicate) || !dup && err != nil {
				t.Errorf("commit %d: %v", i, err)
			}
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("the probe beside the duplicates ran %d times, want 1", n)
		}
		if got := jobIDs(t, s); got != "job0 job1 job2" {
			t.Errorf("jobs %s, want job0 job1 job2", got)
		}
	})
}

// A write whose context ends while it waits for the writer is not
// applied.
func TestCancelledWriteIsNotApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := open(t)
		defer s.Close()
		release := holdWriter(t, s)
		ctx, cancel := context.WithCancel(t.Context())
		wait := queue(func() error { return s.Commit(ctx, intake(1)) }, func() error { return s.Commit(t.Context(), intake(2)) })
		cancel()
		release()
		errs := wait()
		if !errors.Is(errs[0], context.Canceled) || errs[1] != nil {
			t.Errorf("errors %v, want the cancelled write's only", errs)
		}
		if got := jobIDs(t, s); got != "job2" {
			t.Errorf("jobs %s, want job2 only", got)
		}
	})
}

// Close lets the writes in flight finish or fail cleanly: each write
// that succeeded is in the file, the writer is gone, and a write after
// Close fails with the error reads get.
func TestCloseWithWritersInFlight(t *testing.T) {
	s, path := open(t)
	var landed atomic.Int32
	var started, wg sync.WaitGroup
	for w := range 16 {
		started.Add(1)
		wg.Go(func() {
			for i := w * 100_000; ; i++ {
				err := s.Commit(context.Background(), intake(i))
				if i == w*100_000 {
					started.Done()
				}
				if err != nil {
					if !errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
						t.Errorf("a write beside Close: %v", err)
					}
					return
				}
				landed.Add(1)
			}
		})
	}
	started.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	select {
	case <-s.stopped:
	default:
		t.Error("the writer outlived Close")
	}
	if err := s.SaveThread(t.Context(), bot.Thread{Key: "k"}); !errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		t.Errorf("a write after Close: %v, want ErrDatabaseNotOpen", err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if jobs, _ := s.Jobs(t.Context()); len(jobs) != int(landed.Load()) {
		t.Errorf("%d jobs in the file, want the %d commits that succeeded", len(jobs), landed.Load())
	}
}

// BenchmarkCommitConcurrent is the intake of a message (its event key,
// thread, message and job in one Commit) from 1, 4 and 64 goroutines at
// once, with fsync on. It reports commits per second and the write
// transactions (each one fsync) spent per commit.
//
//	go test ./store -run '^$' -bench CommitConcurrent -benchtime 2000x -count 3
func BenchmarkCommitConcurrent(b *testing.B) {
	for _, g := range []int{1, 4, 64} {
		b.Run(fmt.Sprint("goroutines=", g), func(b *testing.B) {
			s, _ := open(b)
			ctx := context.Background()
			var next atomic.Int64
			first := txID(b, s)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range g {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						key := fmt.Sprintf("slack:T1:D%d:", i%100)
						c := bot.Change{EventKey: fmt.Sprint("slack:Ev", i), EventAt: t0, Thread: &bot.Thread{Key: key},
							Message: &bot.Message{ThreadKey: key, Role: bot.RoleUser, Text: "move everything about the birthday into one project", At: t0},
							Job:     &bot.Job{ID: fmt.Sprint("job", i), ThreadKey: key}}
						if err := s.Commit(ctx, c); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "commits/s")
			b.ReportMetric(float64(txID(b, s)-first)/float64(b.N), "tx/commit")
		})
	}
}

// A delivered message's outbox entry is removed at once, in its own
// transaction when the writer is idle: a crash after the post and before
// that commit posts the message again at the next start, so the commit
// must not wait for company (it used to wait up to 20 ms for another
// write to share, and half of the kills in the 50 ms after a post
// doubled an answer). Deliveries that queue behind a transaction still
// share the next one (group commit); while writes come side by side, a
// delivery does not wait out groupWindow either (updateNow,
// TestWritesSideBySideWaitForTheWindow).
func TestDeliveryCommitsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := open(t)
		defer s.Close()
		ctx := t.Context()
		answer := func(id string) bot.Outbound {
			return bot.Outbound{ID: id, Platform: "slack", Msg: bot.Outgoing{ChatID: "D1", Text: "done"}, Created: t0}
		}
		if err := s.Commit(ctx, bot.Change{Send: []bot.Outbound{answer("a1"), answer("a2"), answer("a3")}}); err != nil {
			t.Fatal(err)
		}

		first, start := txID(t, s), time.Now()
		if err := s.Delivered(ctx, answer("a1"), "1.1"); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("a lone delivery committed after %v, want at once", d)
		}
		if got := txID(t, s) - first; got != 1 {
			t.Errorf("a lone delivery took %d transactions, want 1", got)
		}

		first = txID(t, s)
		wait := queue(
			func() error { return s.Delivered(ctx, answer("a2"), "1.2") },
			func() error { return s.Delivered(ctx, answer("a3"), "1.3") },
		)
		noErrors(t, wait())
		if got := txID(t, s) - first; got > 2 {
			t.Errorf("two deliveries took %d transactions, want at most 2", got)
		}
		if left, err := s.Outbox(ctx); err != nil || len(left) != 0 {
			t.Errorf("outbox = %+v (%v), want empty", left, err)
		}
	})
}

// Syncs counts two fdatasyncs per committed write transaction (bbolt's
// pages, then its meta page): a commit costs two; commits that share a
// transaction share them.
func TestSyncsCounted(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "tidybot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := s.Syncs()
	if _, err := s.MarkEvent(t.Context(), "e1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := s.Syncs() - before; n != 2 {
		t.Errorf("one commit: %d fdatasyncs counted, want 2", n)
	}
}
