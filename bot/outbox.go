package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// outbound makes an outbox entry for m, redacted: it is stored.
func (b *Bot) outbound(platform string, m Outgoing) Outbound {
	m = redacted(b.cfg.Redact, m)
	return Outbound{ID: newID(), Platform: platform, Msg: m, Created: b.cfg.Now()}
}

// deliver queues a stored outbox entry on its platform's send queue,
// behind what is queued for the same chat (the run's status message and
// its edits), and returns without waiting for the post: the worker goes
// on to the next run while the platform answers. The entry is already
// durable; see delivered for what happens once the post is made.
func (b *Bot) deliver(ctx context.Context, ob Outbound) {
	ctx = context.WithoutCancel(ctx)
	q := b.queue(ob.Platform)
	if q == nil {
		b.delivered(ctx, ob, "", fmt.Errorf("bot: no platform %q", ob.Platform))
		return
	}
	q.sendThen(ob.Msg, func(id string, err error) { b.delivered(ctx, ob, id, err) })
}

// redeliver queues what a previous process left in the outbox, in order,
// without waiting for the posts (WaitIdle does).
func (b *Bot) redeliver(ctx context.Context, outbox []Outbound) {
	for _, ob := range outbox {
		b.deliver(ctx, ob)
	}
}

// delivered removes a posted entry from the outbox (recording a
// question's message id in its run). One that could not be posted stays
// there for the next start; one older than the dedupe window is given up
// (logged).
func (b *Bot) delivered(ctx context.Context, ob Outbound, id string, err error) {
	log := b.log.With(slog.String("platform", ob.Platform), slog.String("outbox_id", ob.ID), slog.String("run_id", ob.RunID))
	if err != nil {
		if errors.Is(err, ErrStopped) || b.cfg.Now().Sub(ob.Created) < b.cfg.DedupeFor {
			log.Error("message not posted; it is posted again at the next start", slog.Any("err", err))
			return
		}
		log.Error("message not posted for a day; given up", slog.Any("err", err))
	}
	if err := b.store.Delivered(ctx, ob, id); err != nil {
		log.Error("record delivery", slog.Any("err", err))
	}
}
