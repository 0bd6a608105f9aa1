package bot

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/tidybot/tidybot/bot/outbound"
)

// Streamer is a Platform that can show an answer while the model writes
// it (Slack's chat.startStream, Telegram's sendMessageDraft). The
// preview is only that: the answer is delivered as the outbox entry it
// always was, and a platform that refuses a preview (an older
// workspace, a group chat, any error) leaves the run as it is without
// one, its status message edited as before.
type Streamer interface {
	// StartStream opens a preview showing m.Text in m's chat and thread,
	// to person userID. An error means no preview there.
	StartStream(ctx context.Context, m Outgoing, userID string) (Stream, error)
}

// StreamPlacer is a Streamer that knows, without a call, the chats and
// threads where it opens no preview (Slack streams only replies in a
// thread, Telegram drafts only in private chats): there the bot neither
// records a preview nor asks for one.
type StreamPlacer interface {
	StreamsIn(chatID, threadID string) bool
}

// Stream is one answer's preview.
type Stream interface {
	// Update shows text, the answer so far, which extends every text
	// shown before.
	Update(ctx context.Context, text string) error
	// Interval is the least time between two calls of the preview, as
	// the platform allows.
	Interval() time.Duration
	// Finish ends the preview. With m (the answer as the bot posts it,
	// m.Ref its outbox entry), final reports whether the preview became
	// m's post, tagged with m.Ref as Resender's posts are (Slack's
	// chat.stopStream with m's buttons), and id is its id; when final is
	// false the bot posts m as usual (a Telegram draft gives way to the
	// message). An m without text ends the preview with no answer (the
	// run asks a question instead).
	Finish(ctx context.Context, m Outgoing) (id string, final bool, err error)
}

// preview streams a run's answer to a Streamer as Hooks.Answer hears
// it: whole words only (a secret half written cannot show before the
// redactor knows it), redacted, at most once per the platform's
// interval, through the chat's lane of the send queue (so it comes
// after the status message). It gives up, leaving the answer to the
// outbox, when the platform refuses or the answer starts over.
type preview struct {
	b      *Bot
	q      *queuedPlatform
	status func() string // the run's status message id
	s      Streamer
	r      *Run
	log    *slog.Logger

	mu    sync.Mutex // protects the fields below
	heard string     // the answer as last heard
	shown string     // what the preview shows
	st    Stream     // nil until opened
	off   bool       // given up: nothing more is shown

	kick chan struct{}
	quit chan struct{}
	done chan struct{}
}

// newPreview returns a preview for r's answer, or nil where the
// platform cannot stream.
func newPreview(b *Bot, q *queuedPlatform, r *Run, status func() string) *preview {
	s, ok := q.p.(Streamer)
	if !ok {
		return nil
	}
	if sp, ok := q.p.(StreamPlacer); ok && !sp.StreamsIn(r.ChatID, r.ThreadID) {
		return nil
	}
	pv := &preview{b: b, q: q, status: status, s: s, r: r, log: b.log, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go pv.loop()
	return pv
}

// hear takes the answer so far (Hooks.Answer); it never blocks.
func (pv *preview) hear(text string) {
	pv.mu.Lock()
	pv.heard = text
	pv.mu.Unlock()
	select {
	case pv.kick <- struct{}{}:
	default:
	}
}

// end stops the loop: nothing more is shown once its call in flight is
// done. It does not wait for that call (see stream): the worker goes on.
func (pv *preview) end() {
	close(pv.quit)
}

// stream waits, after end, for the loop's call in flight and returns
// the open preview, nil if none. A run's tail calls it (postEnd), not
// the worker: the call is queued in the chat's lane behind the status
// message, and the lasting preview is recorded before it opens.
func (pv *preview) stream() Stream {
	<-pv.done
	pv.mu.Lock()
	defer pv.mu.Unlock()
	return pv.st
}

func (pv *preview) loop() {
	defer close(pv.done)
	for {
		select {
		case <-pv.quit:
			return
		case <-pv.kick:
		}
		wait := pv.show()
		if wait <= 0 {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-pv.quit:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// show brings the preview up to what was heard; it returns how long to
// wait before the next call.
func (pv *preview) show() time.Duration {
	pv.mu.Lock()
	text := wholeWords(pv.heard)
	st, shown, off := pv.st, pv.shown, pv.off
	pv.mu.Unlock()
	text = pv.q.redact.String(text)
	if off || text == "" || text == shown || strings.HasPrefix(shown, text) {
		return 0 // a call made again catches up with what is shown
	}
	if !strings.HasPrefix(text, shown) {
		pv.giveUp("the answer started over", nil)
		return 0
	}
	if st == nil {
		m := Outgoing{ChatID: pv.r.ChatID, ThreadID: pv.r.ThreadID, Text: text}
		// Recorded first (see orphan.go): a process that dies after
		// this leaves its preview to whoever posts the answer. The
		// record names the status message, known once the chat's lane
		// has posted it, and is written outside the lane: the lane
		// serves other chats while the store syncs it.
		var after string
		err := pv.call("status message id", false, func(context.Context) error {
			after = pv.status()
			return nil
		})
		if err == nil && !pv.b.recordStream(context.Background(), pv.q, pv.r, after) {
			err = errors.New("bot: the preview could not be recorded")
		}
		var opened Stream
		if err == nil {
			err = pv.call("start stream", false, func(ctx context.Context) error {
				var err error
				opened, err = pv.s.StartStream(ctx, m, pv.r.UserID)
				return err
			})
		}
		if err != nil {
			pv.giveUp("the platform shows no preview here", err)
			return 0
		}
		pv.mu.Lock()
		pv.st, pv.shown = opened, text
		pv.mu.Unlock()
		return opened.Interval()
	}
	err := pv.call("stream", true, func(ctx context.Context) error { return st.Update(ctx, text) })
	switch {
	case errors.Is(err, outbound.ErrSkipped):
		return st.Interval() // rate limited: the next one shows it
	case err != nil:
		pv.giveUp("the platform refused an update", err)
		return 0
	}
	pv.mu.Lock()
	pv.shown = text
	pv.mu.Unlock()
	return st.Interval()
}

func (pv *preview) giveUp(why string, err error) {
	pv.mu.Lock()
	pv.off = true
	pv.mu.Unlock()
	pv.log.Debug("answer preview: "+why+"; the answer comes as a message", slog.String("platform", pv.q.p.Name()), slog.Any("err", err))
}

// call makes one call in the chat's lane and waits for it.
func (pv *preview) call(what string, droppable bool, fn func(ctx context.Context) error) error {
	res := make(chan error, 1)
	then := func(err error) { res <- err }
	if droppable {
		pv.q.s.PostDroppable(pv.r.ChatID, what, fn, then)
	} else {
		pv.q.s.PostThen(pv.r.ChatID, what, fn, then)
	}
	return <-res
}

// wholeWords is text up to its last space: a word still being written
// waits for its end.
func wholeWords(text string) string {
	i := strings.LastIndexFunc(text, unicode.IsSpace)
	if i < 0 {
		return ""
	}
	return strings.TrimRightFunc(text[:i], unicode.IsSpace)
}

// deliverStreamed delivers outbox entry ob, a run's answer whose preview
// st is open: the preview ends with the answer (delivered once the
// platform says the preview became it), or gives way to the answer
// posted as usual. When ending the preview fails, the post may have
// been made: the entry is posted again the way a restart posts it
// (Resender looks for it first), never lost. Either way the post
// deletes the preview first (see dropOrphan): the person sees the
// answer once.
func (b *Bot) deliverStreamed(ctx context.Context, ob Outbound, st Stream) {
	q := b.queue(ob.Platform)
	if q == nil {
		b.deliver(ctx, ob)
		return
	}
	ctx = context.WithoutCancel(ctx)
	m := redacted(q.redact, ob.Msg)
	m.Ref = ob.ID
	var id string
	var final bool
	q.s.PostThen(m.ChatID, "finish stream", func(ctx context.Context) error {
		var err error
		id, final, err = st.Finish(ctx, m)
		return err
	}, func(err error) {
		d := &delivery{ob: ob}
		switch {
		case err != nil:
			b.log.Warn("answer preview: could not end it; posting the answer", slog.String("platform", ob.Platform), slog.String("outbox_id", ob.ID), slog.Any("err", err))
			d.again = true
			b.post(ctx, d)
		case !final:
			b.post(ctx, d)
		default:
			// Delivered forgets the preview's record with the entry.
			b.delivered(ctx, d, id, nil)
		}
	})
}

// endPreview ends st, a preview of a run that ended without an answer.
func (b *Bot) endPreview(platform string, st Stream, r *Run) {
	q := b.queue(platform)
	if q == nil {
		return
	}
	b.forgetStream(context.Background(), r.ID) // before the question's post looks for it
	q.s.PostThen(r.ChatID, "end stream", func(ctx context.Context) error {
		_, _, err := st.Finish(ctx, Outgoing{ChatID: r.ChatID, ThreadID: r.ThreadID})
		return err
	}, func(err error) {
		if err != nil {
			b.log.Debug("answer preview: could not end it", slog.String("platform", platform), slog.Any("err", err))
		}
	})
}
