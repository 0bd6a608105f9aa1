package bot

import (
	"context"
	"log/slog"
	"slices"
	"sync"
)

// A turn is a job's hold on its thread, from the scheduler handing the
// job out until the job is done: the thread's next job waits for it. A
// run whose end is being committed keeps its job's turn while the worker
// goes on to the next job (see Bot.handOff), so that the store commits
// several runs' ends in one transaction instead of each worker waiting
// for its own. The turn ends when both the worker and the tail it handed
// off are done with the job.
type turn struct {
	free func() // frees the thread
	key  string // the thread's key

	// mu protects the fields below.
	mu       sync.Mutex
	holders  int // the worker, and the tail it handed off
	cleanups []func()
	failed   bool // the tail failed: the job stays stored
	// gone are the jobs a committed Change retired (see Bot.commit).
	gone []string
}

func newTurn(free func()) *turn { return &turn{free: free, holders: 1} }

// atRelease runs f when the turn ends, after the end of the job's run
// (if any) is in the store: a job's cleanup, such as deleting it. It is
// not run when that commit failed: the job stays, to run again at the
// next start.
func (t *turn) atRelease(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// retired notes that job id left the store in a committed transaction.
func (t *turn) retired(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gone = append(t.gone, id)
}

// isRetired reports whether job id left the store in a committed
// transaction of this turn.
func (t *turn) isRetired(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Contains(t.gone, id)
}

// commit stores c (Store.Commit). A job it retires is noted in ctx's
// turn, whose cleanup then does not delete it again: a deletion that
// finds nothing is still a write transaction (an fsync; on PostgreSQL a
// commit fenced by the lease) a message.
func (b *Bot) commit(ctx context.Context, c Change) error {
	if err := b.store.Commit(ctx, c); err != nil {
		return err
	}
	if t := turnOf(ctx); t != nil && c.DeleteJob != "" {
		t.retired(c.DeleteJob)
	}
	return nil
}

// hold adds a holder (a tail).
func (t *turn) hold() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.holders++
}

// leave drops a holder; the last one runs the cleanups and frees the
// thread.
func (t *turn) leave() {
	t.mu.Lock()
	t.holders--
	last, cs, failed := t.holders == 0, t.cleanups, t.failed
	t.mu.Unlock()
	if !last {
		return
	}
	if !failed {
		for i := len(cs) - 1; i >= 0; i-- {
			cs[i]()
		}
	}
	t.free()
}

func (t *turn) fail() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
}

type turnKey struct{}

func withTurn(ctx context.Context, t *turn) context.Context {
	return context.WithValue(ctx, turnKey{}, t)
}

// turnOf returns the turn of the job ctx belongs to (every job a worker
// handles has one; nil outside a job).
func turnOf(ctx context.Context) *turn {
	t, _ := ctx.Value(turnKey{}).(*turn)
	return t
}

// handOff runs tail, the end of a job (committing its run's end, then
// posting), in a goroutine that holds the job's turn (ctx's) until tail
// is done, and returns at once. A tail that fails keeps its job stored
// (see atRelease) and tells the user. At most Workers tails run at once:
// a further one waits for room, so a slow disk slows the workers down
// instead of piling up runs.
func (b *Bot) handOff(ctx context.Context, r *Run, tail func() error) {
	t := turnOf(ctx)
	t.hold()
	b.tailRoom <- struct{}{}
	b.runTails.Add(1)
	go func() {
		defer b.runTails.Done()
		defer func() { <-b.tailRoom }()
		defer t.leave()
		if err := tail(); err != nil {
			t.fail()
			if b.fenced(err, b.log.With(slog.String("run_id", r.ID))) {
				return // the job is the new holder's
			}
			b.log.Error("job failed; it runs again at the next start", slog.String("run_id", r.ID), slog.String("thread_key", r.ThreadKey), slog.Any("err", err))
			b.replyLater(ctx, r.Platform, r.outgoing(jobFailedText))
		}
	}()
}

// afterPreview calls then with pv's stream once pv's call in flight is
// done (see preview.stream), in a goroutine that holds the job's turn
// (ctx's), so that the answer is queued before anything the thread's
// next job posts, but not a tail's room: that call waits for the chat's
// lane (the status message before it) and the preview's record, and a
// tail that waited for it kept the workers waiting for room.
func (b *Bot) afterPreview(ctx context.Context, pv *preview, then func(Stream)) {
	t := turnOf(ctx)
	t.hold()
	b.runTails.Add(1)
	go func() {
		defer b.runTails.Done()
		defer t.leave()
		then(pv.stream())
	}()
}
