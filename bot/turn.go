package bot

import (
	"context"
	"log/slog"
	"sync"
)

// A turn is a job's hold on its thread, from the scheduler handing the
// job out to release: the thread's next job waits for it. A run whose end
// is being committed keeps its job's turn while the worker goes on to the
// next job (see Bot.handOff), so that the store commits several runs'
// ends in one transaction instead of each worker waiting for its own.
type turn struct {
	release func() // once: the job's cleanups, then the thread is free

	// mu protects the fields below.
	mu       sync.Mutex
	cleanups []func()
	handed   bool
}

func newTurn(free func()) *turn {
	t := &turn{}
	t.release = sync.OnceFunc(func() {
		t.mu.Lock()
		cs := t.cleanups
		t.mu.Unlock()
		for i := len(cs) - 1; i >= 0; i-- {
			cs[i]()
		}
		free()
	})
	return t
}

// atRelease runs f when the turn is released, after the job's run (if
// any) has ended in the store: a job's cleanup, such as deleting it.
func (t *turn) atRelease(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// handedOff reports whether a goroutine now holds the turn.
func (t *turn) handedOff() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.handed
}

type turnKey struct{}

func withTurn(ctx context.Context, t *turn) context.Context {
	return context.WithValue(ctx, turnKey{}, t)
}

// turnOf returns the turn of the job ctx belongs to, or nil.
func turnOf(ctx context.Context) *turn {
	t, _ := ctx.Value(turnKey{}).(*turn)
	return t
}

// handOff runs tail, the end of a job (committing its run's end, then
// posting), in a goroutine that holds the job's turn until tail is done,
// and returns at once; without a turn to hand off (ctx is no worker's
// job), it runs tail and returns its error. At most Workers tails run at
// once: a further one waits for room, so a slow disk slows the workers
// down instead of piling up runs.
func (b *Bot) handOff(ctx context.Context, r *Run, tail func() error) error {
	t := turnOf(ctx)
	if t == nil {
		return tail()
	}
	t.mu.Lock()
	t.handed = true
	t.mu.Unlock()
	b.tailRoom <- struct{}{}
	b.tails.Add(1)
	go func() {
		defer b.tails.Done()
		defer func() { <-b.tailRoom }()
		defer t.release()
		if err := tail(); err != nil {
			b.log.Error("job failed", slog.String("run_id", r.ID), slog.String("thread_key", r.ThreadKey), slog.Any("err", err))
			b.replyLater(ctx, r.Platform, Outgoing{ChatID: r.ChatID, ThreadID: r.ThreadID, Text: jobFailedText})
		}
	}()
	return nil
}
