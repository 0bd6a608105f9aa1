package bot

import (
	"context"
	"log/slog"
	"time"
)

// ackTimeout bounds one acknowledgement: a platform that does not answer
// in time gets no reaction, and the status message says the rest.
const ackTimeout = 5 * time.Second

// ack shows the sender of in, on a platform that can (Acknowledger), that
// their message was received. enqueue calls it once the message and its
// job are committed, not before: a 👀 on a message whose store failed
// would promise an answer the platform's redelivery might never get
// (the store refuses it, or it is dropped as a duplicate), and an ack
// after the commit is the earliest point where the promise holds across
// a crash (the job is resumed at the next start). It does not wait for
// the platform: the call runs on its own, outside the send queue, so
// that neither a slow platform delays Handle's answer to the webhook
// nor a backlog of answers delays the reaction. Failures are logged at
// debug: an old Bot API server or a chat with reactions off gets what
// it got before, the "Working on it…" status message.
func (b *Bot) ack(in Incoming) {
	if in.MessageID == "" || in.Button != "" || b.ackStatus(in) {
		return
	}
	q := b.queue(in.Platform)
	if q == nil {
		return
	}
	a, ok := q.p.(Acknowledger)
	if !ok {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
		defer cancel()
		if err := a.Ack(ctx, in.ChatID, in.MessageID); err != nil {
			b.log.Debug("acknowledge message: not shown", slog.String("platform", in.Platform),
				slog.String("chat_id", in.ChatID), slog.Any("err", err))
		}
	}()
}
