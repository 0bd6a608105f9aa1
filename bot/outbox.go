package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tidybot/tidybot/bot/outbound"
)

// A post of an outbox entry that fails is tried again while the bot runs:
// after retryFirst, doubling up to retryMax between tries, never sooner
// than the platform's Retry-After, for up to retryFor after the first
// failure. Then it waits in the outbox for the next start (logged).
const (
	retryFirst = time.Second
	retryMax   = time.Minute
	retryFor   = 10 * time.Minute
)

// outbound makes an outbox entry for m, redacted: it is stored.
func (b *Bot) outbound(platform string, m Outgoing) Outbound {
	m = redacted(b.cfg.Redact, m)
	return Outbound{ID: newID(), Platform: platform, Msg: m, Created: b.cfg.Now()}
}

// delivery is one outbox entry being posted.
type delivery struct {
	ob Outbound
	// again is set when the entry may have been posted already (left by
	// a previous process, or a failed call that may have reached the
	// platform): a Resender looks for it before posting.
	again bool
	// tries counts the failed posts in this process; failing is when
	// the first one failed.
	tries   int
	failing time.Time
}

// deliver queues a stored outbox entry on its platform's send queue,
// behind what is queued for the same chat (the run's status message and
// its edits), and returns without waiting for the post: the worker goes
// on to the next run while the platform answers. The entry is already
// durable; see delivered for what happens once the post is made.
func (b *Bot) deliver(ctx context.Context, ob Outbound) {
	b.delivering(ob.ID, jobConversation(ctx))
	b.post(context.WithoutCancel(ctx), &delivery{ob: ob})
}

// jobConversation is the key of the conversation whose job ctx belongs
// to, "" outside a job.
func jobConversation(ctx context.Context) string {
	if t := turnOf(ctx); t != nil {
		return t.key
	}
	return ""
}

// delivering records that this process delivers entry id, of
// conversation key ("" for none known), until settled, and reports
// whether it did not already.
func (b *Bot) delivering(id, key string) bool {
	b.mu.Lock()
	if _, ok := b.posting[id]; ok {
		b.mu.Unlock()
		return false
	}
	b.posting[id] = key
	b.mu.Unlock()
	if key != "" && b.feed != nil {
		b.feed.sending(key, 1)
	}
	return true
}

// settled records that this process no longer delivers entry id.
func (b *Bot) settled(id string) {
	b.mu.Lock()
	key, ok := b.posting[id]
	delete(b.posting, id)
	b.mu.Unlock()
	if ok && key != "" && b.feed != nil {
		b.feed.sending(key, -1)
	}
}

// redeliver queues what a previous process left in the outbox, in order,
// without waiting for the posts (WaitIdle does). Each may have been
// posted before the process died. One this process is delivering
// already (claimed from its own previous incarnation) is left to that
// delivery. key is their conversation's, when they are one's.
func (b *Bot) redeliver(ctx context.Context, key string, outbox []Outbound) {
	for _, ob := range outbox {
		if !b.delivering(ob.ID, key) {
			continue
		}
		b.post(context.WithoutCancel(ctx), &delivery{ob: ob, again: true})
	}
}

func (b *Bot) post(ctx context.Context, d *delivery) {
	q := b.queue(d.ob.Platform)
	if q == nil {
		b.delivered(ctx, d, "", fmt.Errorf("bot: no platform %q", d.ob.Platform))
		return
	}
	b.dropOrphan(ctx, q, d.ob.RunID, d.ob.Msg.ChatID, d.ob.Msg.ThreadID)
	m := d.ob.Msg
	m.Ref = d.ob.ID
	then := func(id string, err error) { b.delivered(ctx, d, id, err) }
	send := q.p.Send
	if d.again {
		send = q.resender(d.ob.Created)
	}
	q.postThen(m, b.ownedSend(d.ob, send), then)
}

// delivered removes a posted entry from the outbox (recording a
// question's message id in its run), at once: until that is stored, a
// crash posts the message again. One that could not be posted is tried
// again (see retryFirst), then stays for the next start; one older than
// the dedupe window is given up (logged).
func (b *Bot) delivered(ctx context.Context, d *delivery, id string, err error) {
	ob := d.ob
	log := b.log.With(slog.String("platform", ob.Platform), slog.String("outbox_id", ob.ID), slog.String("run_id", ob.RunID))
	if err != nil && !errors.Is(err, outbound.ErrStopped) && !errors.Is(err, ErrFenced) && b.cfg.Now().Sub(ob.Created) < b.cfg.DedupeFor {
		b.retry(ctx, d, err, log)
		return
	}
	defer b.settled(ob.ID)
	if err != nil {
		switch {
		case errors.Is(err, outbound.ErrStopped):
			log.Error("message not posted; it is posted again at the next start", slog.Any("err", err))
			return
		case errors.Is(err, ErrFenced):
			log.Info("message not posted: another replica claimed it and posts it", slog.Any("err", err))
			return
		}
		log.Error("message not posted for a day; given up", slog.Any("err", err))
	}
	if err := b.store.Delivered(ctx, ob, id); err != nil {
		log.Error("record delivery", slog.Any("err", err))
	}
}

// retry posts d again after a backoff, unless it has been failing for
// retryFor or the bot stops first: then it waits for the next start.
func (b *Bot) retry(ctx context.Context, d *delivery, err error, log *slog.Logger) {
	now := time.Now()
	if d.tries == 0 {
		d.failing = now
	}
	wait := min(retryFirst<<min(d.tries, 16), retryMax)
	var rl RateLimited
	if errors.As(err, &rl) {
		wait = max(wait, rl.RetryAfter())
	}
	if now.Add(wait).Sub(d.failing) > retryFor {
		b.settled(d.ob.ID)
		log.Error("message not posted; retries given up, it is posted again at the next start",
			slog.Int("tries", d.tries+1), slog.Duration("failing_for", now.Sub(d.failing)), slog.Any("err", err))
		return
	}
	d.tries++
	d.again = true // the failed call may have reached the platform
	log.Warn("message not posted; trying again", slog.Duration("in", wait), slog.Int("tries", d.tries), slog.Any("err", err))
	go func() {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
			b.post(ctx, d)
		case <-b.quit:
			b.settled(d.ob.ID)
			log.Info("stopping; the message is posted again at the next start")
		}
	}()
}
