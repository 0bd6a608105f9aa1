package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot/outbound"
)

// flaky fails the posts of answers ("did: …") as fail says, recording
// when each was tried.
type flaky struct {
	mu    sync.Mutex
	tries []time.Time
	fail  func(n int) error // n: the try, from 1
}

func (f *flaky) onSend(m Outgoing) error {
	if !strings.HasPrefix(m.Text, "did: ") {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tries = append(f.tries, time.Now())
	return f.fail(len(f.tries))
}

func (f *flaky) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tries)
}

// TestFailedPostIsTriedAgainWhileRunning: an answer whose post fails
// (a 502, twice) is posted by the running bot, after a backoff, without
// waiting for a restart; its outbox entry then goes.
func TestFailedPostIsTriedAgainWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flaky{fail: func(n int) error {
			if n <= 2 {
				return errors.New("502 bad gateway")
			}
			return nil
		}}
		plat := newTelegram()
		plat.onSend = f.onSend
		h := startHarness(t, &mockAgent{}, plat, Config{Workers: 1, AllowedUsers: []string{"telegram:42"}})
		h.handle(t, msg("tidy", "e1"))
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := f.count(); n != 3 {
			t.Fatalf("the answer was tried %d times, want 3 (two failures, then posted)", n)
		}
		if gap := f.tries[1].Sub(f.tries[0]); gap < retryFirst {
			t.Errorf("tried again after %v, want a backoff of at least %v", gap, retryFirst)
		}
		if got := plat.texts(); strings.Count(strings.Join(got, "\n"), "did: tidy") != 1 {
			t.Errorf("posted %q, want the answer once", got)
		}
		h.store.mu.Lock()
		left := len(h.store.outbox)
		h.store.mu.Unlock()
		if left != 0 {
			t.Errorf("%d entries left in the outbox", left)
		}
	})
}

// TestRetryHonoursRetryAfter: a post still rate limited after the send
// queue's own retries is tried again no sooner than the platform's
// Retry-After.
func TestRetryHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const after = 3 * time.Minute
		f := &flaky{fail: func(n int) error {
			if n <= outbound.MaxRateLimitRetries+1 {
				return RetryLater(errors.New("429"), after)
			}
			return nil
		}}
		plat := newTelegram()
		plat.onSend = f.onSend
		h := startHarness(t, &mockAgent{}, plat, Config{Workers: 1, AllowedUsers: []string{"telegram:42"}})
		h.handle(t, msg("tidy", "e1"))
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := f.count(); n != outbound.MaxRateLimitRetries+2 {
			t.Fatalf("tried %d times, want %d", n, outbound.MaxRateLimitRetries+2)
		}
		last := len(f.tries) - 1
		if gap := f.tries[last].Sub(f.tries[last-1]); gap < after {
			t.Errorf("tried again %v after a 429 with Retry-After %v", gap, after)
		}
		if got := plat.texts(); strings.Count(strings.Join(got, "\n"), "did: tidy") != 1 {
			t.Errorf("posted %q, want the answer once", got)
		}
	})
}

// TestRetriesGiveUpAndKeepTheEntry: a post that keeps failing is tried
// for retryFor, then left in the outbox for the next start, with a log
// line; nothing is tried after that.
func TestRetriesGiveUpAndKeepTheEntry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flaky{fail: func(int) error { return errors.New("503") }}
		plat := newTelegram()
		plat.onSend = f.onSend
		var logs logBuffer
		h := startHarness(t, &mockAgent{}, plat, Config{Workers: 1, AllowedUsers: []string{"telegram:42"}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		h.handle(t, msg("tidy", "e1"))
		time.Sleep(retryFor + retryMax)
		synctest.Wait()
		n := f.count()
		if n < 5 || n > 20 {
			t.Fatalf("tried %d times in %v, want a bounded backoff", n, retryFor)
		}
		if span := f.tries[n-1].Sub(f.tries[0]); span > retryFor {
			t.Errorf("kept trying for %v, want at most %v", span, retryFor)
		}
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		if f.count() != n {
			t.Errorf("tried again after giving up")
		}
		if !strings.Contains(logs.String(), "retries given up") {
			t.Errorf("no log line says the retries were given up:\n%s", logs.String())
		}
		h.store.mu.Lock()
		left := len(h.store.outbox)
		h.store.mu.Unlock()
		if left != 1 {
			t.Errorf("%d entries in the outbox, want the answer kept for the next start", left)
		}
	})
}

// resender is a platform that keeps each post's Ref and finds it again,
// as Slack's message metadata lets the adapter do.
type resender struct {
	*fakePlatform
	resends int
}

func (r *resender) Resend(ctx context.Context, m Outgoing, _ time.Time) (string, error) {
	r.mu.Lock()
	r.resends++
	for i, s := range r.sent {
		if s.Ref == m.Ref {
			r.mu.Unlock()
			return fmt.Sprintf("m%d", i+1), nil
		}
	}
	r.mu.Unlock()
	return r.Send(ctx, m)
}

// TestRestartLooksBeforePostingAgain: an answer posted just before a
// crash (its entry still in the outbox) is looked for, not posted again,
// on a platform that can look (Resender); one never posted is posted,
// once. Every post carries its entry's id.
func TestRestartLooksBeforePostingAgain(t *testing.T) {
	st := newMemStore()
	now := time.Now()
	posted := Outbound{ID: "ob1", Platform: "slack", Msg: Outgoing{ChatID: "D1", Text: "Done: one"}, Created: now}
	lost := Outbound{ID: "ob2", Platform: "slack", Msg: Outgoing{ChatID: "D1", Text: "Done: two"}, Created: now}
	if err := st.Commit(t.Context(), Change{Send: []Outbound{posted, lost}}); err != nil {
		t.Fatal(err)
	}
	plat := &resender{fakePlatform: &fakePlatform{name: "slack"}}
	first := posted.Msg
	first.Ref = posted.ID
	plat.sent = []Outgoing{first} // it reached Slack; the crash came before it was recorded
	b := New(st, &mockAgent{}, Config{Workers: 1})
	b.AddPlatform(plat)
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.Stop()
	if got := plat.texts(); joined(got) != "Done: one | Done: two" {
		t.Errorf("posted %q, want each answer once", got)
	}
	if plat.resends != 2 {
		t.Errorf("Resend called %d times, want 2 (each entry left by the crash)", plat.resends)
	}
	if plat.last().Ref != "ob2" {
		t.Errorf("the post carries Ref %q, want its entry's id", plat.last().Ref)
	}
	if left, _ := st.Outbox(t.Context()); len(left) != 0 {
		t.Errorf("outbox: %+v", left)
	}
}

// TestRetryAfterALostResponseLooksFirst: a post that reached the
// platform but whose answer was lost (a timeout) is tried again through
// Resend, which finds it: the answer is shown once.
func TestRetryAfterALostResponseLooksFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		plat := &resender{fakePlatform: newTelegram()}
		lost := false
		plat.onSend = func(m Outgoing) error {
			if strings.HasPrefix(m.Text, "did: ") && !lost {
				lost = true
				plat.mu.Lock()
				plat.sent = append(plat.sent, m) // Slack has it
				plat.mu.Unlock()
				return errors.New("context deadline exceeded (Client.Timeout exceeded while awaiting headers)")
			}
			return nil
		}
		h := &harness{store: newMemStore(), agent: &mockAgent{}, plat: plat.fakePlatform}
		h.bot = New(h.store, h.agent, Config{Workers: 1, AllowedUsers: []string{"telegram:42"}})
		h.bot.AddPlatform(plat)
		if err := h.bot.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer h.bot.Stop()
		h.handle(t, msg("tidy", "e1"))
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := plat.texts(); strings.Count(joined(got), "did: tidy") != 1 {
			t.Errorf("posted %q, want the answer once", got)
		}
		plat.mu.Lock()
		resends := plat.resends
		plat.mu.Unlock()
		if resends != 1 {
			t.Errorf("Resend called %d times, want 1", resends)
		}
		if left, _ := h.store.Outbox(t.Context()); len(left) != 0 {
			t.Errorf("outbox: %+v", left)
		}
	})
}

// ownerStore is a memStore shared by replicas (Shared): the feeder
// takes a conversation's stored jobs (Work), this replica owns its
// outbox entries while owns is set (Shared.Owns: the entry is this
// process's and not delivered, store/postgres/replicas.go), and, with
// claim set, ClaimOutbox hands it every stored entry (a replica taking
// over what a frozen one left, as ClaimOutbox does in
// store/postgres/replicas.go).
type ownerStore struct {
	*memStore
	mockShared
	owns  atomic.Bool
	claim bool
}

func (s *ownerStore) Work(ctx context.Context, key string) ([]*Run, []Job, error) {
	jobs, err := s.Jobs(ctx)
	return nil, slices.DeleteFunc(jobs, func(j Job) bool { return j.ThreadKey != key }), err
}

func (s *ownerStore) Owns(context.Context, string) (bool, error) { return s.owns.Load(), nil }

func (s *ownerStore) ClaimOutbox(ctx context.Context, _ []string) ([]Outbound, error) {
	if !s.claim {
		return nil, nil
	}
	return s.Outbox(ctx)
}

// TestStreamedAnswerNotFinishedByAReplicaThatLostItsEntry: a replica
// whose answer's outbox entry another replica claimed (it was frozen
// past its lease) does not end its open preview with the answer, as it
// would not post it (ownedSend): the entry stays for its owner, which
// posts it once.
func TestStreamedAnswerNotFinishedByAReplicaThatLostItsEntry(t *testing.T) {
	const answer = "Moved three tasks to Family."
	mem := newMemStore()
	p := &streamingPlatform{fakePlatform: newTelegram(), finalize: true}
	ag := &mockAgent{StartFn: speaking(p, []string{"Moved ", "Moved three "}, answer, false)}
	a := New(&ownerStore{memStore: mem}, ag, Config{Workers: 1, AllowedUsers: []string{"telegram:42"}})
	a.AddPlatform(p)
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	if err := a.Handle(t.Context(), msg("file it", "e1")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := a.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	ss := p.snapshot()
	if len(ss) != 1 {
		t.Fatalf("previews %+v, want one", ss)
	}
	if ss[0].endedM.Text == answer {
		t.Error("the replica that does not own the answer's entry ended its preview with the answer")
	}
	if n := sentText(p.fakePlatform, answer); n != 0 {
		t.Errorf("the replica that does not own the answer's entry posted it %d times", n)
	}
	if ob, _ := mem.Outbox(t.Context()); len(ob) != 1 {
		t.Fatalf("outbox %+v, want the answer left for its owner", ob)
	}

	// The owner posts it once.
	owner := &ownerStore{memStore: mem, claim: true}
	owner.owns.Store(true)
	plat := newTelegram()
	b := New(owner, &mockAgent{}, Config{Workers: 1, AllowedUsers: []string{"telegram:42"}})
	b.AddPlatform(plat)
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	if err := b.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if n := sentText(plat, answer); n != 1 {
		t.Errorf("the owner posted the answer %d times, want 1: %q", n, plat.texts())
	}
	if ob, _ := mem.Outbox(t.Context()); len(ob) != 0 {
		t.Errorf("left in the outbox: %+v", ob)
	}
}

// flakyStore is an ownerStore whose WaitingRun fails the first fails
// times, as a PostgreSQL connection a network cut closed does.
type flakyStore struct {
	*ownerStore
	fails atomic.Int32
}

func (s *flakyStore) WaitingRun(ctx context.Context, key string) (*Run, error) {
	if s.fails.Add(-1) >= 0 {
		return nil, errors.New("conn closed")
	}
	return s.ownerStore.WaitingRun(ctx, key)
}

// TestSharedJobFailingOnTheStoreStays: with a Shared store, a job whose
// handling fails on the store (TestReplicasSurviveKills -replica-cut:
// "find the waiting run: conn closed") stays stored for another try,
// the person told nothing yet, instead of being deleted with "Something
// went wrong" and its message lost; a job failing every time is given
// up after jobTries.
func TestSharedJobFailingOnTheStoreStays(t *testing.T) {
	for _, c := range []struct {
		fails   int32
		kept    bool
		apology bool
	}{{1, true, false}, {jobTries, false, true}} {
		mem := newMemStore()
		st := &flakyStore{ownerStore: &ownerStore{memStore: mem}}
		st.owns.Store(true)
		st.fails.Store(c.fails)
		p := newTelegram()
		b := New(st, &mockAgent{}, Config{Workers: 1, AllowedUsers: []string{"telegram:42"}})
		b.AddPlatform(p)
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		for i := range c.fails {
			if err := b.Handle(t.Context(), msg("tidy", "e1")); err != nil && i == 0 {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			if err := b.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
			cancel()
			if i+1 < c.fails {
				b.feed.mu.Lock()
				clear(b.feed.handed) // tried again at once, as after retakeAfter
				b.feed.mu.Unlock()
				b.feed.offer(t.Context(), msg("tidy", "e1").ThreadKey())
			}
		}
		b.Stop()
		jobs, _ := mem.Jobs(t.Context())
		if kept := len(jobs) == 1; kept != c.kept {
			t.Errorf("%d failures: job kept %v, want %v", c.fails, kept, c.kept)
		}
		if apology := slices.Contains(p.texts(), jobFailedText); apology != c.apology {
			t.Errorf("%d failures: the person told %q, want the apology %v", c.fails, p.texts(), c.apology)
		}
	}
}

// runsStore is an ownerStore whose Work also returns the conversation's
// unfinished runs, as store/postgres's does.
type runsStore struct{ *ownerStore }

func (s runsStore) Work(ctx context.Context, key string) ([]*Run, []Job, error) {
	runs, err := s.Runs(ctx, RunWorking, RunQueued)
	if err != nil {
		return nil, nil, err
	}
	_, jobs, err := s.ownerStore.Work(ctx, key)
	return slices.DeleteFunc(runs, func(r *Run) bool { return r.ThreadKey != key }), jobs, err
}

// TestSharedRunWhoseSaveFailsResumes: with a Shared store, a run whose
// step save fails on the store (TestReplicasSurviveKills -replica-cut:
// "I couldn't finish: I could not save my progress", its task written)
// is interrupted instead of failed and resumes from its last save: the
// person gets the answer, not the failure.
func TestSharedRunWhoseSaveFailsResumes(t *testing.T) {
	mem := newMemStore()
	var failed atomic.Bool
	mem.commitErr = func(c Change) error {
		if c.Run != nil && c.Run.Status == RunWorking && c.DeleteJob != "" && !failed.Swap(true) {
			return errors.New("conn closed")
		}
		return nil
	}
	st := runsStore{&ownerStore{memStore: mem}}
	st.owns.Store(true)
	ag := &mockAgent{
		StartFn: func(ctx context.Context, in agent.Input, h agent.Hooks) agent.Outcome {
			tr := newTranscript(in)
			tr.Steps = 1
			if err := h.Save(ctx, tr); err != nil {
				return agent.Outcome{Status: agent.StatusFailed, Err: err, Answer: "I couldn't finish: I could not save my progress.", Transcript: tr}
			}
			return done(tr, "did: "+in.Instruction)
		},
		ResumeFn: func(ctx context.Context, tr *agent.Transcript, _ string, h agent.Hooks) agent.Outcome {
			return done(tr, "resumed and did it")
		},
	}
	p := newTelegram()
	b := New(st, ag, Config{Workers: 1, AllowedUsers: []string{"telegram:42"}})
	b.AddPlatform(p)
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	if err := b.Handle(t.Context(), msg("tidy", "e1")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(p.texts(), "resumed and did it") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, text := range p.texts() {
		if strings.Contains(text, "couldn't finish") {
			t.Errorf("posted %q: the failure of a save, which a resume overcomes", text)
		}
	}
	if !slices.Contains(p.texts(), "resumed and did it") {
		t.Errorf("posted %q, want the resumed run's answer", p.texts())
	}
	// The run ended: the count of its failed save goes with it (a later
	// failure of another execution would start from it, and the map
	// would keep it for the process's life).
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := b.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, n := range b.failures {
		if strings.HasPrefix(id, "run:") {
			t.Errorf("failures[%q] = %d after the run ended, want it cleared", id, n)
		}
	}
}
