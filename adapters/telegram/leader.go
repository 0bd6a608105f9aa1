package telegram

import (
	"context"
	"log/slog"
	"strconv"
	"time"
)

// Leader chooses the one process that long-polls a bot: Telegram serves
// getUpdates to one receiver at a time (a second poll ends the first
// with 409), so of several `tidybot serve` replicas on one database,
// one polls and the others wait to take over. The stores implement it:
// PostgreSQL with an advisory lock held on a connection of its own
// (released when that connection or its process dies), bbolt, which one
// process opens, by always leading.
type Leader interface {
	// LeadPolling blocks until this process is the only poller of bot,
	// or ctx ends (then it returns ctx's error). lead ends when the
	// leadership is lost (the connection holding it broke) or ctx ends;
	// release gives the leadership up and is called once. The values of
	// lead ride with the offsets the poll saves and the updates it hands
	// over (with the end of the poll's own context): a Leader may fence
	// those writes by them, refusing them once another process leads.
	LeadPolling(ctx context.Context, bot string) (lead context.Context, release func(), err error)
}

// Offsets keeps the getUpdates offset where every replica finds it, so
// that a new leader goes on where the old one stopped: updates it had
// stored are not asked for again (the bot's dedupe drops any that are).
type Offsets interface {
	// PollOffset returns the offset saved for bot and when it was saved
	// (0 and the zero time: none).
	PollOffset(ctx context.Context, bot string) (offset int, saved time.Time, err error)
	// SavePollOffset saves offset for bot, unless a larger one is saved.
	SavePollOffset(ctx context.Context, bot string, offset int) error
}

// offsetMaxAge is how old a saved offset may be and still be used:
// after a week without updates Telegram may choose the next update_id
// at random (core.telegram.org/bots/api#update), and an offset past it
// would confirm, and so drop, updates never seen. A day is far inside
// that; an older offset is ignored and Telegram's own confirmation
// (updates below the last offset a poll sent) decides.
const offsetMaxAge = 24 * time.Hour

// alwaysLeader leads at once: the process is the only one (no Leader
// configured).
type alwaysLeader struct{}

func (alwaysLeader) LeadPolling(ctx context.Context, _ string) (context.Context, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	lead, cancel := context.WithCancel(ctx)
	return lead, cancel, nil
}

// pollName names this bot in the Leader and Offsets: its user id, so
// that two bots on one database poll each on their own.
func (a *Adapter) pollName() string { return "telegram:" + strconv.FormatInt(a.selfID, 10) }

// startOffset is the offset a new leadership starts from: the one saved
// (unless too old), or at least from, the one this process reached.
func (a *Adapter) startOffset(ctx context.Context, from int) int {
	if a.cfg.Offsets == nil {
		return from
	}
	off, saved, err := a.cfg.Offsets.PollOffset(ctx, a.pollName())
	switch {
	case err != nil:
		a.log.Warn("telegram: could not read the saved getUpdates offset; Telegram's own confirmation decides", slog.Any("err", err))
	case off > from && time.Since(saved) < offsetMaxAge:
		return off
	}
	return from
}

// saveOffset saves offset for the next leader. A failure is logged, not
// returned: Telegram itself confirms what the next poll's offset passes,
// and the bot's dedupe drops an update handed over twice.
func (a *Adapter) saveOffset(ctx context.Context, offset int) {
	if a.cfg.Offsets == nil {
		return
	}
	// Saved at shutdown too: the next leader starts there.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := a.cfg.Offsets.SavePollOffset(ctx, a.pollName(), offset); err != nil {
		a.log.Warn("telegram: could not save the getUpdates offset", slog.Int("offset", offset), slog.Any("err", err))
	}
}
