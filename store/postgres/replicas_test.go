package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// twoReplicas opens two stores on one database, as two serve processes.
func twoReplicas(t *testing.T) (a, b *Store) {
	t.Helper()
	u := pgtest.URL(t)
	ctx := context.Background()
	var err error
	if a, err = Open(ctx, u); err != nil {
		t.Fatal(err)
	}
	if b, err = Open(ctx, u); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b
}

// twoReplicasAViaProxy opens two stores on one database, as two serve
// processes; A's connections go through px, which can pause them.
func twoReplicasAViaProxy(t *testing.T) (a, b *Store, px *pgtest.Proxy) {
	t.Helper()
	a, b, px, _ = replicasViaProxies(t, false)
	return a, b, px
}

// replicasViaProxies opens two stores on one database, as two serve
// processes; A's connections go through pa, and B's through pb when
// bViaProxy is set (else pb is nil).
func replicasViaProxies(t *testing.T, bViaProxy bool) (a, b *Store, pa, pb *pgtest.Proxy) {
	t.Helper()
	u := pgtest.URL(t)
	ctx := context.Background()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pa = pgtest.NewProxy(t, pu.Host)
	ub := u
	if bViaProxy {
		pb = pgtest.NewProxy(t, pu.Host)
		ub = pb.Via(t, u)
	}
	if a, err = Open(ctx, pa.Via(t, u)); err != nil {
		t.Fatal(err)
	}
	if b, err = Open(ctx, ub); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b, pa, pb
}

// TestIdleReleaseKeepsALeaseWhileAJobIsStored: a holder that read its
// conversation's work and found none releases it idle; a job another
// replica stored in between (its Hold refused) keeps the lease with the
// holder, which reads it; without a job, or not idle, the lease goes.
func TestIdleReleaseKeepsALeaseWhileAJobIsStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoReplicas(t)
	const key = "slack:C1:"
	hold := func(s *Store) bool {
		t.Helper()
		ok, err := s.Hold(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	release := func(idle bool) bool {
		t.Helper()
		kept, err := a.Release(ctx, key, idle)
		if err != nil {
			t.Fatal(err)
		}
		return kept
	}
	// Nothing stored: an idle release frees the lease.
	if !hold(a) {
		t.Fatal("a free conversation is not leased")
	}
	if release(true) {
		t.Fatal("an idle release without a job kept the lease")
	}
	if !hold(b) {
		t.Fatal("the lease was not freed")
	}
	if _, err := b.Release(ctx, key, false); err != nil {
		t.Fatal(err)
	}
	// A holds it with no work; B stores a job and is refused the lease.
	if !hold(a) {
		t.Fatal("a free conversation is not leased")
	}
	if _, jobs, err := a.Work(ctx, key); err != nil || len(jobs) != 0 {
		t.Fatalf("work before the job: %v, %v", jobs, err)
	}
	j := bot.Job{ID: "j1", ThreadKey: key, Kind: bot.JobIncoming}
	if err := b.Commit(ctx, bot.Change{Job: &j}); err != nil {
		t.Fatal(err)
	}
	if hold(b) {
		t.Fatal("B leased a conversation A holds")
	}
	if !release(true) {
		t.Fatal("an idle release freed the lease with a job stored")
	}
	if hold(b) {
		t.Fatal("B leased a conversation whose idle release A kept")
	}
	if _, jobs, err := a.Work(ctx, key); err != nil || len(jobs) != 1 || jobs[0].ID != "j1" {
		t.Fatalf("the holder's read after the kept release: %v, %v; want j1", jobs, err)
	}
	// Not idle (the job was handed out already): the lease goes.
	if release(false) {
		t.Fatal("a release that is not idle kept the lease")
	}
	if !hold(b) {
		t.Fatal("the lease was not freed")
	}
}

// TestIdleReleaseKeepsNoLeaseTakenMeanwhile: an idle release with a job
// stored keeps only a lease that is still its holder's. One another
// replica took meanwhile (the holder looked dead) is not kept: Work
// would hand the holder the job the new holder runs.
func TestIdleReleaseKeepsNoLeaseTakenMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := twoReplicas(t)
	const key = "slack:C2:"
	if ok, err := a.Hold(ctx, key); err != nil || !ok {
		t.Fatalf("hold: %v, %v", ok, err)
	}
	j := bot.Job{ID: "j1", ThreadKey: key, Kind: bot.JobIncoming}
	if err := b.Commit(ctx, bot.Change{Job: &j}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.pool.Exec(ctx, `UPDATE leases SET owner = 'another', epoch = nextval('lease_epochs') WHERE thread_key = $1`, key); err != nil {
		t.Fatal(err)
	}
	kept, err := a.Release(ctx, key, true)
	if err != nil {
		t.Fatal(err)
	}
	if kept {
		t.Error("an idle release kept a lease another replica holds")
	}
	if _, _, err := a.Work(ctx, key); !errors.Is(err, bot.ErrFenced) {
		t.Errorf("work after the release: %v, want bot.ErrFenced", err)
	}
}

// TestLeaseIsOneProcessAtATime: a conversation's lease is held by one
// store at a time, released by Release or by its holder's end.
func TestLeaseIsOneProcessAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoReplicas(t)
	hold := func(s *Store, key string) bool {
		t.Helper()
		ok, err := s.Hold(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !hold(a, "slack:C1:1") || hold(b, "slack:C1:1") {
		t.Fatal("both replicas hold one conversation, or the first none")
	}
	if !hold(b, "slack:C1:2") {
		t.Error("another conversation is not free")
	}
	if _, err := a.Release(ctx, "slack:C1:1", false); err != nil {
		t.Fatal(err)
	}
	if !hold(b, "slack:C1:1") || hold(a, "slack:C1:1") {
		t.Fatal("a released lease is not taken by the other replica only")
	}
	// b dies (its connection ends): a takes its conversations, once the
	// server has seen the connection end.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	soon(t, "the leases of a closed replica free", func() bool { return hold(a, "slack:C1:1") })
	if !hold(a, "slack:C1:2") {
		t.Error("the second lease of a closed replica is not free")
	}
}

// soon waits up to 5 s for cond.
func soon(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestPendingAndWork: conversations with a job or an unfinished run are
// pending, runs first, only of the platforms asked for; Work reads one.
func TestPendingAndWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoReplicas(t)
	now := time.Now()
	for i, key := range []string{"slack:C1:1", "telegram:5:", "slack:C1:1", "slack:C2:"} {
		j := bot.Job{ID: string(rune('a' + i)), ThreadKey: key, Kind: bot.JobIncoming, Enqueued: now}
		if err := a.Commit(ctx, bot.Change{Job: &j}); err != nil {
			t.Fatal(err)
		}
	}
	r := &bot.Run{ID: "r1", ThreadKey: "slack:C3:", Platform: "slack", Status: bot.RunWorking, Created: now, Updated: now}
	if err := a.SaveRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := a.Pending(ctx, []string{"slack"}, 10, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"slack:C3:", "slack:C1:1", "slack:C2:"}; !slices.Equal(got, want) {
		t.Errorf("pending: got %v, want %v", got, want)
	}
	if _, _, err := a.Work(ctx, "slack:C1:1"); !errors.Is(err, bot.ErrFenced) {
		t.Errorf("work of a conversation not held: %v, want bot.ErrFenced", err)
	}
	for _, key := range []string{"slack:C1:1", "slack:C3:"} {
		if ok, err := a.Hold(ctx, key); !ok || err != nil {
			t.Fatalf("hold %s: %v %v", key, ok, err)
		}
	}
	runs, jobs, err := a.Work(ctx, "slack:C1:1")
	if err != nil || len(runs) != 0 || len(jobs) != 2 || jobs[0].ID != "a" || jobs[1].ID != "c" {
		t.Errorf("work of slack:C1:1: %v %v %v", runs, jobs, err)
	}
	runs, _, err = a.Work(ctx, "slack:C3:")
	if err != nil || len(runs) != 1 || runs[0].ID != "r1" {
		t.Errorf("work of slack:C3: %v %v", runs, err)
	}
	// A conversation a live replica holds is its own: not pending to
	// another; its holder sees it last.
	if got, err := b.Pending(ctx, []string{"slack"}, 10, false); err != nil || !slices.Equal(got, []string{"slack:C2:"}) {
		t.Errorf("pending to the other replica: got %v %v, want [slack:C2:]", got, err)
	}
	if got, err := a.Pending(ctx, []string{"slack"}, 10, false); err != nil || !slices.Equal(got, []string{"slack:C2:", "slack:C3:", "slack:C1:1"}) {
		t.Errorf("pending to the holder: got %v %v, want [slack:C2: slack:C3: slack:C1:1]", got, err)
	}
	if got, err := b.Pending(ctx, []string{"slack"}, 10, true); err != nil || !slices.Equal(got, []string{"slack:C3:", "slack:C1:1", "slack:C2:"}) {
		t.Errorf("all pending to the other replica: got %v %v, want [slack:C3: slack:C1:1 slack:C2:]", got, err)
	}
}

// TestListenWakesOnAJob: a job committed by one replica wakes the other
// at once, with its conversation's key, and a Cancel of one reaches the
// other with its key.
func TestListenWakesOnAJob(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t)
	ctx, cancel := context.WithCancel(context.Background())
	woke := make(chan string, 16)
	cancels := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.Listen(ctx, func(key string) { woke <- key }, func(key string) { cancels <- key })
	}()
	defer func() { cancel(); <-done }()
	// The listener may not be listening yet: commit until it wakes.
	deadline := time.After(10 * time.Second)
	for i := 0; ; i++ {
		j := bot.Job{ID: "j" + string(rune('a'+i)), ThreadKey: "slack:C1:", Kind: bot.JobIncoming}
		if err := a.Commit(context.Background(), bot.Change{Job: &j}); err != nil {
			t.Fatal(err)
		}
		select {
		case key := <-woke:
			if key != "slack:C1:" {
				t.Errorf("woken for a job of %q, want slack:C1:", key)
			}
			// An earlier build's notification names no conversation.
			if _, err := a.pool.Exec(context.Background(), `SELECT pg_notify($1, current_schema())`, jobsChannel); err != nil {
				t.Fatal(err)
			}
			for waiting := true; waiting; {
				select {
				case key := <-woke:
					waiting = key != ""
				case <-time.After(5 * time.Second):
					t.Fatal("no wake-up for a notification without a key")
				}
			}
			// Only a conversation with work has a run to stop.
			if stored, err := a.Cancel(context.Background(), "slack:C2:"); err != nil || stored {
				t.Fatalf("cancel of a conversation with no work: stored %v, %v", stored, err)
			}
			if stored, err := a.Cancel(context.Background(), "slack:C1:"); err != nil || !stored {
				t.Fatalf("cancel of a conversation with a job: stored %v, %v", stored, err)
			}
			select {
			case key := <-cancels:
				if key != "slack:C1:" {
					t.Errorf("cancel of %q, want slack:C1:", key)
				}
			case <-time.After(5 * time.Second):
				t.Error("a Cancel did not reach the other replica")
			}
			return
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatal("no wake-up for a committed job")
		}
	}
}

// TestOutboxIsClaimedOnlyFromADeadReplica: an entry is its committer's
// while it lives; once it is gone one replica claims it, once.
func TestOutboxIsClaimedOnlyFromADeadReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoReplicas(t)
	if _, err := a.Hold(ctx, "x"); err != nil { // a is a running replica
		t.Fatal(err)
	}
	ob := bot.Outbound{ID: "o1", Platform: "slack", Msg: bot.Outgoing{ChatID: "C1", Text: "the answer"}, Created: time.Now()}
	tg := bot.Outbound{ID: "o2", Platform: "telegram", Msg: bot.Outgoing{ChatID: "5", Text: "other"}, Created: time.Now()}
	if err := a.Commit(ctx, bot.Change{Send: []bot.Outbound{ob, tg}}); err != nil {
		t.Fatal(err)
	}
	got, err := b.ClaimOutbox(ctx, []string{"slack"})
	if err != nil || len(got) != 0 {
		t.Fatalf("claimed from a live replica: %v %v", got, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	soon(t, "the entry of a closed replica claimed", func() bool {
		got, err = b.ClaimOutbox(ctx, []string{"slack"})
		return err != nil || len(got) > 0
	})
	if err != nil || len(got) != 1 || got[0].Msg.Text != "the answer" {
		t.Fatalf("claim after its replica ended: %v %v", got, err)
	}
	if again, err := b.ClaimOutbox(ctx, []string{"slack"}); err != nil || len(again) != 0 {
		t.Errorf("claimed twice: %v %v", again, err)
	}
	c, err := Open(ctx, b.pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := c.ClaimOutbox(ctx, []string{"slack"}); err != nil || len(got) != 0 {
		t.Errorf("a third replica claimed a live replica's entry: %v %v", got, err)
	}
}

// BenchmarkWakeUp measures how long after one replica commits a job
// another replica's Listen wakes (LISTEN/NOTIFY), commit included.
//
//	go test ./store/postgres -run '^$' -bench WakeUp -benchtime 200x
func BenchmarkWakeUp(b *testing.B) {
	u := pgtest.URL(b)
	ctx := context.Background()
	x, err := Open(ctx, u)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	y, err := Open(ctx, u)
	if err != nil {
		b.Fatal(err)
	}
	defer y.Close()
	woke := make(chan struct{}, 1)
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = y.Listen(lctx, func(string) {
			select {
			case woke <- struct{}{}:
			default:
			}
		}, func(string) {})
	}()
	defer func() { cancel(); <-done }()
	commit := func(i int) {
		j := bot.Job{ID: fmt.Sprint("w", i), ThreadKey: "slack:C1:", Kind: bot.JobIncoming}
		if err := x.Commit(ctx, bot.Change{Job: &j}); err != nil {
			b.Fatal(err)
		}
	}
	// Wait until the listener listens.
	for i := 0; ; i++ {
		commit(-1 - i)
		select {
		case <-woke:
		case <-time.After(100 * time.Millisecond):
			continue
		}
		break
	}
	var total time.Duration
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		commit(i)
		<-woke
		total += time.Since(t0)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/wake")
}

// TestConversationOutboxGoesWithItsLease: an entry committed under a
// conversation's lease is taken over, once its replica is gone, only by
// the conversation's next lease holder (ClaimThread), so that it is
// queued before anything that holder posts there; the sweep's
// ClaimOutbox leaves it, Pending lists its conversation though it has no
// other work, and a replica that does not hold the lease cannot claim
// it.
func TestConversationOutboxGoesWithItsLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoReplicas(t)
	const key = "slack:D1:"
	if ok, err := a.Hold(ctx, key); !ok || err != nil {
		t.Fatalf("hold: %v %v", ok, err)
	}
	ob := bot.Outbound{ID: "o1", Platform: "slack", Msg: bot.Outgoing{ChatID: "D1", Text: "m6's answer"}, Created: time.Now()}
	if err := a.Commit(a.Fence(ctx, key), bot.Change{Send: []bot.Outbound{ob}}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.ClaimThread(ctx, key); !errors.Is(err, bot.ErrFenced) || len(got) != 0 {
		t.Fatalf("a claim without the lease: %v %v, want ErrFenced", got, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := b.ClaimOutbox(ctx, []string{"slack"}); err != nil || len(got) != 0 {
		t.Fatalf("the sweep claimed a conversation's entry: %v %v", got, err)
	}
	if keys, err := b.Pending(ctx, []string{"slack"}, 10, false); err != nil || !slices.Equal(keys, []string{key}) {
		t.Fatalf("pending: %v %v, want the conversation with a dead replica's entry", keys, err)
	}
	if ok, err := b.Hold(ctx, key); !ok || err != nil {
		t.Fatalf("hold after a's end: %v %v", ok, err)
	}
	got, err := b.ClaimThread(ctx, key)
	if err != nil || len(got) != 1 || got[0].ID != "o1" {
		t.Fatalf("the new holder's claim: %v %v", got, err)
	}
	// Still undelivered, it is returned again as b's own (b may have
	// dropped its post, as a process does when its incarnation changed).
	if again, err := b.ClaimThread(ctx, key); err != nil || len(again) != 1 || again[0].ID != "o1" {
		t.Errorf("an own undelivered entry: %v %v, want it", again, err)
	}
	if keys, err := b.Pending(ctx, []string{"slack"}, 10, false); err != nil || len(keys) != 0 {
		t.Errorf("pending once claimed by a live replica: %v %v", keys, err)
	}
	if err := b.Delivered(ctx, got[0], "ts1"); err != nil {
		t.Fatal(err)
	}
	if again, err := b.ClaimThread(ctx, key); err != nil || len(again) != 0 {
		t.Errorf("a delivered entry claimed: %v %v", again, err)
	}
}

// TestDeadOwnerIsDeadToEveryoneAtOnce: while one statement finds a dead
// replica dead by its free replica lock (its transaction still open),
// another replica's claim finds it dead too: the try of the lock leaves
// it free for the others' tries (in TestReplicasSurviveKills a dead
// replica looked alive to the conversation's new holder, whose
// ClaimThread then took none of its answers).
func TestDeadOwnerIsDeadToEveryoneAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoReplicas(t)
	// ghost beats, but holds no replica lock: its process died a moment ago.
	if _, err := a.pool.Exec(ctx, `INSERT INTO replicas (id, beat) VALUES ('ghost', now())`); err != nil {
		t.Fatal(err)
	}
	ob := bot.Outbound{ID: "o1", Platform: "slack", Msg: bot.Outgoing{ChatID: "C1", Text: "the answer"}, Created: time.Now()}
	if err := a.Commit(ctx, bot.Change{Send: []bot.Outbound{ob}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.pool.Exec(ctx, `UPDATE outbox SET owner = 'ghost'`); err != nil {
		t.Fatal(err)
	}
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var dead bool
	if err := tx.QueryRow(ctx, `SELECT `+deadOwner("'ghost'::text", "$1"), a.lease().Seconds()).Scan(&dead); err != nil || !dead {
		t.Fatalf("ghost dead: %v %v", dead, err)
	}
	got, err := b.ClaimOutbox(ctx, []string{"slack"})
	if err != nil || len(got) != 1 {
		t.Errorf("claim while another statement finds the owner dead: %v %v, want its entry", got, err)
	}
}

// TestRetiredIncarnationsConversationEntriesGoWithTheLease: after a
// replica's lease connection is lost (a cut), retire hands its entries
// of no conversation to its next incarnation, but leaves a
// conversation's with the dead one, so that whoever leases the
// conversation next claims them (TestReplicasSurviveKills -replica-cut
// 2s: another replica answered m1..m9 while m0 sat with the cut
// replica's new incarnation, which had dropped its post).
func TestRetiredIncarnationsConversationEntriesGoWithTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoReplicas(t)
	const key = "telegram:5023:"
	if ok, err := a.Hold(ctx, key); !ok || err != nil {
		t.Fatalf("hold: %v %v", ok, err)
	}
	m0 := bot.Outbound{ID: "m0", Platform: "telegram", Msg: bot.Outgoing{ChatID: "5023", Text: "m0's answer"}, Created: time.Now()}
	if err := a.Commit(a.Fence(ctx, key), bot.Change{Send: []bot.Outbound{m0}}); err != nil {
		t.Fatal(err)
	}
	other := bot.Outbound{ID: "x", Platform: "telegram", Msg: bot.Outgoing{ChatID: "5023", Text: "a reply outside a lease"}, Created: time.Now()}
	if err := a.Commit(ctx, bot.Change{Send: []bot.Outbound{other}}); err != nil {
		t.Fatal(err)
	}
	// a's next incarnation is alive: it beats and holds its replica lock.
	old, next := a.me(), newReplicaID()
	conn, err := a.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext('tidybot replica ' || current_schema()), hashtext($1))`, next); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtext('tidybot replica ' || current_schema()), hashtext($1))`, next)
	}()
	if _, err := a.pool.Exec(ctx, `INSERT INTO replicas (id, beat) VALUES ($1, now())`, next); err != nil {
		t.Fatal(err)
	}
	a.retire(old, next)
	if ok, err := b.Hold(ctx, key); !ok || err != nil {
		t.Fatalf("hold after the retire: %v %v", ok, err)
	}
	got, err := b.ClaimThread(ctx, key)
	if err != nil || len(got) != 1 || got[0].ID != "m0" {
		t.Errorf("the conversation's next holder claimed %v (%v), want m0", got, err)
	}
	var owner string
	if err := a.pool.QueryRow(ctx, `SELECT owner FROM outbox WHERE id = 'x'`).Scan(&owner); err != nil || owner != next {
		t.Errorf("the entry of no conversation is %q's (%v), want the next incarnation's", owner, err)
	}
}
