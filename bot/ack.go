package bot

import (
	"context"
	"log/slog"
	"time"
)

// ackTimeout bounds one acknowledgement: a platform that does not answer
// in time gets no reaction, and the status message says the rest.
const ackTimeout = 5 * time.Second

// The sign of life: what a person sees first of the bot after writing
// is decided here, as the message is accepted, for every platform and
// surface, and nowhere else. In a thread with a status line (Slack's
// assistant pane, ThreadStatus) the line says the message is being read;
// elsewhere, on a platform that reacts (Acknowledger: Telegram's
// setMessageReaction, Slack's reactions.add), the message gets 👀; a
// thread whose line the platform refuses gets the reaction instead. A
// run whose message was acknowledged (acknowledges) posts its status
// message only once it has something to say or has worked for
// quietStatus (progress.start): a run that answers at once costs the
// chat no status message and no edit settling it, which Slack limits to
// about 50 a minute for a whole workspace (chat.update, Tier 3).
//
// ack runs once the message and its job are committed, not before: a 👀
// on a message whose store failed would promise an answer the platform's
// redelivery might never get (the store refuses it, or it is dropped as
// a duplicate), and an ack after the commit is the earliest point where
// the promise holds across a crash (the job is resumed at the next
// start). It never delays Handle's answer to the webhook, nor waits for
// a worker: the reaction or the status line is its own call outside the
// send queue (the platform's fast lane, so that no backlog of other
// chats' answers delays it); the run's first status call waits for the
// line (signShown). A platform that refuses or limits the
// call (an old Bot API server, a chat with reactions off, Slack's
// reactions.add spent for the minute) shows no reaction: the decoration
// is skipped, at once, and the answer is not delayed. Failures are
// logged at debug.
func (b *Bot) ack(in Incoming) {
	q := b.queue(in.Platform)
	if q == nil {
		return
	}
	ts, a := signOf(q.p, in)
	if ts == nil {
		if a != nil {
			go b.react(a, in)
		}
		return
	}
	// The line is set in the fast lane too, not behind other chats'
	// calls; the run's own first status call waits for it (signShown),
	// so that "reading" never lands after "working" or after the line is
	// cleared.
	key := in.ChatID + " " + in.ThreadID
	done := make(chan struct{})
	b.mu.Lock()
	if b.signs == nil {
		b.signs = map[string]chan struct{}{}
	}
	b.signs[key] = done
	b.mu.Unlock()
	go func() {
		defer func() {
			b.mu.Lock()
			if b.signs[key] == done {
				delete(b.signs, key)
			}
			b.mu.Unlock()
			close(done)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
		defer cancel()
		if err := ts.SetStatus(ctx, in.ChatID, in.ThreadID, statusReading); err != nil {
			b.log.Debug("acknowledge message: no status line", slog.String("platform", in.Platform), slog.Any("err", err))
			if a != nil {
				b.react(a, in)
			}
		}
	}()
}

// signShown returns what closes once the status line ack is setting in
// chatID's thread threadID is set (or failed); nil when none is.
func (b *Bot) signShown(chatID, threadID string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.signs[chatID+" "+threadID]
}

// react marks in with the platform's reaction.
func (b *Bot) react(a Acknowledger, in Incoming) {
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	if err := a.Ack(ctx, in.ChatID, in.MessageID); err != nil {
		b.log.Debug("acknowledge message: not shown", slog.String("platform", in.Platform),
			slog.String("chat_id", in.ChatID), slog.Any("err", err))
	}
}

// signOf is how platform p shows the sender of in a sign of life: the
// status line of in's thread (ts), else, or should the line be refused,
// the reaction (a); both nil for none, and for what is no message with
// an id (a button press).
func signOf(p Platform, in Incoming) (ts ThreadStatus, a Acknowledger) {
	if in.MessageID == "" || in.Button != "" {
		return nil, nil
	}
	a, _ = p.(Acknowledger)
	if in.ThreadID != "" {
		ts = statusOf(p, &Run{ChatID: in.ChatID, ThreadID: in.ThreadID})
	}
	return ts, a
}

// acknowledges reports whether platform p shows the sender of in a sign
// of life at intake (see ack), so that its run need not post a status
// message before it has something to say.
func acknowledges(p Platform, in Incoming) bool {
	ts, a := signOf(p, in)
	return ts != nil || a != nil
}
