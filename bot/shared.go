package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"
)

// Shared is a Store that several processes (serve replicas) use at
// once: any of them may take any conversation's work, and a
// conversation's work is done by one process at a time, in order. A
// Store that is not Shared belongs to one process (bbolt's file lock),
// whose scheduler reads every job at Start.
type Shared interface {
	// Hold takes the lease of conversation key, reporting false when
	// another process holds it. The lease lasts until Release, the end
	// of this process (one that dies mid-run frees its conversations at
	// once) or its loss (LeasesLost, or a write refused with ErrFenced):
	// a process that stops answering the store for a lease time loses
	// its leases to the others.
	Hold(ctx context.Context, key string) (bool, error)
	// Fence returns ctx carrying the lease of key as this process holds
	// it now (ctx itself when it holds none): every write made with the
	// returned context is refused with ErrFenced, in its transaction,
	// once another process has taken the lease since.
	Fence(ctx context.Context, key string) context.Context
	// Release frees a lease Hold took. With idle, it keeps the lease
	// while the conversation has a job stored (one stored after the
	// holder last read its work, by a process whose Hold this lease
	// refused), and reports that it kept it: the holder reads again.
	Release(ctx context.Context, key string, idle bool) (kept bool, err error)
	// Pending returns up to n conversations of the given platforms that
	// have work (a stored job, a run working or queued, or an outbox
	// entry, which a process that died left) and no live holder but
	// this process perhaps, or with all those another live process
	// holds too: unfinished runs and entries first, then oldest job
	// first, those this process holds last.
	Pending(ctx context.Context, platforms []string, n int, all bool) ([]string, error)
	// Work returns a conversation's unfinished runs (working or queued,
	// without transcripts) and its jobs, oldest first; the caller holds
	// its lease (ErrFenced when it no longer does).
	Work(ctx context.Context, key string) ([]*Run, []Job, error)
	// Listen calls wake with a conversation's key each time any process
	// commits a job there ("" when the notification does not say
	// which), and cancel with a conversation's key each time any
	// process calls Cancel, until ctx ends (nil) or it fails (what was
	// sent meanwhile is missed).
	Listen(ctx context.Context, wake func(key string), cancel func(key string)) error
	// Cancel stores a /cancel for conversation key, when it has an
	// unfinished run or a job (a run not saved yet works on its job),
	// and reports whether it did: the process running the run reads it
	// at the run's next step (Cancels), and is woken sooner (Listen's
	// cancel) when the notification reaches it.
	Cancel(ctx context.Context, key string) (bool, error)
	// Cancels returns, for those of keys with a stored /cancel, the
	// number of the latest (numbers grow).
	Cancels(ctx context.Context, keys []string) (map[string]int64, error)
	// CancelMark returns the number of the latest /cancel stored for
	// conversation key (0 for none) as run runID, begun from job jobID
	// ("" for a run stored already), begins or resumes there, leaving
	// out those stored for that job or that run while it waited (the
	// run they stop is this one).
	CancelMark(ctx context.Context, key, jobID, runID string) (int64, error)
	// ClaimOutbox makes the outbox entries of the given platforms whose
	// process died (or that have none) this process's, and returns them,
	// oldest first. An entry committed by this process is its own: no
	// other claims it while this one lives. Entries committed under a
	// conversation's lease are left to ClaimThread.
	ClaimOutbox(ctx context.Context, platforms []string) ([]Outbound, error)
	// ClaimThread makes the outbox entries of conversation key whose
	// process died this process's, and returns them, with those that are
	// this process's already (it may have dropped their posts while they
	// were its previous incarnation's), oldest first: the caller holds
	// the lease of key (ErrFenced when it no longer does), which no other
	// process can take meanwhile. An entry committed under
	// the lease of key is claimed only so, by its next holder, which
	// queues it before anything it posts there (Pending lists such a
	// conversation even when it has no other work).
	ClaimThread(ctx context.Context, key string) ([]Outbound, error)
	// Owns reports whether this process may post outbox entry id: it
	// owns it (another process may have claimed it, finding this one
	// dead while it was frozen), and it is not delivered yet.
	Owns(ctx context.Context, id string) (bool, error)
	// LeasesLost delivers a value after this process lost every lease
	// Hold took, and the lock that says it is alive, with the connection
	// holding them (noticed within seconds); one value may stand for
	// several losses. Hold takes leases again afterwards.
	LeasesLost() <-chan struct{}
}

// ErrFenced is the error of a write to a Shared store made under a
// lease (Shared.Fence) that another process has taken since: the write
// is refused, and the run that made it stops at once, posting nothing;
// the lease's new holder goes on from what was saved before.
var ErrFenced = errors.New("bot: the lease of this conversation was taken by another process")

// errLeasesLost is the cause of the interruption of the runs this
// process was running when it lost its leases.
var errLeasesLost = errors.New("bot: this process lost the leases of its conversations")

// sweepEvery is the slow safety poll of a shared store: it posts the
// answers of no conversation a dead replica left unposted, and stops
// the runs a /cancel whose notification was lost reached.
const sweepEvery = 3 * time.Second

// offerersMax is how many leases of conversations whose job was just
// stored are taken side by side (see Bot.schedule); the others wait
// their turn. pgx's pool has max(4, cores) connections: taken all at
// once (200 people writing at once), the leases made the intake's
// commits wait for a connection (BenchmarkServe, PostgreSQL dm, ack p99
// 117–124 ms unbounded against 78–89 ms with 4; docs/performance.md).
const offerersMax = 4

// fillEvery is how often a shared store is asked for work that waits
// for a holder: what a missed notification left, and the conversations
// of a replica found dead (a lease time after its last beat: the
// sooner they are seen, the sooner they are answered).
const fillEvery = time.Second

// retakeAfter is how soon this process takes again a job it handed out
// that is still stored (its run's end failed to commit): not at once, so
// that a failing store does not spin.
const retakeAfter = 30 * time.Second

// feeder fills the scheduler from a Shared store: it leases a
// conversation with work, queues its jobs (and the resume of a run a
// dead process left), and releases the lease once the conversation has
// nothing left, looking once more under the lease (refill).
//
// Fairness across replicas is decided here, in fill: a conversation
// whose work waits for a holder (its holder died, froze or was cut
// off, or it is free) has waited already, for the lease time at least,
// so it is leased whatever this process holds and queued before every
// conversation queued here (scheduler.addIn, first). What bounds it is
// max: a fill stops once max such conversations wait here for a worker,
// and fills again as each is taken by one (scheduler.started), so the
// live replicas share a dead one's conversations, each taking them as
// fast as its workers start them. A held conversation keeps its lease
// while it has work: releasing it between jobs would cost round trips
// for each, and wait for its answers to post (take).
type feeder struct {
	b    *Bot
	q    Shared
	max  int           // conversations leased by fill waiting for a worker, at most
	kick chan struct{} // a fill is wanted
	// offers bounds the leases taken side by side for jobs just stored
	// (Bot.schedule), so that they leave the database connections to the
	// intake's commits.
	offers chan struct{}

	// mu protects the fields below.
	mu sync.Mutex
	// more is set when the last fill stopped at max with waiting
	// conversations left: the next start of one fills again.
	more   bool
	held   map[string]bool      // leased (or being leased) conversations
	dirty  map[string]bool      // a job arrived for a held conversation since it was last read
	handed map[string]time.Time // job ids handed out, when
	// handOrder is handed's ids in the order they were handed out
	// (their times never decrease), so that those past retakeAfter are
	// forgotten from its front, not by reading every one at each fill.
	handOrder []handedJob
	// posts counts, by conversation, the outbox entries this process is
	// delivering (Bot.delivering); due holds the held conversations out
	// of work whose release waits for them, with their epoch.
	posts map[string]int
	due   map[string]uint64
}

func newFeeder(b *Bot, q Shared) *feeder {
	return &feeder{b: b, q: q, max: 2 * b.cfg.Workers, kick: make(chan struct{}, 1), offers: make(chan struct{}, offerersMax),
		held: map[string]bool{}, dirty: map[string]bool{}, handed: map[string]time.Time{},
		posts: map[string]int{}, due: map[string]uint64{}}
}

// wake asks for a fill without waiting.
func (f *feeder) wake() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// platforms are the platforms whose work this process takes.
func (f *feeder) platforms() []string {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	ps := make([]string, 0, len(f.b.queues))
	for name := range f.b.queues {
		ps = append(ps, name)
	}
	sort.Strings(ps)
	return ps
}

// loop fills on each wake-up and every fillEvery, and every sweepEvery
// posts what dead replicas left in the outbox, until the bot stops.
func (f *feeder) loop(ctx context.Context) {
	defer f.b.workLoops.Done()
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	t := time.NewTicker(fillEvery)
	defer t.Stop()
	for {
		select {
		case <-f.b.quit:
			return
		case <-f.kick:
		case <-t.C:
		case <-sweep.C:
			f.claimOutbox(ctx)
			f.b.stopCancelled(ctx)
		}
		f.fill(ctx)
	}
}

// recoverRetry is how long a starting process tries again to lease the
// conversations with work it could not lease at once: a process killed
// just before (a restart) may hold them for a moment, until the
// database has seen its connection end.
const recoverRetry = 3 * time.Second

// recover leases the conversations with work as this process starts
// and queues their work before Start returns, as Start does on a store
// of its own (so that a `chat` started to finish what a killed one left
// finds it queued, not idle). Those it cannot lease at once it tries
// again for recoverRetry, counted as work to come (WaitIdle waits).
func (f *feeder) recover(ctx context.Context) {
	keys, err := f.q.Pending(ctx, f.platforms(), f.max, true) // a killed process may hold them for a moment
	if err != nil {
		f.b.log.Error("find pending work", slog.Any("err", err))
		return
	}
	missed := slices.DeleteFunc(keys, func(key string) bool { return f.lease(ctx, key, true) || f.holds(key) })
	if len(missed) == 0 {
		return
	}
	f.b.sched.expect()
	f.b.workLoops.Add(1)
	go func() {
		defer f.b.workLoops.Done()
		defer f.b.sched.settle()
		for deadline := time.Now().Add(recoverRetry); len(missed) > 0 && time.Now().Before(deadline); {
			select {
			case <-f.b.quit:
				return
			case <-time.After(recoverRetry / 15):
			}
			missed = slices.DeleteFunc(missed, func(key string) bool { return f.lease(ctx, key, true) || f.holds(key) })
		}
	}()
}

// holds reports whether this process holds conversation key.
func (f *feeder) holds(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held[key]
}

// watchLeases waits for the loss of the leases (see lost) until the bot
// stops.
func (f *feeder) watchLeases() {
	defer f.b.workLoops.Done()
	for {
		select {
		case <-f.b.quit:
			return
		case <-f.q.LeasesLost():
			f.lost()
		}
	}
}

// lost forgets the conversations this process held, once their leases
// were lost with their connection (another process may take them now):
// their queued jobs are dropped (they stay stored), the running ones
// become stale, and every run is interrupted as at Stop, saved and
// resumable by whichever process leases its conversation next, this
// one perhaps; a stale run posts nothing. Then a fill leases again.
func (f *feeder) lost() {
	f.mu.Lock()
	n := len(f.held)
	clear(f.held)
	clear(f.dirty)
	clear(f.handed)
	f.handOrder = nil
	clear(f.due)
	f.b.sched.drop() // under mu: a lease taken before is not recorded after
	f.mu.Unlock()
	runs := f.b.interrupt(errLeasesLost)
	f.b.log.Warn("lost the leases of this process's conversations with their database connection; runs stop at their next step and resume wherever their conversation is leased next",
		slog.Int("conversations", n), slog.Any("run_ids", runs))
	f.wake()
}

// listen runs Listen until ctx ends, again after a failure (with a
// fill, for what was missed).
func (f *feeder) listen(ctx context.Context) {
	defer f.b.workLoops.Done()
	for {
		err := f.q.Listen(ctx, f.notified, func(key string) { f.b.stopRun(key) })
		if err == nil || ctx.Err() != nil {
			return
		}
		f.b.log.Warn("listen for new jobs; trying again in 1 s, the sweep finds what comes meanwhile", slog.Any("err", err))
		f.wake()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// notified is told that a process committed a job in conversation key
// ("" when it did not say which: a fill looks for it). When this
// process holds key, its next look at key's work reads again (dirty).
// Otherwise nothing is asked of the store: the process that stored the
// job leases the conversation itself (Bot.schedule), and when another
// holds it, that holder reads the job before it releases the lease
// (take: the release keeps a lease while a job is stored). What neither
// takes, a process stopping as it stored the job, the fill every
// second finds. A fill on each notification cost every replica a
// Pending query for each message stored anywhere.
func (f *feeder) notified(key string) {
	if key == "" {
		f.wake()
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held[key] {
		f.dirty[key] = true
	}
}

// claimOutbox posts the outbox entries of dead processes that belong to
// no conversation (a conversation's are its lease holder's: claimThread).
func (f *feeder) claimOutbox(ctx context.Context) {
	obs, err := f.q.ClaimOutbox(ctx, f.platforms())
	if err != nil {
		f.b.log.Error("claim the outbox of stopped replicas", slog.Any("err", err))
		return
	}
	if len(obs) > 0 {
		f.b.log.Info("posting messages a stopped process left unsent", slog.Int("count", len(obs)))
		f.b.redeliver(ctx, "", obs)
	}
}

// fill leases the conversations whose work waits for a holder and
// queues their work first, until max of them wait here for a worker
// (see feeder).
func (f *feeder) fill(ctx context.Context) {
	room := f.max - f.b.sched.leading()
	f.setMore(room <= 0)
	if room <= 0 {
		return
	}
	keys, err := f.q.Pending(ctx, f.platforms(), 4*f.max+64, false)
	if err != nil {
		f.b.log.Error("find pending work", slog.Any("err", err))
		return
	}
	// Those this process holds are noted as having more work (lease);
	// the others are leased side by side, each lease costing several
	// round trips.
	var waiting []string
	for _, key := range keys {
		if f.holds(key) {
			f.lease(ctx, key, true)
		} else {
			waiting = append(waiting, key)
		}
	}
	f.setMore(len(waiting) > room)
	var wg sync.WaitGroup
	var prev chan struct{} // closed once the one before is queued (or not)
	for _, key := range waiting[:min(room, len(waiting))] {
		wg.Add(1)
		queued, after := make(chan struct{}), prev
		prev = queued
		go func() {
			defer wg.Done()
			f.leaseAfter(ctx, key, true, after)
			if after != nil {
				<-after // a lease refused returns at once
			}
			close(queued)
		}()
	}
	wg.Wait()
}

// setMore records whether a fill left waiting conversations for later.
func (f *feeder) setMore(more bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.more = more
}

// wakeIfMore asks for a fill when the last one left waiting
// conversations for later (more): as a worker takes the first job of a
// conversation a fill queued first (scheduler.started), and as a lease
// is released (take).
func (f *feeder) wakeIfMore() {
	f.mu.Lock()
	more := f.more
	f.mu.Unlock()
	if more {
		f.wake()
	}
}

// offer leases conversation key, a job of which this process just
// stored, unless this process holds it, and queues its work; it
// reports whether it did.
func (f *feeder) offer(ctx context.Context, key string) bool {
	return f.lease(ctx, key, false)
}

// lease leases conversation key unless this process holds it, and
// queues its work, first when its work waited for a holder (fill); it
// reports whether it did.
func (f *feeder) lease(ctx context.Context, key string, waited bool) bool {
	return f.leaseAfter(ctx, key, waited, nil)
}

// leaseAfter is lease, whose work is queued only once after is closed
// (nil: at once), so that conversations leased side by side keep their
// order in the scheduler.
func (f *feeder) leaseAfter(ctx context.Context, key string, waited bool, after <-chan struct{}) bool {
	f.mu.Lock()
	if f.held[key] {
		f.dirty[key] = true // the refill at its end reads it again
		f.mu.Unlock()
		return false
	}
	f.held[key] = true
	epoch := f.b.sched.epochNow()
	f.mu.Unlock()
	f.b.sched.expect()
	defer f.b.sched.settle()
	if !f.hold(ctx, key, epoch) {
		return false
	}
	f.claimThread(ctx, key)
	jobs := f.take(ctx, key, epoch)
	if after != nil {
		<-after
	}
	return len(jobs) > 0 && f.b.sched.addIn(epoch, jobs, waited)
}

// hold takes the lease of key, which the caller marked held in epoch;
// when it cannot, key is no longer held. When the leases were lost
// meanwhile, lost forgot key, and so does hold: a lease this Hold may
// have taken on the new connection stays (a session lock counts each
// Hold), so key's work is still done here, at a later fill whose Hold
// takes it once more, but not fully released until the next loss.
func (f *feeder) hold(ctx context.Context, key string, epoch uint64) bool {
	ok, err := f.q.Hold(ctx, key)
	if err != nil {
		f.b.log.Error("lease conversation", slog.String("thread_key", key), slog.Any("err", err))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.b.sched.epochNow() != epoch {
		f.wake()
		return false
	}
	if err != nil || !ok {
		delete(f.held, key)
		delete(f.dirty, key)
		return false
	}
	return true
}

// claimThread, right after this process took the lease of key, queues
// for their chat what a dead process left unposted there, before
// anything this process posts in the conversation: its answers keep
// their order. This is the one place a conversation's entries change
// hands (Shared.ClaimThread); a failure leaves them for the next holder
// (a refused claim: the lease is lost already) or the next take of the
// lease.
func (f *feeder) claimThread(ctx context.Context, key string) {
	obs, err := f.q.ClaimThread(ctx, key)
	if err != nil {
		f.b.log.Error("claim the outbox a stopped replica left in a conversation", slog.String("thread_key", key), slog.Any("err", err))
		return
	}
	if len(obs) > 0 {
		f.b.log.Info("posting messages a stopped process left unsent", slog.Int("count", len(obs)), slog.String("thread_key", key))
		f.b.redeliver(ctx, key, obs)
	}
}

// refill is the scheduler's look for more work of a held conversation
// whose queue ran out; with none, the lease is released.
func (f *feeder) refill(key string, epoch uint64) []Job {
	return f.take(context.Background(), key, epoch)
}

// take reads a held conversation's work: the resume of each unfinished
// run, then its jobs. With none, it releases the lease, unless a job
// arrived meanwhile (dirty): then it reads again. No store call is made
// under mu, so a slow database holds up only this conversation. Once
// the leases are lost (epoch is over), key is not this call's any more.
func (f *feeder) take(ctx context.Context, key string, epoch uint64) []Job {
	idle := true // the release keeps the lease while a job is stored: once
	for {
		f.mu.Lock()
		if f.b.sched.epochNow() != epoch {
			f.mu.Unlock()
			return nil
		}
		f.dirty[key] = false
		f.mu.Unlock()
		runs, jobs, err := f.q.Work(ctx, key)
		if errors.Is(err, ErrFenced) {
			f.forget(key, epoch)
			return nil
		}
		if err != nil {
			f.b.log.Error("read a conversation's work", slog.String("thread_key", key), slog.Any("err", err))
		}
		out := f.fresh(runs, jobs, epoch)
		if len(out) > 0 {
			return out
		}
		f.mu.Lock()
		again := f.dirty[key] && err == nil
		current := f.b.sched.epochNow() == epoch
		f.mu.Unlock()
		if !current {
			return nil
		}
		if again {
			continue
		}
		// Answer order: while this process still posts the
		// conversation's answers, it keeps the lease, so that no other
		// replica answers the next message before they are shown; the
		// last one settled releases it (sending).
		f.mu.Lock()
		if f.posts[key] > 0 && f.b.sched.epochNow() == epoch {
			f.due[key] = epoch
			f.mu.Unlock()
			return nil
		}
		f.mu.Unlock()
		// key stays held while its lease is released: an offer meanwhile
		// marks it dirty rather than leasing it a second time.
		kept, err := f.q.Release(context.WithoutCancel(ctx), key, idle)
		if err != nil {
			f.b.log.Error("release conversation", slog.String("thread_key", key), slog.Any("err", err))
		}
		if kept {
			// Another process stored a job since the read, and its Hold
			// was refused: read again. Once: should that read hand out
			// nothing (the job stored is one handed out already), the
			// next release frees the lease whatever is stored.
			idle = false
			continue
		}
		f.mu.Lock()
		if f.b.sched.epochNow() != epoch {
			f.mu.Unlock()
			return nil // lost forgot key
		}
		arrived := f.dirty[key]
		if !arrived {
			delete(f.held, key)
			delete(f.dirty, key)
		}
		f.mu.Unlock()
		if arrived && f.hold(ctx, key, epoch) {
			f.claimThread(ctx, key)
			continue // a job came during the release: lease and read again
		}
		// Room for a conversation the last fill left waiting, if it
		// left any (a fill at each release cost a Pending query each).
		f.wakeIfMore()
		return nil
	}
}

// sending counts n more (or, negative, fewer) outbox entries of
// conversation key that this process is delivering; once none is left,
// a held conversation whose release waited for them (take) is read
// again, and released if it has no work.
func (f *feeder) sending(key string, n int) {
	f.mu.Lock()
	f.posts[key] += n
	if f.posts[key] > 0 {
		f.mu.Unlock()
		return
	}
	delete(f.posts, key)
	epoch, due := f.due[key]
	delete(f.due, key)
	if due {
		f.b.sched.expect()
	}
	f.mu.Unlock()
	if !due {
		return
	}
	go func() {
		defer f.b.sched.settle()
		select {
		case <-f.b.quit:
			return // stopping: the lease goes with the store
		default:
		}
		if jobs := f.take(context.Background(), key, epoch); len(jobs) > 0 {
			f.b.sched.addIn(epoch, jobs, false)
		}
	}()
}

// forget drops key, whose lease another process took (a write of this
// one was refused): its jobs are that process's now. A fill may lease
// it again once it is free.
func (f *feeder) forget(key string, epoch uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.b.sched.epochNow() != epoch {
		return // lost forgot key
	}
	delete(f.held, key)
	delete(f.dirty, key)
	f.b.log.Warn("another process took the lease of this conversation; its work is left to it", slog.String("thread_key", key))
	f.wake()
}

// schedule hands job j, just stored, to whoever may run it: with a
// Shared store, the feeder, which runs a conversation's jobs only under
// its lease (this process's, or the holder's, whom the job's
// notification wakes): every job, a message's or autopilot's, is run
// once, fenced by that lease. Without one, this process's scheduler.
func (b *Bot) schedule(ctx context.Context, j Job) {
	if b.feed == nil {
		b.sched.add(j, false)
		return
	}
	ctx = context.WithoutCancel(ctx)
	b.mu.Lock()
	switch {
	case b.stopped:
		b.mu.Unlock()
		return // the stored job is the next start's
	case !b.started:
		b.mu.Unlock()
		// Before Start, as before: leased and queued at once (Start's
		// recover would find it too).
		b.feed.offer(ctx, j.ThreadKey)
		return
	}
	// Leasing the conversation and reading its work are round trips to
	// the shared database, which the event's acknowledgement does not
	// wait for (with 200 messages arriving at once they queued for the
	// pool's connections, and the acks with them): the job is stored,
	// WaitIdle counts the lease as work to come, and a sweep finds the
	// job if this process stops first. Once stopping, a lease not begun
	// is not taken: the stored job is the next start's (or another
	// replica's), as above.
	b.sched.expect()
	b.workLoops.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.workLoops.Done()
		defer b.sched.settle()
		select {
		case b.feed.offers <- struct{}{}:
		case <-b.quit:
			return
		}
		defer func() { <-b.feed.offers }()
		select {
		case <-b.quit: // both were ready
			return
		default:
		}
		b.feed.offer(ctx, j.ThreadKey)
	}()
}

// fenced reports whether err is a write refused because another
// process took the conversation's lease: the run stopped, nothing is
// posted, nothing is said to the person (the new holder goes on), and
// it is logged here.
func (b *Bot) fenced(err error, log *slog.Logger) bool {
	if !errors.Is(err, ErrFenced) {
		return false
	}
	log.Warn("lease lost: this process stopped the conversation's work and posts nothing; the process that took the lease goes on", slog.Any("err", err))
	return true
}

// ownedSend is send, made only when mayPost allows it, checked right
// before the call.
func (b *Bot) ownedSend(ob Outbound, send func(context.Context, Outgoing) (string, error)) func(context.Context, Outgoing) (string, error) {
	if b.feed == nil {
		return send
	}
	return func(ctx context.Context, m Outgoing) (string, error) {
		if err := b.mayPost(ctx, ob.ID); err != nil {
			return "", err
		}
		return send(ctx, m)
	}
}

// mayPost is the one check before outbox entry id reaches the chat, as
// a post (ownedSend) or as the end of the answer's preview
// (preview.answer): with a Shared store, this process must own the
// entry, which is not delivered yet; else the error wraps ErrFenced: a
// replica frozen past its lease whose entries another claimed posts
// none of them when it wakes. (The check and the post are not one
// step: a freeze between them still posts twice.) Without a Shared
// store, nil.
func (b *Bot) mayPost(ctx context.Context, id string) error {
	if b.feed == nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	owns, err := b.feed.q.Owns(cctx, id)
	cancel()
	if err != nil {
		return fmt.Errorf("bot: may this process post %s: %w", id, err)
	}
	if !owns {
		return fmt.Errorf("bot: outbox entry %s: %w", id, ErrFenced)
	}
	return nil
}

// fence returns ctx carrying this process's lease of conversation key,
// with a Shared store (see Shared.Fence).
func (b *Bot) fence(ctx context.Context, key string) context.Context {
	if b.feed == nil {
		return ctx
	}
	return b.feed.q.Fence(ctx, key)
}

// cancelMark is, with a Shared store, the number of the latest /cancel
// stored for conversation key as run runID begins or resumes there
// (from job jobID, when set), but those stored for its job or for it
// while it waited: only a later one stops it (see stopCancelled,
// CancelFence). When it cannot be read the run does not begin (its job
// or run stays stored, tried again): a mark of 0 would let any /cancel
// of the past stop it.
func (b *Bot) cancelMark(ctx context.Context, key, jobID, runID string) (int64, error) {
	if b.feed == nil {
		return 0, nil
	}
	mark, err := b.feed.q.CancelMark(ctx, key, jobID, runID)
	if err != nil {
		return 0, fmt.Errorf("bot: the cancels of %s as a run begins: %w", key, err)
	}
	return mark, nil
}

// stopCancelled stops the runs of this process (of conversation keys,
// or all when none is given) for which a /cancel was stored since they
// began, on another replica whose notification did not come (see
// Shared.Cancel), and reports whether it stopped one.
func (b *Bot) stopCancelled(ctx context.Context, keys ...string) bool {
	if b.feed == nil {
		return false
	}
	b.mu.Lock()
	marks := map[string]int64{}
	for key, ar := range b.running {
		if len(keys) == 0 || slices.Contains(keys, key) {
			marks[key] = ar.cancelMark
		}
	}
	b.mu.Unlock()
	if len(marks) == 0 {
		return false
	}
	latest, err := b.feed.q.Cancels(ctx, slices.Collect(maps.Keys(marks)))
	if err != nil {
		b.log.Error("read the cancels of running runs", slog.Any("err", err))
		return false
	}
	stopped := false
	for key, mark := range marks {
		if latest[key] > mark && b.stopRun(key) {
			b.log.Info("stopping a run: /cancel came through another replica", slog.String("thread_key", key))
			stopped = true
		}
	}
	return stopped
}

// handedJob is a job id handed out, and when.
type handedJob struct {
	id string
	at time.Time
}

// fresh turns a conversation's work into jobs, resumes first, leaving
// out what this process handed out within retakeAfter; none once the
// leases were lost (epoch is over).
func (f *feeder) fresh(runs []*Run, jobs []Job, epoch uint64) []Job {
	out := make([]Job, 0, len(runs)+len(jobs))
	for _, r := range runs {
		out = append(out, resumeJob(r, f.b.cfg.Now()))
	}
	out = append(out, jobs...)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.b.sched.epochNow() != epoch {
		return nil
	}
	now := time.Now() // under mu: handOrder's times never decrease
	for len(f.handOrder) > 0 && now.Sub(f.handOrder[0].at) > retakeAfter {
		if h := f.handOrder[0]; f.handed[h.id].Equal(h.at) {
			delete(f.handed, h.id)
		}
		f.handOrder = f.handOrder[1:]
	}
	kept := out[:0]
	for _, j := range out {
		if _, seen := f.handed[j.ID]; seen {
			continue
		}
		f.handed[j.ID] = now
		f.handOrder = append(f.handOrder, handedJob{j.ID, now})
		if j.Kind == JobResume {
			f.b.log.Info("resuming run", slog.String("run_id", j.RunID), slog.String("thread_key", j.ThreadKey))
		}
		kept = append(kept, j)
	}
	return kept
}

// resumeJob is the job that resumes r from its last saved step.
func resumeJob(r *Run, now time.Time) Job {
	return Job{ID: "resume-" + r.ID, Kind: JobResume, RunID: r.ID, ThreadKey: r.ThreadKey,
		Incoming: Incoming{Platform: r.Platform, ChatID: r.ChatID, ThreadID: r.ThreadID, UserID: r.UserID, DM: r.DM}, Enqueued: now}
}
