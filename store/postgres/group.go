package postgres

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// group commits fenced writes made at the same moment together (group
// commit): those made while one transaction of them is in flight wait
// for it, then go in the next, one commit (one WAL flush, one round
// trip) for all. While writes come side by side (the last transaction
// held more than one), the committer waits groupWindow for more before
// it takes them; otherwise a write with none in flight is committed at
// once, alone (one person alone never waits), and so is a delivery
// (groupWrite.now) with what waits beside it. One that waited groupWait for the
// transaction in flight (slow, or hung on a cut connection) is made
// alone too. Commit, SaveRun and a Delivered that records no message
// id take part, with the data keys kept for their scopes
// (keyring.sealing); what some read first (a message's event key, a
// person's settings row to merge fields in) is read for all in one
// round trip, then all are written in a second. Each keeps its own guards in the
// shared transaction (its lease's epoch, its cancel mark: writeGuards),
// so the transaction writes nothing unless every one of
// them holds; when it is refused (or fails), each is made again in a
// transaction of its own (fencedTx), which gives each its own answer: a
// refused one is refused alone.
type group struct {
	// slot is held (a value in it) by the one committing.
	slot chan struct{}

	mu      sync.Mutex // protects waiting
	waiting []*groupWrite

	// together is whether the last transaction held more than one write.
	together atomic.Bool
	// urgent wakes a committer waiting out the window: a write that must
	// not wait (groupWrite.now) has joined.
	urgent chan struct{}
}

// groupWrite is one write waiting for its transaction.
type groupWrite struct {
	ctx    context.Context // its fence and cancel mark
	scopes []string        // the scopes whose keys it seals with
	// read, when set, queues what queue needs read first (an event
	// key's freshness, settings rows locked: see Commit), sent before
	// queue is called.
	read func(p *pipe)
	// queue queues its statements on a pipe whose keys are kept ones.
	queue func(p *pipe) error
	// order sorts the writes of a transaction: the rows several may
	// lock (a person's token count) are locked in one order.
	order string
	done  chan error // its answer (buffered)
	// now is set for a write whose transaction must not wait out the
	// window: an answer's delivery, which a crash before its commit
	// posts again.
	now bool
}

// write makes w with the writes waiting, and returns once it is
// committed (or refused).
func (g *group) write(ctx context.Context, s *Store, w *groupWrite) error {
	w.ctx, w.done = ctx, make(chan error, 1)
	g.mu.Lock()
	g.waiting = append(g.waiting, w)
	g.mu.Unlock()
	if w.now {
		select {
		case g.urgent <- struct{}{}:
		default:
		}
	}
	wait := time.NewTimer(groupWait)
	defer wait.Stop()
	select {
	case err := <-w.done: // committed with the others by their committer
		return err
	case g.slot <- struct{}{}:
	case <-wait.C:
		// The transaction in flight is slow (or hangs: a connection a
		// cut network left waiting until keepalives end it): made
		// alone, as if none were in flight.
		if g.withdraw(w) {
			return s.fencedTx(ctx, w.scopes, w.read, w.queue)
		}
		return <-w.done // in that transaction already
	}
	if g.together.Load() {
		g.waitWindow(wait)
	}
	g.mu.Lock()
	batch := g.waiting
	g.waiting = nil
	g.mu.Unlock()
	g.together.Store(len(batch) > 1)
	s.commitGroup(ctx, batch)
	<-g.slot
	return <-w.done
}

// waitWindow waits groupWindow on t for more writes to join, unless one
// that must not wait is among them or joins meanwhile.
func (g *group) waitWindow(t *time.Timer) {
	select {
	case <-g.urgent: // an earlier transaction's
	default:
	}
	g.mu.Lock()
	now := slices.ContainsFunc(g.waiting, func(w *groupWrite) bool { return w.now })
	g.mu.Unlock()
	if now {
		return
	}
	t.Reset(groupWindow)
	select {
	case <-t.C:
	case <-g.urgent:
	}
}

// withdraw takes w out of the writes waiting, and reports whether it
// was there (not taken by a transaction yet).
func (g *group) withdraw(w *groupWrite) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.Index(g.waiting, w)
	if i < 0 {
		return false
	}
	g.waiting = slices.Delete(g.waiting, i, i+1)
	return true
}

// groupWindow is how long the committer waits for more writes while they
// come side by side (the bbolt store's writer waits as long, for the
// same reason: store/write.go).
const groupWindow = time.Millisecond

// groupWait is how long a write waits for the shared transaction in
// flight before it is made alone: far longer than one takes.
const groupWait = 250 * time.Millisecond

// commitGroup makes the writes of batch in one transaction (a single
// one: its own), or, when it is refused or fails, each in one of its own, and tells each its answer (those made
// alone then, once made: it does not wait for them).
func (s *Store) commitGroup(ctx context.Context, batch []*groupWrite) {
	// Alone, each is made as if none had waited (at once, side by
	// side): one that waits for a row does not hold up the others, nor
	// the next shared transaction.
	alone := func() {
		for _, w := range batch {
			go func() { w.done <- s.fencedTx(w.ctx, w.scopes, w.read, w.queue) }()
		}
	}
	if len(batch) == 1 {
		// The usual case when few write at once: made while the slot
		// is held, so that what comes meanwhile waits to share the
		// next transaction.
		w := batch[0]
		w.done <- s.fencedTx(w.ctx, w.scopes, w.read, w.queue)
		return
	}
	if len(batch) == 0 {
		return
	}
	var scopes []string
	for _, w := range batch {
		scopes = append(scopes, w.scopes...)
	}
	slices.Sort(scopes)
	scopes = slices.Compact(scopes)
	// Keys kept from earlier transactions are checked by a guard; when a
	// scope has none kept (a new conversation's first write, a new
	// period), the scopes' keys are locked and read in the first round
	// trip instead, as a transaction alone would (fencedTx), and a scope
	// with none gets one (keyring.current).
	keys, ids, kept := s.keys.sealingKeys(scopes)
	slices.SortStableFunc(batch, func(a, b *groupWrite) int { return cmp.Compare(a.order, b.order) })
	// The transaction is the others' too: its committer's context
	// canceled (its caller gone) does not end it (a COMMIT whose answer
	// is given up on may have been made, see below); it ends once every
	// write's has (all gone: a shutdown).
	ctx, stop := allDone(ctx, batch)
	defer stop()
	err := s.pipeTx(ctx, func(p *pipe) error {
		// A row another transaction holds (a frozen replica's, until
		// the server ends it) holds up only the write that needs it:
		// the others do not wait behind it for long.
		p.later(groupLockTimeoutSQL)
		for _, w := range batch {
			s.writeGuards(w.ctx, p)
		}
		reads := !kept
		if kept {
			keptKeys(p, keys, ids)
		} else {
			s.keys.lockLater(p, scopes...)
		}
		for _, w := range batch {
			if w.read != nil {
				w.read(p)
				reads = true
			}
		}
		if reads {
			if err := p.flush(ctx); err != nil {
				return err
			}
		}
		for _, w := range batch {
			if err := w.queue(p); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		for _, w := range batch {
			w.done <- nil
		}
		return
	}
	if errors.Is(err, errCommitUnknown) {
		// Made, perhaps: made again alone, a write could be there twice
		// (a message, a journal entry, a token count). Each is told, as a
		// transaction of its own would tell it.
		for _, w := range batch {
			w.done <- err
		}
		return
	}
	if errors.Is(err, errKeyGone) {
		s.keys.forgetSealing(ids)
	}
	alone()
}

// allDone returns a context with ctx's values that ends once the
// contexts of every write of batch have ended, and its stop.
func allDone(ctx context.Context, batch []*groupWrite) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var left atomic.Int64
	left.Store(int64(len(batch)))
	stops := make([]func() bool, 0, len(batch))
	for _, w := range batch {
		stops = append(stops, context.AfterFunc(w.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		}))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// groupLockTimeoutSQL bounds how long a shared transaction waits for a
// row lock; past it, it fails and each write is made alone (and waits
// as long as it must).
const groupLockTimeoutSQL = `SET LOCAL lock_timeout = '200ms'`

// groupOrder is the order of a write whose conversation is ctx's
// fence's, whose first token count is count's.
func groupOrder(ctx context.Context, count string) string {
	f, _ := ctx.Value(fenceKey{}).(fence)
	return count + "\x00" + f.key
}
