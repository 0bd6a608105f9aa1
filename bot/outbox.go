package bot

import (
	"context"
	"errors"
	"log/slog"
)

// outbound makes an outbox entry for m.
func (b *Bot) outbound(platform string, m Outgoing) Outbound {
	return Outbound{ID: newID(), Platform: platform, Msg: m, Created: b.cfg.Now()}
}

// deliver posts a stored outbox entry through the platform's send queue
// and removes it from the outbox once posted. One that could not be
// posted stays there for the next start; one older than the dedupe
// window is given up (logged).
func (b *Bot) deliver(ctx context.Context, ob Outbound) {
	ctx = context.WithoutCancel(ctx)
	log := b.log.With(slog.String("platform", ob.Platform), slog.String("outbox_id", ob.ID), slog.String("run_id", ob.RunID))
	p, err := b.platform(ob.Platform)
	if err != nil {
		log.Error("undelivered message kept for the next start", slog.Any("err", err))
		return
	}
	id, err := p.Send(ctx, ob.Msg)
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
