package postgres

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/tidybot/tidybot/bot"
)

// deliveries commits the records of deliveries (Delivered, of entries
// whose run records no message id) together: those made while one
// transaction of them is in flight wait for it, then go in the next,
// one commit (one WAL flush) for all (group commit). Nothing waits on
// purpose: a delivery with none in flight is committed at once, alone.
// Each keeps its own guards in the shared transaction (its lease's
// epoch, its cancel mark: fenceGuard, cancelsGuard), so the transaction
// writes nothing unless every one of them holds; when it is refused (or
// fails), each is recorded again in a transaction of its own, which
// gives each its own answer: a refused one is refused alone.
type deliveries struct {
	// slot is held (a value in it) by the one committing.
	slot chan struct{}

	mu      sync.Mutex // protects waiting
	waiting []*deliveryRecord
}

// deliveryRecord is one Delivered call waiting for its transaction.
type deliveryRecord struct {
	ctx  context.Context // its fence and cancel mark
	ob   bot.Outbound
	done chan error // its answer (buffered)
}

// record records ob's delivery with those waiting, and returns once it
// is committed (or refused).
func (d *deliveries) record(ctx context.Context, s *Store, ob bot.Outbound) error {
	r := &deliveryRecord{ctx: ctx, ob: ob, done: make(chan error, 1)}
	d.mu.Lock()
	d.waiting = append(d.waiting, r)
	d.mu.Unlock()
	select {
	case err := <-r.done: // committed with the others by their committer
		return err
	case d.slot <- struct{}{}:
	}
	d.mu.Lock()
	batch := d.waiting
	d.waiting = nil
	d.mu.Unlock()
	s.commitDeliveries(ctx, batch)
	<-d.slot
	return <-r.done
}

// commitDeliveries records the deliveries of batch in one transaction,
// or, when it is refused or fails, each in one of its own, and tells
// each its answer.
func (s *Store) commitDeliveries(ctx context.Context, batch []*deliveryRecord) {
	if len(batch) == 0 {
		return
	}
	if len(batch) > 1 {
		// Leases locked in one order by every such transaction.
		slices.SortStableFunc(batch, func(a, b *deliveryRecord) int {
			fa, _ := a.ctx.Value(fenceKey{}).(fence)
			fb, _ := b.ctx.Value(fenceKey{}).(fence)
			return cmp.Compare(fa.key, fb.key)
		})
		err := s.pipeTx(ctx, func(p *pipe) error {
			for _, r := range batch {
				s.fenceGuard(r.ctx, p)
				cancelsGuard(r.ctx, p)
			}
			for _, r := range batch {
				deliveredLater(p, r.ob)
			}
			return nil
		})
		if err == nil {
			for _, r := range batch {
				r.done <- nil
			}
			return
		}
	}
	for _, r := range batch {
		r.done <- s.delivered(r.ctx, r.ob, "")
	}
}
