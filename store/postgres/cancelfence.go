package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

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

// cancelsLater, when ctx carries a cancel mark, queues on p the reading
// of the conversation's latest cancel (see Cancels); the check it
// returns (nil without a mark), called once that is sent, fails with
// bot.ErrCancelStored when it is later than the mark.
func cancelsLater(ctx context.Context, p *pipe) func() error {
	c, ok := ctx.Value(cancelMarkKey{}).(cancelMark)
	if !ok {
		return nil
	}
	var latest int64
	p.later(`SELECT coalesce(max(id), 0) FROM cancels WHERE thread_key = $1`, c.key).QueryRow(func(row pgx.Row) error {
		return row.Scan(&latest)
	})
	return func() error {
		if latest > c.mark {
			return fmt.Errorf("%w: %s (cancel %d, the run began after %d)", bot.ErrCancelStored, c.key, latest, c.mark)
		}
		return nil
	}
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
