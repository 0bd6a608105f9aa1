package postgres

import (
	"context"
	"fmt"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.CancelFence = (*Store)(nil)

// cancelMarkKey is the context key of a cancelMark.
type cancelMarkKey struct{}

// cancelMark is the latest cancel of a conversation as its run began.
type cancelMark struct {
	key  string
	mark int64
}

// FenceCancels implements bot.CancelFence: a fenced write made with
// the context (fencedTx) reads the conversation's latest cancel in its
// first round trip, with the lease, and is refused when it is later
// than mark.
func (s *Store) FenceCancels(ctx context.Context, key string, mark int64) context.Context {
	return context.WithValue(ctx, cancelMarkKey{}, cancelMark{key: key, mark: mark})
}

// cancelsGuard, when ctx carries a cancel mark, queues on p its guard:
// the statements after it run only while no later cancel is stored;
// else p's transaction fails with bot.ErrCancelStored.
func cancelsGuard(ctx context.Context, p *pipe) {
	c, ok := ctx.Value(cancelMarkKey{}).(cancelMark)
	if !ok {
		return
	}
	p.guardLater(func() error {
		return fmt.Errorf("%w: %s (the run began after cancel %d)", bot.ErrCancelStored, c.key, c.mark)
	}, cancelsGuardSQL, c.key, c.mark)
}
