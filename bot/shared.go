package bot

import (
	"context"
	"log/slog"
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
	// another process holds it. The lease lasts until Release or the
	// end of this process (its connection to the database), so one
	// that dies mid-run frees its conversations at once.
	Hold(ctx context.Context, key string) (bool, error)
	// Release frees a lease Hold took.
	Release(ctx context.Context, key string) error
	// Pending returns up to n conversations of the given platforms that
	// have work (a stored job, or a run working or queued, which a
	// process that died left), unfinished runs first, then oldest job
	// first. Some may be held by other processes.
	Pending(ctx context.Context, platforms []string, n int) ([]string, error)
	// Work returns a conversation's unfinished runs (working or queued,
	// without transcripts) and its jobs, oldest first; the caller holds
	// its lease.
	Work(ctx context.Context, key string) ([]*Run, []Job, error)
	// Listen calls wake each time any process commits a job, and cancel
	// with a conversation's key each time any process calls Cancel,
	// until ctx ends (nil) or it fails (what was sent meanwhile is
	// missed).
	Listen(ctx context.Context, wake func(), cancel func(key string)) error
	// Cancel asks every process to stop the run of conversation key it
	// is running (/cancel that reached another replica).
	Cancel(ctx context.Context, key string) error
	// ClaimOutbox makes the outbox entries of the given platforms whose
	// process died (or that have none) this process's, and returns them,
	// oldest first. An entry committed by this process is its own: no
	// other claims it while this one lives.
	ClaimOutbox(ctx context.Context, platforms []string) ([]Outbound, error)
}

// sweepEvery is the slow safety poll of a shared store: it finds work a
// missed notification left and answers a dead replica left unposted.
const sweepEvery = 3 * time.Second

// retakeAfter is how soon this process takes again a job it handed out
// that is still stored (its run's end failed to commit): not at once, so
// that a failing store does not spin.
const retakeAfter = 30 * time.Second

// feeder fills the scheduler from a Shared store: it leases a
// conversation with work, queues its jobs (and the resume of a run a
// dead process left), and releases the lease once the conversation has
// nothing left, looking once more under the lease (refill).
type feeder struct {
	b    *Bot
	q    Shared
	max  int           // leases held at most
	kick chan struct{} // a fill is wanted

	// mu protects the fields below.
	mu     sync.Mutex
	held   map[string]bool      // leased (or being leased) conversations
	dirty  map[string]bool      // a job arrived for a held conversation since it was last read
	handed map[string]time.Time // job ids handed out, when
}

func newFeeder(b *Bot, q Shared) *feeder {
	return &feeder{b: b, q: q, max: 2 * b.cfg.Workers, kick: make(chan struct{}, 1),
		held: map[string]bool{}, dirty: map[string]bool{}, handed: map[string]time.Time{}}
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

// loop fills on each wake-up and every sweepEvery, when it also posts
// what dead replicas left in the outbox, until the bot stops.
func (f *feeder) loop(ctx context.Context) {
	defer f.b.workLoops.Done()
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-f.b.quit:
			return
		case <-f.kick:
		case <-t.C:
			f.claimOutbox(ctx)
		}
		f.fill(ctx)
	}
}

// listen runs Listen until ctx ends, again after a failure (with a
// fill, for what was missed).
func (f *feeder) listen(ctx context.Context) {
	defer f.b.workLoops.Done()
	for {
		err := f.q.Listen(ctx, f.wake, func(key string) { f.b.stopRun(key) })
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

// claimOutbox posts the outbox entries of dead processes.
func (f *feeder) claimOutbox(ctx context.Context) {
	obs, err := f.q.ClaimOutbox(ctx, f.platforms())
	if err != nil {
		f.b.log.Error("claim the outbox of stopped replicas", slog.Any("err", err))
		return
	}
	if len(obs) > 0 {
		f.b.log.Info("posting messages a stopped process left unsent", slog.Int("count", len(obs)))
		f.b.redeliver(ctx, obs)
	}
}

// fill leases conversations with work, up to max, and queues their work.
func (f *feeder) fill(ctx context.Context) {
	f.mu.Lock()
	room := f.max - len(f.held)
	f.mu.Unlock()
	if room <= 0 {
		return
	}
	keys, err := f.q.Pending(ctx, f.platforms(), 4*f.max+64)
	if err != nil {
		f.b.log.Error("find pending work", slog.Any("err", err))
		return
	}
	for _, key := range keys {
		if room <= 0 {
			return
		}
		if f.offer(ctx, key) {
			room--
		}
	}
}

// offer leases conversation key unless this process holds it, and
// queues its work; it reports whether it did.
func (f *feeder) offer(ctx context.Context, key string) bool {
	f.mu.Lock()
	if f.held[key] {
		f.dirty[key] = true // the refill at its end reads it again
		f.mu.Unlock()
		return false
	}
	f.held[key] = true
	f.mu.Unlock()
	f.b.sched.expect()
	defer f.b.sched.settle()
	if !f.hold(ctx, key) {
		return false
	}
	jobs := f.take(ctx, key)
	for _, j := range jobs {
		f.b.sched.add(j, false)
	}
	return len(jobs) > 0
}

// hold takes the lease of key, which the caller marked held; when it
// cannot, key is no longer held.
func (f *feeder) hold(ctx context.Context, key string) bool {
	ok, err := f.q.Hold(ctx, key)
	if err != nil {
		f.b.log.Error("lease conversation", slog.String("thread_key", key), slog.Any("err", err))
	}
	if err != nil || !ok {
		f.mu.Lock()
		delete(f.held, key)
		delete(f.dirty, key)
		f.mu.Unlock()
		return false
	}
	return true
}

// refill is the scheduler's look for more work of a held conversation
// whose queue ran out; with none, the lease is released.
func (f *feeder) refill(key string) []Job {
	return f.take(context.Background(), key)
}

// take reads a held conversation's work: the resume of each unfinished
// run, then its jobs. With none, it releases the lease, unless a job
// arrived meanwhile (dirty): then it reads again. No store call is made
// under mu, so a slow database holds up only this conversation.
func (f *feeder) take(ctx context.Context, key string) []Job {
	for {
		f.mu.Lock()
		f.dirty[key] = false
		f.mu.Unlock()
		runs, jobs, err := f.q.Work(ctx, key)
		if err != nil {
			f.b.log.Error("read a conversation's work", slog.String("thread_key", key), slog.Any("err", err))
		}
		out := f.fresh(runs, jobs)
		if len(out) > 0 {
			return out
		}
		f.mu.Lock()
		again := f.dirty[key] && err == nil
		f.mu.Unlock()
		if again {
			continue
		}
		// key stays held while its lease is released: an offer meanwhile
		// marks it dirty rather than leasing it a second time.
		if err := f.q.Release(context.WithoutCancel(ctx), key); err != nil {
			f.b.log.Error("release conversation", slog.String("thread_key", key), slog.Any("err", err))
		}
		f.mu.Lock()
		arrived := f.dirty[key]
		if !arrived {
			delete(f.held, key)
			delete(f.dirty, key)
		}
		f.mu.Unlock()
		if arrived && f.hold(ctx, key) {
			continue // a job came during the release: lease and read again
		}
		f.wake() // room for another conversation
		return nil
	}
}

// fresh turns a conversation's work into jobs, resumes first, leaving
// out what this process handed out within retakeAfter.
func (f *feeder) fresh(runs []*Run, jobs []Job) []Job {
	now := time.Now()
	out := make([]Job, 0, len(runs)+len(jobs))
	for _, r := range runs {
		out = append(out, resumeJob(r, f.b.cfg.Now()))
	}
	out = append(out, jobs...)
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, at := range f.handed {
		if now.Sub(at) > retakeAfter {
			delete(f.handed, id)
		}
	}
	kept := out[:0]
	for _, j := range out {
		if _, seen := f.handed[j.ID]; seen {
			continue
		}
		f.handed[j.ID] = now
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
