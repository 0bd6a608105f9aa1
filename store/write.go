package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// maxBatch bounds the functions in one write transaction (bbolt's
// MaxBatchSize), so that one transaction's time, and the rerun of the
// others when one fails, stay bounded under a flood.
const maxBatch = 1000

// groupWindow is how long the writer, once writes are arriving side by
// side, waits for more before it commits a transaction. Each bbolt
// commit costs two fdatasyncs and a write of every page it touched
// (go.etcd.io/bbolt tx.go, Commit), whatever the number of writes in it;
// a person's message makes three writes spread over its run (its intake,
// its run's end, its answer's delivery), so without a window most
// transactions held one or two of them. BenchmarkServe (bbolt, dm) with
// 1 ms: fdatasyncs a message 1.22–1.34 → 0.59, CPU a message 15% less
// (docs/performance.md). A write that finds the writer idle
// after a transaction of one write commits at once: one person alone
// never waits for the window; nor does a delivery (updateNow), nor what
// shares its transaction: until it commits, a crash posts the message
// again at the next start.
const groupWindow = time.Millisecond

// A write is one function waiting for the writer's next transaction.
type write struct {
	fn func(*bolt.Tx) error
	// cancel is the caller's ctx.Done(): a write whose caller gave up
	// before its transaction began is not applied.
	cancel <-chan struct{}
	result chan error // buffered: the writer never waits for the caller
	// now is set for a write whose transaction must not wait out the
	// window (updateNow).
	now bool
}

// errCancelled tells update that its write was dropped, unapplied,
// because its context ended; the caller returns ctx.Err().
var errCancelled = errors.New("write cancelled before its transaction")

// update runs fn in a write transaction shared with the writes that
// arrive while the previous transaction commits (group commit), and
// while writes come side by side, with those that arrive within
// groupWindow: one fsync serves them all. A write that finds the writer
// idle, after a transaction of one write, commits at once. This
// replaces bbolt's Batch, whose timer made every write of a sequential
// caller wait out MaxBatchDelay.
//
// As with Batch, fn may run more than once (the transaction it shared is
// rolled back when another function fails), so it must be idempotent
// apart from its effects on tx; an error fn returns is its own (it is
// rerun alone) and costs the others only a rerun.
func (s *Store) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	return s.enqueue(ctx, &write{fn: fn})
}

// updateNow is update for a write whose transaction commits without
// waiting out the window: an answer's delivery, which a crash before its
// commit posts again.
func (s *Store) updateNow(ctx context.Context, fn func(*bolt.Tx) error) error {
	return s.enqueue(ctx, &write{fn: fn, now: true})
}

func (s *Store) enqueue(ctx context.Context, w *write) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.cancel, w.result = ctx.Done(), make(chan error, 1)
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return bolterrors.ErrDatabaseNotOpen
	}
	// The send may wait for the writer to take the queue in; Close
	// waits for it, and the writer keeps taking until Close.
	s.writes <- w
	s.mu.RUnlock()
	err := <-w.result
	if errors.Is(err, errCancelled) {
		return ctx.Err()
	}
	return err
}

// writeLoop is the only goroutine that runs update's functions. It exits
// when Close has closed the queue and every queued write is answered.
func (s *Store) writeLoop() {
	defer close(s.stopped)
	batch := make([]*write, 0, maxBatch)
	// together is whether the last transaction held more than one
	// write: writes are arriving side by side, and the next batch waits
	// out the window for more.
	together := false
	var window *time.Timer
	for w := range s.writes {
		batch = append(batch[:0], w)
		open := s.collect(&batch)
		if open && (together || len(batch) > 1) && !slices.ContainsFunc(batch, urgent) {
			if window == nil {
				window = time.NewTimer(groupWindow)
			} else {
				window.Reset(groupWindow)
			}
			s.gather(&batch, window.C)
			window.Stop()
		}
		together = len(batch) > 1
		s.commit(batch)
	}
}

// gather adds the writes that arrive until done fires, up to maxBatch,
// until one that must not wait (urgent) arrives, or until the queue is
// closed.
func (s *Store) gather(batch *[]*write, done <-chan time.Time) {
	for len(*batch) < maxBatch {
		select {
		case w, ok := <-s.writes:
			if !ok {
				return
			}
			*batch = append(*batch, w)
			if urgent(w) {
				return
			}
		case <-done:
			return
		}
	}
}

// urgent reports whether w's transaction must not wait out the window.
func urgent(w *write) bool { return w.now }

// collect adds the writes already queued to batch, up to maxBatch; it
// reports false once the queue is closed.
func (s *Store) collect(batch *[]*write) bool {
	for len(*batch) < maxBatch {
		select {
		case w, ok := <-s.writes:
			if !ok {
				return false
			}
			*batch = append(*batch, w)
		default:
			return true
		}
	}
	return true
}

// commit applies batch in one transaction and answers each write. A
// function that fails is taken out, the rest rerun without it, and it
// then runs alone, so that its error is its own and reaches only its
// caller.
func (s *Store) commit(batch []*write) {
	var alone []*write
	for len(batch) > 0 {
		batch = slices.DeleteFunc(batch, func(w *write) bool {
			select {
			case <-w.cancel:
				w.result <- errCancelled
				return true
			default:
				return false
			}
		})
		if len(batch) == 0 {
			break
		}
		failed := -1
		err := s.updateTx(func(tx *bolt.Tx) error {
			for i, w := range batch {
				if err := call(w.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed >= 0 && len(batch) > 1 {
			alone = append(alone, batch[failed])
			batch = slices.Delete(batch, failed, failed+1)
			continue
		}
		// Success, the error of a lone function, or bbolt's own
		// failure (a full disk), which every write shares.
		for _, w := range batch {
			w.result <- err
		}
		break
	}
	for _, w := range alone {
		s.commit([]*write{w})
	}
}

// call runs fn, turning a panic into its error as bbolt's Batch does: in
// the writer, a panic would otherwise end the process instead of the
// one write.
func call(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in write: %v", p)
		}
	}()
	return fn(tx)
}
