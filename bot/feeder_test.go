package bot

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mockShared is a Shared with one function field per method; a nil
// field answers as an empty store would (Hold: true).
type mockShared struct {
	HoldFn    func(ctx context.Context, key string) (bool, error)
	ReleaseFn func(ctx context.Context, key string, idle bool) (bool, error)
	WorkFn    func(ctx context.Context, key string) ([]*Run, []Job, error)
	PendingFn func(ctx context.Context, platforms []string, n int, all bool) ([]string, error)
	// Lost is LeasesLost's channel (nil: never).
	Lost chan struct{}
}

var _ Shared = (*mockShared)(nil)

func (m *mockShared) Hold(ctx context.Context, key string) (bool, error) {
	if m.HoldFn == nil {
		return true, nil
	}
	return m.HoldFn(ctx, key)
}

func (m *mockShared) Release(ctx context.Context, key string, idle bool) (bool, error) {
	if m.ReleaseFn == nil {
		return false, nil
	}
	return m.ReleaseFn(ctx, key, idle)
}

func (m *mockShared) Pending(ctx context.Context, platforms []string, n int, all bool) ([]string, error) {
	if m.PendingFn == nil {
		return nil, nil
	}
	return m.PendingFn(ctx, platforms, n, all)
}

func (m *mockShared) Work(ctx context.Context, key string) ([]*Run, []Job, error) {
	if m.WorkFn == nil {
		return nil, nil, nil
	}
	return m.WorkFn(ctx, key)
}

func (m *mockShared) Listen(context.Context, func(string), func(string)) error { return nil }

func (m *mockShared) Fence(ctx context.Context, _ string) context.Context { return ctx }

func (m *mockShared) Cancel(context.Context, string) (bool, error) { return false, nil }

func (m *mockShared) Cancels(context.Context, []string) (map[string]int64, error) { return nil, nil }

func (m *mockShared) CancelMark(context.Context, string, string, string) (int64, error) {
	return 0, nil
}

func (m *mockShared) ClaimOutbox(context.Context, []string) ([]Outbound, error) { return nil, nil }

func (m *mockShared) ClaimThread(context.Context, string) ([]Outbound, error) { return nil, nil }

func (m *mockShared) Owns(context.Context, string) (bool, error) { return true, nil }

func (m *mockShared) LeasesLost() <-chan struct{} { return m.Lost }

// slowRelease is a mockShared whose Release of key waits until the
// test lets it go, and whose Work returns the jobs put in jobs.
type slowRelease struct {
	mockShared
	entered chan struct{} // gets a value as the slow Release begins
	free    chan struct{} // closed to let it return

	mu    sync.Mutex // protects the fields below
	jobs  map[string][]Job
	holds map[string]int
}

func newSlowRelease(slow string) *slowRelease {
	s := &slowRelease{entered: make(chan struct{}, 1), free: make(chan struct{}), jobs: map[string][]Job{}, holds: map[string]int{}}
	s.HoldFn = func(_ context.Context, key string) (bool, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.holds[key]++
		return true, nil
	}
	s.ReleaseFn = func(_ context.Context, key string, _ bool) (bool, error) {
		if key == slow {
			s.entered <- struct{}{}
			<-s.free
		}
		return false, nil
	}
	s.WorkFn = func(_ context.Context, key string) ([]*Run, []Job, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		jobs := s.jobs[key]
		delete(s.jobs, key)
		return nil, jobs, nil
	}
	return s
}

func (s *slowRelease) put(j Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs[j.ThreadKey] = append(s.jobs[j.ThreadKey], j)
}

func (s *slowRelease) holdsOf(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holds[key]
}

// TestFeederSlowReleaseBlocksNoOtherConversation: while the database
// is slow to release one conversation's lease, another conversation is
// leased and queued at once.
func TestFeederSlowReleaseBlocksNoOtherConversation(t *testing.T) {
	b := New(newMemStore(), &mockAgent{}, Config{Workers: 1})
	q := newSlowRelease("telegram:1")
	f := newFeeder(b, q)
	ctx := t.Context()

	first := make(chan bool)
	go func() { first <- f.offer(ctx, "telegram:1") }() // no work: released
	<-q.entered
	defer func() {
		close(q.free)
		if got := <-first; got {
			t.Errorf("offer of a conversation without work = %v, want false", got)
		}
	}()

	q.put(Job{ID: "j2", ThreadKey: "telegram:2"})
	second := make(chan bool)
	go func() { second <- f.offer(ctx, "telegram:2") }()
	select {
	case got := <-second:
		if !got {
			t.Errorf("offer of another conversation with a job = %v, want true", got)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("offer of another conversation waited for a slow Release")
	}
}

// TestFeederJobArrivingDuringReleaseIsTaken: a job committed while its
// conversation's lease is being released is taken by this process: the
// lease is held again and the job queued, as when it came a moment
// later.
func TestFeederJobArrivingDuringReleaseIsTaken(t *testing.T) {
	b := New(newMemStore(), &mockAgent{}, Config{Workers: 1})
	q := newSlowRelease("telegram:1")
	f := newFeeder(b, q)
	ctx := t.Context()

	first := make(chan bool)
	go func() { first <- f.offer(ctx, "telegram:1") }()
	<-q.entered
	q.put(Job{ID: "j1", ThreadKey: "telegram:1"})
	if got := f.offer(ctx, "telegram:1"); got {
		t.Errorf("offer during the release = %v, want false (the releasing call takes it)", got)
	}
	close(q.free)
	if got := <-first; !got {
		t.Errorf("offer whose release met a new job = %v, want true", got)
	}
	if got, want := q.holdsOf("telegram:1"), 2; got != want {
		t.Errorf("Hold calls = %d, want %d", got, want)
	}
	_, queued := b.sched.inFlight()
	if got, want := queued, 1; got != want {
		t.Errorf("queued jobs = %d, want %d", got, want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.held["telegram:1"] {
		t.Error("conversation with a queued job is not held")
	}
}

// TestFeederLostLeasesForgetHeldConversations: once the leases are
// lost, the held conversations and their queued jobs are forgotten, a
// lease taken before the loss but reported after it is not recorded,
// and the next offer leases and queues again.
func TestFeederLostLeasesForgetHeldConversations(t *testing.T) {
	b := New(newMemStore(), &mockAgent{}, Config{Workers: 1})
	q := newSlowRelease("")
	f := newFeeder(b, q)
	ctx := t.Context()
	q.put(Job{ID: "j1", ThreadKey: "telegram:1"})
	if !f.offer(ctx, "telegram:1") {
		t.Fatal("offer of a conversation with a job = false, want true")
	}

	// A Hold under way as the leases are lost.
	q.put(Job{ID: "j2", ThreadKey: "telegram:2"})
	entered, free := make(chan struct{}), make(chan struct{})
	q.HoldFn = func(context.Context, string) (bool, error) {
		close(entered)
		<-free
		return true, nil
	}
	second := make(chan bool)
	go func() { second <- f.offer(ctx, "telegram:2") }()
	<-entered
	f.lost()
	close(free)
	if got := <-second; got {
		t.Errorf("offer whose Hold met the loss = %v, want false", got)
	}
	f.mu.Lock()
	held := len(f.held)
	f.mu.Unlock()
	if _, queued := b.sched.inFlight(); held != 0 || queued != 0 {
		t.Errorf("after the loss: %d held, %d queued; want none", held, queued)
	}

	q.HoldFn = nil
	q.put(Job{ID: "j1", ThreadKey: "telegram:1"}) // still stored
	if !f.offer(ctx, "telegram:1") {
		t.Error("offer after the loss = false, want true")
	}
	if _, queued := b.sched.inFlight(); queued != 1 {
		t.Errorf("queued after the new offer: %d, want 1", queued)
	}
}

// TestFeederRecoverWaitsForALeaseFreedSoon: as a process starts, a
// conversation with work whose lease a killed process still holds for
// a moment is leased once free and its work queued, and until then
// WaitIdle waits (a `chat` restarted after a kill would otherwise find
// nothing to do and exit).
func TestFeederRecoverWaitsForALeaseFreedSoon(t *testing.T) {
	b := New(newMemStore(), &mockAgent{}, Config{Workers: 1})
	q := newSlowRelease("")
	q.put(Job{ID: "j1", ThreadKey: "telegram:1"})
	// The killed process is alive to the store for that moment: its
	// leases are listed only to a Pending that asks for all.
	q.PendingFn = func(_ context.Context, _ []string, _ int, all bool) ([]string, error) {
		if !all {
			return nil, nil
		}
		return []string{"telegram:1"}, nil
	}
	free := time.Now().Add(recoverRetry / 3)
	q.HoldFn = func(context.Context, string) (bool, error) { return time.Now().After(free), nil }
	f := newFeeder(b, q)
	f.recover(t.Context())
	ctx, cancel := context.WithTimeout(t.Context(), recoverRetry/6)
	defer cancel()
	if err := b.sched.waitIdle(ctx); err == nil {
		t.Fatal("WaitIdle returned while the lease was still to be taken")
	}
	// Held comes first (marked as its lease is asked for), queued once
	// the lease is taken and the work read: wait for both.
	queued := func() int { _, n := b.sched.inFlight(); return n }
	for deadline := time.Now().Add(recoverRetry); !f.holds("telegram:1") || queued() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the conversation freed a moment after the start: held %v, %d jobs queued; want held, 1", f.holds("telegram:1"), queued())
		}
	}
	if n := queued(); n != 1 {
		t.Errorf("queued jobs = %d, want 1", n)
	}
}

// TestFeederKeepsTheLeaseWhileItsAnswersPost: a conversation out of
// work whose answer this process is still posting (queued in its send
// lane, behind a 429 perhaps) keeps its lease until the post is
// settled, so that no other replica answers the next message before it
// is shown (TestReplicasSurviveKills saw m0 posted after m7: its
// replica had released the conversation with m0 still in its lane);
// then it is released.
func TestFeederKeepsTheLeaseWhileItsAnswersPost(t *testing.T) {
	b := New(newMemStore(), &mockAgent{}, Config{Workers: 1})
	q := newSlowRelease("")
	var released atomic.Int32
	q.ReleaseFn = func(context.Context, string, bool) (bool, error) { released.Add(1); return false, nil }
	f := newFeeder(b, q)
	b.feed = f
	ctx := t.Context()
	const key = "telegram:1"
	q.put(Job{ID: "j1", ThreadKey: key})
	if !f.offer(ctx, key) {
		t.Fatal("offer of a conversation with a job = false, want true")
	}
	epoch := b.sched.epochNow()
	b.delivering("o1", key) // the run's answer, queued for the chat
	if jobs := f.refill(key, epoch); len(jobs) != 0 {
		t.Fatalf("refill = %v, want no work", jobs)
	}
	if n := released.Load(); n != 0 || !f.holds(key) {
		t.Fatalf("released %d times (held %v) while its answer was still posting", n, f.holds(key))
	}
	b.settled("o1")
	deadline := time.Now().Add(5 * time.Second)
	for released.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := released.Load(); n != 1 || f.holds(key) {
		t.Errorf("released %d times (held %v) once the answer was posted, want once", n, f.holds(key))
	}
}

// TestFeederReadsAgainWhenTheReleaseKeepsTheLease: a conversation out
// of work is released idle; when the store keeps its lease (a job was
// stored since the read, by a process whose Hold the lease refused),
// the feeder reads again and hands that job out; when that read finds
// nothing to hand out, it frees the lease whatever is stored.
func TestFeederReadsAgainWhenTheReleaseKeepsTheLease(t *testing.T) {
	const key = "telegram:1"
	for _, c := range []struct {
		name    string
		stored  bool   // the kept release's job is there to read
		want    []bool // the releases' idle, in turn
		handout int    // jobs the refill hands out
	}{
		{"a job stored since the read", true, []bool{true}, 1},
		{"a job handed out already", false, []bool{true, false}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := New(newMemStore(), &mockAgent{}, Config{Workers: 1})
			q := newSlowRelease("")
			var mu sync.Mutex
			var idles []bool
			q.ReleaseFn = func(_ context.Context, key string, idle bool) (bool, error) {
				mu.Lock()
				defer mu.Unlock()
				idles = append(idles, idle)
				if !idle {
					return false, nil
				}
				if c.stored {
					q.put(Job{ID: "j2", ThreadKey: key})
				}
				return true, nil
			}
			f := newFeeder(b, q)
			b.feed = f
			q.put(Job{ID: "j1", ThreadKey: key})
			if !f.offer(t.Context(), key) {
				t.Fatal("offer of a conversation with a job = false, want true")
			}
			jobs := f.refill(key, b.sched.epochNow())
			if len(jobs) != c.handout || (c.handout > 0 && jobs[0].ID != "j2") {
				t.Errorf("refill = %v, want %d job(s), j2", jobs, c.handout)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(idles, c.want) {
				t.Errorf("releases, idle: %v, want %v", idles, c.want)
			}
			if held := f.holds(key); held != (c.handout > 0) {
				t.Errorf("held after the refill: %v, want %v", held, c.handout > 0)
			}
		})
	}
}

// TestFeederNotifiedAsksNoFillForAKnownConversation: a job stored
// anywhere marks a conversation this process holds to be read again,
// asks nothing for one it does not hold (the job's own process leases
// it), and asks for a fill only when the notification names none.
func TestFeederNotifiedAsksNoFillForAKnownConversation(t *testing.T) {
	b := New(newMemStore(), &mockAgent{}, Config{Workers: 1})
	q := newSlowRelease("")
	f := newFeeder(b, q)
	b.feed = f
	q.put(Job{ID: "j1", ThreadKey: "telegram:1"})
	if !f.offer(t.Context(), "telegram:1") {
		t.Fatal("offer of a conversation with a job = false, want true")
	}
	fills := func() int {
		n := 0
		for {
			select {
			case <-f.kick:
				n++
			default:
				return n
			}
		}
	}
	fills()
	dirty := func(key string) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.dirty[key]
	}
	f.notified("telegram:2")
	if n := fills(); n != 0 || dirty("telegram:2") || f.holds("telegram:2") {
		t.Errorf("a job of a conversation held elsewhere: %d fills, dirty %v, held %v; want none", n, dirty("telegram:2"), f.holds("telegram:2"))
	}
	f.notified("telegram:1")
	if n := fills(); n != 0 || !dirty("telegram:1") {
		t.Errorf("a job of a conversation held here: %d fills, dirty %v; want none, dirty", n, dirty("telegram:1"))
	}
	f.notified("")
	if n := fills(); n != 1 {
		t.Errorf("a notification naming no conversation: %d fills, want 1", n)
	}
}

// TestFeederReleaseFillsOnlyWhenConversationsWait: releasing a
// conversation asks for a fill only when the last fill left waiting
// conversations for later (a fill is a Pending query).
func TestFeederReleaseFillsOnlyWhenConversationsWait(t *testing.T) {
	for _, more := range []bool{false, true} {
		b := New(newMemStore(), &mockAgent{}, Config{Workers: 1})
		q := newSlowRelease("")
		f := newFeeder(b, q)
		b.feed = f
		const key = "telegram:1"
		q.put(Job{ID: "j1", ThreadKey: key})
		if !f.offer(t.Context(), key) {
			t.Fatal("offer of a conversation with a job = false, want true")
		}
		for len(f.kick) > 0 {
			<-f.kick
		}
		f.setMore(more)
		if jobs := f.refill(key, b.sched.epochNow()); len(jobs) != 0 || f.holds(key) {
			t.Fatalf("refill = %v, held %v; want none, released", jobs, f.holds(key))
		}
		if fills := len(f.kick); fills != map[bool]int{false: 0, true: 1}[more] {
			t.Errorf("with conversations left waiting %v: %d fills asked at the release", more, fills)
		}
	}
}

// TestFeederWaitingConversationGoesFirst: a conversation whose work
// waits for a holder (its holder died) is leased by a fill however many
// conversations this process holds with work, and its job is the next
// one a worker takes, before theirs; a fill takes at most max such
// conversations, and fills again once a worker takes one.
func TestFeederWaitingConversationGoesFirst(t *testing.T) {
	b := New(newMemStore(), &mockAgent{}, Config{Workers: 1}) // max 2
	q := newSlowRelease("")
	f := newFeeder(b, q)
	b.sched.started = f.wakeIfMore
	ctx := t.Context()
	for _, key := range []string{"telegram:1", "telegram:2"} {
		for i := range 3 {
			q.put(Job{ID: fmt.Sprintf("%s-%d", key, i), ThreadKey: key})
		}
		if !f.offer(ctx, key) {
			t.Fatalf("offer of %s, with jobs, = false", key)
		}
	}
	for _, key := range []string{"telegram:7", "telegram:8", "telegram:9"} {
		q.put(Job{ID: key + "-0", ThreadKey: key})
	}
	q.PendingFn = func(context.Context, []string, int, bool) ([]string, error) {
		q.mu.Lock()
		defer q.mu.Unlock()
		return slices.Sorted(maps.Keys(q.jobs)), nil
	}
	next := func() string {
		t.Helper()
		j, ok := b.sched.next(ctx)
		if !ok {
			t.Fatal("no job handed out")
		}
		return j.ID
	}
	kicked := func() bool {
		select {
		case <-f.kick:
			return true
		default:
			return false
		}
	}

	f.fill(ctx)
	if got := q.holdsOf("telegram:9"); got != 0 {
		t.Errorf("a fill with max (2) conversations waiting for a worker leased a third")
	}
	kicked()
	if got, want := next(), "telegram:7-0"; got != want {
		t.Fatalf("first job handed out after the fill: %s, want %s (the conversation that waited for a holder)", got, want)
	}
	if !kicked() {
		t.Error("a worker took a waiting conversation's job, with another left waiting: no fill asked")
	}
	f.fill(ctx)
	for _, want := range []string{"telegram:8-0", "telegram:9-0", "telegram:1-0", "telegram:2-0"} {
		if got := next(); got != want {
			t.Errorf("job handed out: %s, want %s", got, want)
		}
	}
	if kicked() {
		t.Error("a fill asked with no conversation left waiting")
	}
}

// TestHandleDoesNotWaitForTheLease: on a shared store, an event is
// acknowledged once its message and job are stored; leasing its
// conversation (round trips to the shared database, which 200 people
// writing at once made the acks queue for) happens after, counted by
// WaitIdle, and the message is then answered.
func TestHandleDoesNotWaitForTheLease(t *testing.T) {
	mem := newMemStore()
	st := &ownerStore{memStore: mem}
	st.owns.Store(true)
	holding, free := make(chan struct{}, 1), make(chan struct{})
	st.HoldFn = func(ctx context.Context, key string) (bool, error) {
		select {
		case holding <- struct{}{}:
		default:
		}
		select {
		case <-free:
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	p := newTelegram()
	ag := &mockAgent{}
	b := New(st, ag, Config{Workers: 1, AllowedUsers: []string{"telegram:42"}})
	b.AddPlatform(p)
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	handled := make(chan error, 1)
	go func() { handled <- b.Handle(t.Context(), msg("file it", "e1")) }()
	select {
	case err := <-handled:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		close(free)
		t.Fatal("Handle waited for the conversation's lease")
	}
	<-holding // the lease is being taken, after the ack
	idle := make(chan error, 1)
	go func() { idle <- b.WaitIdle(t.Context()) }()
	select {
	case err := <-idle:
		t.Fatalf("WaitIdle returned (%v) while the lease was being taken", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(free)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := b.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ag.startedList(); len(got) != 1 || got[0] != "file it" {
		t.Errorf("runs %q, want the message's one", got)
	}
}

// BenchmarkFeederFresh: a conversation's job taken while this process
// has handed out 30,000 others within retakeAfter (1,000 messages a
// second): its cost does not grow with them (it read every one at each
// take, 2026-11-28).
//
//	go test ./bot -run '^$' -bench FeederFresh -benchmem
func BenchmarkFeederFresh(b *testing.B) {
	bt := New(newMemStore(), &mockAgent{}, Config{Workers: 1})
	f := newFeeder(bt, &mockShared{})
	epoch := bt.sched.epochNow()
	for i := range 30000 {
		f.fresh(nil, []Job{{ID: fmt.Sprint("old", i), ThreadKey: "telegram:1"}}, epoch)
	}
	b.ResetTimer()
	for i := range b.N {
		if got := f.fresh(nil, []Job{{ID: fmt.Sprint("j", i), ThreadKey: "telegram:2"}}, epoch); len(got) != 1 {
			b.Fatalf("fresh %v", got)
		}
	}
}

// TestStopLeasesNoMoreJustStoredConversations: the leases of
// conversations whose job was just stored are taken after the ack,
// offerersMax at a time; once Stop began, those still waiting for their
// turn are left to the next start (or another replica's sweep), as a
// job stored while stopped is: Stop does not wait for them to be
// leased, nor does this process hold leases whose jobs it will not run.
func TestStopLeasesNoMoreJustStoredConversations(t *testing.T) {
	mem := newMemStore()
	st := &ownerStore{memStore: mem}
	st.owns.Store(true)
	var holds atomic.Int32
	holding, free := make(chan struct{}, offerersMax+1), make(chan struct{})
	st.HoldFn = func(ctx context.Context, key string) (bool, error) {
		holds.Add(1)
		holding <- struct{}{}
		<-free
		return true, nil
	}
	p := newTelegram()
	b := New(st, &mockAgent{}, Config{Workers: 1, AllowedUsers: []string{"telegram:42"}})
	b.AddPlatform(p)
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	const n = offerersMax + 2
	for i := range n {
		in := msg("file it", fmt.Sprint("e", i))
		in.ChatID = fmt.Sprint("c", i)
		if err := b.Handle(t.Context(), in); err != nil {
			t.Fatal(err)
		}
	}
	for range offerersMax {
		<-holding // offerersMax leases being taken; the others wait their turn
	}
	stopped := make(chan struct{})
	go func() { b.Stop(); close(stopped) }()
	for !b.isStopped() {
		time.Sleep(time.Millisecond)
	}
	close(free)
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return")
	}
	if got := holds.Load(); got != offerersMax {
		t.Errorf("%d leases taken, want the %d begun before Stop", got, offerersMax)
	}
}

// TestRunStartReadsTheDailyCount: on a shared store, where other
// replicas add to a person's count of the day, a run's start reads the
// count with the rest of its reads (StartQuery.Usage) and the daily cap
// goes by it, without reading it again on its own.
func TestRunStartReadsTheDailyCount(t *testing.T) {
	mem := newMemStore()
	st := &ownerStore{memStore: mem}
	st.owns.Store(true)
	b := New(st, &mockAgent{}, Config{Workers: 1, UserDailyTokens: 100, AllowedUsers: []string{"telegram:42"}})
	in := msg("file it", "e1")
	key := usageKey(in.Platform, in.UserID, b.cfg.Now())
	if err := mem.SetSetting(t.Context(), key, "120"); err != nil { // another replica's count
		t.Fatal(err)
	}
	if _, err := b.readStart(t.Context(), "j1", in); err != nil {
		t.Fatal(err)
	}
	// What the store holds now is not read again within rereadTally.
	if err := mem.SetSetting(t.Context(), key, "7"); err != nil {
		t.Fatal(err)
	}
	if got := b.ledger.spent(t.Context(), b, key); got != 120 {
		t.Errorf("the cap goes by %d tokens, want the 120 read with the run's start", got)
	}
	if !b.overCap(t.Context(), in.Platform, in.UserID) {
		t.Error("not over the cap of 100 with 120 counted")
	}
}

// TestScheduleBeforeStartWhileStopping: a job stored on a shared store
// before Start, while Stop runs: schedule reads whether the bot stopped
// under the bot's lock (go test -race saw the read after it, 2026-11-29).
func TestScheduleBeforeStartWhileStopping(t *testing.T) {
	for range 50 {
		st := &ownerStore{memStore: newMemStore()}
		b := New(st, &mockAgent{}, Config{Workers: 1})
		scheduled := make(chan struct{})
		go func() {
			defer close(scheduled)
			b.schedule(t.Context(), Job{ID: "j1", ThreadKey: "telegram:1"})
		}()
		b.Stop()
		<-scheduled
	}
}
