package bot

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func job(thread, id string) Job { return Job{ID: id, ThreadKey: thread} }

// TestSchedulerOneJobPerThreadInOrder: a thread's jobs come one at a
// time, in order (a front job first); other threads' jobs come
// meanwhile.
func TestSchedulerOneJobPerThreadInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScheduler()
		s.add(job("a", "a1"), false)
		s.add(job("a", "a2"), false)
		s.add(job("b", "b1"), false)
		s.add(job("a", "a0"), true)
		ctx := t.Context()
		got := func() string {
			j, ok := s.next(ctx)
			if !ok {
				t.Fatal("next: stopped")
			}
			return j.ID
		}
		if first, second := got(), got(); first != "a0" || second != "b1" {
			t.Fatalf("first jobs %s, %s; want a0 (front), then b1 (a is busy)", first, second)
		}
		// Thread a is busy: nothing more until it is done.
		var third string
		go func() { third = got() }()
		synctest.Wait()
		if third != "" {
			t.Fatalf("handed out %s while a0 runs", third)
		}
		s.done("a")
		synctest.Wait()
		if third != "a1" {
			t.Fatalf("after a0: %q, want a1", third)
		}
		s.done("b")
		s.done("a")
		if j := got(); j != "a2" {
			t.Errorf("last job %s, want a2", j)
		}
		if err := waitIdleWithin(s, time.Millisecond); err == nil {
			t.Error("idle while a2 runs")
		}
		s.done("a")
		if err := waitIdleWithin(s, time.Millisecond); err != nil {
			t.Errorf("not idle after every job: %v", err)
		}
	})
}

func waitIdleWithin(s *scheduler, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return s.waitIdle(ctx)
}

// TestSchedulerParallelThreads: many workers on many threads never run
// two jobs of one thread at once, and every job runs once.
func TestSchedulerParallelThreads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScheduler()
		var mu sync.Mutex
		busy := map[string]bool{}
		ran := map[string]int{}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					j, ok := s.next(t.Context())
					if !ok {
						return
					}
					mu.Lock()
					if busy[j.ThreadKey] {
						t.Errorf("two jobs of %s at once", j.ThreadKey)
					}
					busy[j.ThreadKey] = true
					ran[j.ID]++
					mu.Unlock()
					time.Sleep(time.Millisecond)
					mu.Lock()
					busy[j.ThreadKey] = false
					mu.Unlock()
					s.done(j.ThreadKey)
				}
			})
		}
		for i := range 40 {
			s.add(job(fmt.Sprint("t", i%5), fmt.Sprint("j", i)), false)
		}
		if err := s.waitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		s.stop()
		wg.Wait()
		if len(ran) != 40 {
			t.Errorf("%d jobs ran, want 40", len(ran))
		}
		for id, n := range ran {
			if n != 1 {
				t.Errorf("%s ran %d times", id, n)
			}
		}
	})
}

// TestSchedulerStop: stop releases waiting workers; queued jobs are left
// (they stay stored for the next start) and do not count as busy.
func TestSchedulerStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScheduler()
		released := false
		go func() {
			_, ok := s.next(t.Context())
			released = !ok
		}()
		synctest.Wait()
		s.stop()
		synctest.Wait()
		if !released {
			t.Fatal("a waiting worker was not released by stop")
		}
		s.add(job("a", "a1"), false)
		if _, ok := s.next(t.Context()); ok {
			t.Error("a job handed out after stop")
		}
		if err := s.waitIdle(t.Context()); err != nil {
			t.Errorf("waitIdle after stop: %v", err)
		}
		if running, queued := s.inFlight(); running != 0 || queued != 1 {
			t.Errorf("in flight: %d running, %d queued", running, queued)
		}
	})
}
