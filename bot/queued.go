package bot

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot/outbound"
)

// RateLimited is implemented by a Platform's error that asks for a pause
// before the next call (an HTTP 429 with Retry-After, Telegram's
// retry_after): the platform's send queue waits that long, then retries.
type RateLimited = outbound.RateLimited

// RetryLater wraps err, a platform's rate-limit answer, as RateLimited:
// the send queue waits after before retrying the call.
func RetryLater(err error, after time.Duration) error { return outbound.RetryLater(err, after) }

// queuedPlatform is a Platform whose calls go through its sender, with
// every text posted or edited redacted.
type queuedPlatform struct {
	p      Platform
	s      *outbound.Queue
	redact *agent.Redactor // nil: nothing hidden
	log    *slog.Logger
}

// queued wraps q's platform so that every call goes through q's sender,
// keeping the platform's optional abilities (Editor, ButtonAnswerer) and
// no others.
func queued(q *queuedPlatform) Platform {
	p := q.p
	ed, canEdit := p.(Editor)
	ba, canAnswer := p.(ButtonAnswerer)
	switch {
	case canEdit && canAnswer:
		return struct {
			*queuedPlatform
			queuedEditor
			queuedAnswerer
		}{q, queuedEditor{q, ed}, queuedAnswerer{q, ba}}
	case canEdit:
		return struct {
			*queuedPlatform
			queuedEditor
		}{q, queuedEditor{q, ed}}
	case canAnswer:
		return struct {
			*queuedPlatform
			queuedAnswerer
		}{q, queuedAnswerer{q, ba}}
	}
	return q
}

// redacted returns m with secrets hidden in its text and button labels.
func redacted(r *agent.Redactor, m Outgoing) Outgoing {
	m.Text = r.String(m.Text)
	if len(m.Buttons) > 0 {
		bs := make([]Button, len(m.Buttons))
		for i, bt := range m.Buttons {
			bs[i] = bt
			bs[i].Label = r.String(bt.Label)
		}
		m.Buttons = bs
	}
	return m
}

// Name implements Platform.
func (q *queuedPlatform) Name() string { return q.p.Name() }

// Send implements Platform: it waits for its turn in the queue.
func (q *queuedPlatform) Send(ctx context.Context, m Outgoing) (string, error) {
	var id string
	m = redacted(q.redact, m)
	err := q.s.Do(ctx, m.ChatID, "send", func(ctx context.Context) error {
		var err error
		id, err = q.p.Send(ctx, m)
		return err
	})
	if err != nil {
		return "", err // id may still be written: the call can be made during shutdown
	}
	return id, nil
}

// sendThen queues m without waiting and calls then with the posted
// message's id, or the error, once the call is made.
func (q *queuedPlatform) sendThen(m Outgoing, then func(id string, err error)) {
	q.postThen(m, q.p.Send, then)
}

// resender sends an entry that may have been posted already: a
// Resender looks for it first (see Resender); other platforms post it
// again.
func (q *queuedPlatform) resender(since time.Time) func(context.Context, Outgoing) (string, error) {
	if rs, ok := q.p.(Resender); ok {
		return func(ctx context.Context, m Outgoing) (string, error) { return rs.Resend(ctx, m, since) }
	}
	return q.p.Send
}

// postThen queues send of m, redacted, without waiting and calls then
// with the posted message's id, or the error, once the call is made.
func (q *queuedPlatform) postThen(m Outgoing, send func(context.Context, Outgoing) (string, error), then func(id string, err error)) {
	m = redacted(q.redact, m)
	var id string
	q.s.PostThen(m.ChatID, "send", func(ctx context.Context) error {
		var err error
		id, err = send(ctx, m)
		return err
	}, func(err error) { then(id, err) })
}

// sendLater queues m without waiting.
func (q *queuedPlatform) sendLater(m Outgoing) {
	m = redacted(q.redact, m)
	q.s.Post(m.ChatID, "send", func(ctx context.Context) error {
		_, err := q.p.Send(ctx, m)
		return err
	})
}

// answerLater queues a button answer without waiting.
func (q *queuedPlatform) answerLater(ref, text string) {
	if a, ok := q.p.(ButtonAnswerer); ok && ref != "" {
		q.s.Post(ref, "answer button", func(ctx context.Context) error { return a.AnswerButton(ctx, ref, text) })
	}
}

type queuedEditor struct {
	q  *queuedPlatform
	ed Editor
}

// Edit implements Editor: it waits for its turn in the queue.
func (e queuedEditor) Edit(ctx context.Context, id string, m Outgoing) error {
	m = redacted(e.q.redact, m)
	return e.q.s.Do(ctx, m.ChatID, "edit", func(ctx context.Context) error { return e.editNow(ctx, func() string { return id }, m) })
}

// editLater queues a status message's edit (droppable: see outbound.Queue.PostDroppable) of
// the message id names without waiting; a failure is logged. id and text
// are asked when the edit is made, so id may name a message queued before
// it in the same chat and not posted yet ("": no message, nothing to
// edit), and the text is the latest. then, when set, hears the result.
//
// final says the edit is the status message's last (settle): no later
// edit would show what it says, so it waits out a rate limit instead of
// being dropped.
func (e queuedEditor) editLater(id func() string, m Outgoing, text func() string, final bool, then func(error)) {
	// A run's own output waits for room rather than be dropped, as its
	// answer does; only replies made while acknowledging an event are
	// dropped when the queue is full.
	post := e.q.s.PostDroppable
	if final {
		post = e.q.s.PostThen
	}
	post(m.ChatID, "edit", func(ctx context.Context) error {
		if text != nil {
			m.Text = text()
		}
		return e.editNow(ctx, id, redacted(e.q.redact, m))
	}, func(err error) {
		if then != nil {
			then(err)
		}
		if err != nil && !errors.Is(err, outbound.ErrSkipped) {
			e.q.log.Warn("edit status message", slog.String("platform", e.q.p.Name()), slog.Any("err", err))
		}
	})
}

func (e queuedEditor) editNow(ctx context.Context, id func() string, m Outgoing) error {
	msgID := id()
	if msgID == "" {
		return nil
	}
	return e.ed.Edit(ctx, msgID, m)
}

// EditInterval implements Editor.
func (e queuedEditor) EditInterval() time.Duration { return e.ed.EditInterval() }

type queuedAnswerer struct {
	q  *queuedPlatform
	ba ButtonAnswerer
}

// AnswerButton implements ButtonAnswerer: it waits for its turn in the
// queue.
func (a queuedAnswerer) AnswerButton(ctx context.Context, ref, text string) error {
	return a.q.s.Do(ctx, ref, "answer button", func(ctx context.Context) error { return a.ba.AnswerButton(ctx, ref, text) })
}
