package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// StreamBudget is a Streamer whose platform limits how many previews
// may open (Slack: chat.startStream and chat.stopStream are Tier 2 per
// workspace). While CanStream is false the answer is posted without a
// preview rather than wait for the budget.
type StreamBudget interface {
	CanStream() bool
}

// Stream is one answer's preview.
type Stream interface {
	// Update shows text, the answer so far, which extends every text
	// shown before; the text shown last, again, refreshes a preview
	// that lapses (Lapsing).
	Update(ctx context.Context, text string) error
	// Interval is the least time between two calls of the preview, as
	// the platform allows.
	Interval() time.Duration
	// Finish ends the preview. With m (the answer as the bot posts it,
	// m.Ref its outbox entry, m.Text extending every text shown), final
	// reports whether the preview became m's post, tagged with m.Ref as
	// Resender's posts are (Slack's chat.stopStream with m's buttons),
	// and id is its id; when final is false the preview is gone (a
	// Telegram draft gives way to the message, a Slack stream too short
	// to hold m is deleted) and the bot posts m as usual. An m without
	// text ends the preview with no answer and removes it. An error
	// leaves the preview in a state the bot does not know.
	Finish(ctx context.Context, m Outgoing) (id string, final bool, err error)
}

// LastingStream is a Stream that is a message of the chat until it is
// deleted (Slack's streams; a Telegram draft vanishes by itself and is
// none): its id is recorded as soon as it is known, so that whoever
// comes after a dead process can delete it (Unfinisher).
type LastingStream interface {
	Stream
	// MessageID is the id of the message the preview is.
	MessageID() string
}

// Unfinisher is a Streamer whose previews last (LastingStream) and that
// can delete them.
type Unfinisher interface {
	// DeleteMessage removes message id from chatID; a message already
	// gone is no error.
	DeleteMessage(ctx context.Context, chatID, id string) error
}

// OrphanFinder is an Unfinisher that can find the previews a dead
// process left before it learnt their ids. It cannot tell a live preview
// from a dead one, so the bot asks it only in a thread where no other
// run can be streaming: a DM, whose runs take turns.
type OrphanFinder interface {
	// Unfinished returns the ids of the bot's messages in chatID (in
	// thread threadID, "" for none) posted after message after (or,
	// when after is "", since the time since) that are previews: not
	// the outbox's posts (see Resender), nor any other message the bot
	// posted (a reply to /cancel beside the run).
	Unfinished(ctx context.Context, chatID, threadID, after string, since time.Time) ([]string, error)
}

// StreamKey is the setting recording run runID's preview (see preview);
// the store's Delivered deletes it with the run's answer.
func StreamKey(runID string) string { return "stream:" + runID }

// previewRecord is what StreamKey holds: where the preview is and, once
// it is open, its message id. A record without an id is a preview being
// opened: in a DM (Alone) it is looked for after the run's status
// message After (since Since for a run without one).
type previewRecord struct {
	Platform string    `json:"platform"`
	ChatID   string    `json:"chat_id"`
	ThreadID string    `json:"thread_id,omitempty"`
	ID       string    `json:"id,omitempty"`
	Alone    bool      `json:"alone,omitempty"`
	After    string    `json:"after,omitempty"`
	Since    time.Time `json:"since,omitzero"`
}

// A preview is the lifecycle of one run's answer as the chat shows it
// while the model writes it: what the chat shows is a consequence of the
// preview's state, changed only here. Hooks.Answer is its input: the
// agent tells it only an answer that may be shown (a final answer whose
// reply carries no write that has not run, see agent/stream.go), so a
// preview never states an outcome before the writes behind it are
// made; the preview shows whole words of it, redacted, through the
// chat's lane of the send queue (after the status message), at most
// once per the platform's interval.
//
// States and transitions (each step is one platform call or one store
// write; a process may die between any two):
//
//	state     event                          steps                                 next
//	idle      text heard                     record {chat, thread, status msg}     recorded
//	idle      record fails                   —                                     off
//	recorded  start ok                       record {…, id} (a LastingStream)      open
//	recorded  start refused                  forget the record                     off
//	open      record of the id fails         remove                                off
//	open      text grows                     update                                open
//	open      update rate limited            — (the next update shows it)          open
//	open      update refused                 remove                                off
//	open      text starts over               remove                                off
//	open      answer extends what is shown   finish with it → post is the answer   delivered (Store.Delivered forgets the record)
//	open      finish gives way               forget the record, post the answer    delivered
//	open      finish fails                   remove, post the answer (looked for)  delivered
//	open      answer does not extend it,     remove, post the answer               delivered
//	          a question, no answer
//	any other run ends                       forget the record if any, post        delivered
//
// remove is Finish without an answer (stopped and deleted), then, if that
// failed, Unfinisher.DeleteMessage by the recorded id, each tried again
// (removeTries); only a removal that succeeded forgets the record, so a
// preview whose removal kept failing stays recorded for the sweep.
//
// The sweep (dropOrphan) runs where a run's previous execution is gone:
// as the run starts or resumes, and ahead of the post of its outbox entry
// (by this process after a failed finish, a restart, another replica or
// a retry). It deletes the message the run's record names, by its id,
// and nothing else: never a message it did not record, such as another
// person's live stream in a shared thread. A record without an id (the
// process died between recording the preview and recording its id)
// names nothing: in a DM, whose runs take turns, the previews after the
// run's status message are looked for (OrphanFinder) and deleted; in a
// shared thread nothing is, and a stream whose start was answered in the
// instant before such a death stays (docs/architecture.md).
type preview struct {
	b      *Bot
	q      *queuedPlatform
	s      Streamer
	r      *Run
	status func() string // the run's status message id, once the lane posted it
	log    *slog.Logger
	after  string // the status message id as recorded; the loop's alone

	mu       sync.Mutex // protects the fields below
	heard    string     // the answer as last heard
	shown    string     // what the preview shows
	st       Stream     // nil until opened, and once removed
	recorded bool       // StreamKey(r.ID) holds a record
	off      bool       // given up: nothing more is shown

	kick chan struct{}
	quit chan struct{}
	done chan struct{}
}

// removeTries is how often a preview's removal is tried, removeWait the
// pause after the first failure (doubling).
var (
	removeTries = 4
	removeWait  = 200 * time.Millisecond
)

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
	pv := &preview{b: b, q: q, s: s, r: r, status: status, log: b.log.With(slog.String("run_id", r.ID), slog.String("platform", q.p.Name())),
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
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
// the open preview, nil if none. A run's tail calls it (Bot.afterPreview),
// then answer or withdraw.
func (pv *preview) stream() Stream {
	<-pv.done
	pv.mu.Lock()
	defer pv.mu.Unlock()
	return pv.st
}

func (pv *preview) loop() {
	defer close(pv.done)
	for {
		var refresh <-chan time.Time
		pv.mu.Lock()
		if d := refreshEvery(pv.st); d > 0 && !pv.off {
			refresh = time.After(d) // a preview that lapses (Lapsing)
		}
		pv.mu.Unlock()
		select {
		case <-pv.quit:
			return
		case <-refresh:
			pv.refresh()
			continue
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
	ctx := context.Background()
	pv.mu.Lock()
	text := wholeWords(pv.heard)
	st, shown, off := pv.st, pv.shown, pv.off
	pv.mu.Unlock()
	text = pv.q.redact.String(text)
	switch {
	case off || text == "" || text == shown || strings.HasPrefix(shown, text):
		return 0 // a call made again catches up with what is shown
	case !strings.HasPrefix(text, shown):
		pv.giveUp(ctx, "the answer started over", nil)
		return 0
	case st == nil:
		return pv.open(ctx, text)
	}
	err := pv.call("stream", true, func(ctx context.Context) error { return st.Update(ctx, text) })
	switch {
	case errors.Is(err, outbound.ErrSkipped):
		return st.Interval() // rate limited: the next one shows it
	case err != nil:
		pv.giveUp(ctx, "the platform refused an update", err)
		return 0
	}
	pv.mu.Lock()
	pv.shown = text
	pv.mu.Unlock()
	return st.Interval()
}

// refresh shows the preview's text again, before the platform lets it
// lapse (Lapsing) while the run works and nothing new came.
func (pv *preview) refresh() {
	pv.mu.Lock()
	st, shown, off := pv.st, pv.shown, pv.off
	pv.mu.Unlock()
	if st == nil || off {
		return
	}
	err := pv.call("stream", true, func(ctx context.Context) error { return st.Update(ctx, shown) })
	if err != nil && !errors.Is(err, outbound.ErrSkipped) {
		pv.giveUp(context.Background(), "the platform refused a refresh", err)
	}
}

// open records the preview, then opens it showing text, then records its
// id: idle → recorded → open.
func (pv *preview) open(ctx context.Context, text string) time.Duration {
	if sb, ok := pv.q.p.(StreamBudget); ok && !sb.CanStream() {
		pv.giveUp(ctx, "the platform's stream budget is spent", nil)
		return 0
	}
	_, lasting := pv.q.p.(Unfinisher)
	if lasting {
		// The record names the status message, known once the chat's
		// lane has posted it, and is written outside the lane: the lane
		// serves other chats while the store syncs it.
		_ = pv.call("status message id", false, func(context.Context) error {
			pv.after = pv.status()
			return nil
		})
		if err := pv.record(ctx, ""); err != nil {
			pv.giveUp(ctx, "the preview could not be recorded", err)
			return 0
		}
	}
	m := pv.r.outgoing(text)
	var st Stream
	err := pv.call("start stream", false, func(ctx context.Context) error {
		var err error
		st, err = pv.s.StartStream(ctx, m, pv.r.UserID)
		return err
	})
	if err != nil {
		pv.giveUp(ctx, "the platform shows no preview here", err)
		return 0
	}
	pv.mu.Lock()
	pv.st, pv.shown = st, text
	pv.mu.Unlock()
	if ls, ok := st.(LastingStream); ok && lasting {
		if err := pv.record(ctx, ls.MessageID()); err != nil {
			// A preview nobody could find after a crash is not kept.
			pv.giveUp(ctx, "the preview's id could not be recorded", err)
			return 0
		}
	}
	return st.Interval()
}

// giveUp turns the preview off: what it shows is removed, and the answer
// comes as a message.
func (pv *preview) giveUp(ctx context.Context, why string, err error) {
	pv.mu.Lock()
	pv.off = true
	pv.mu.Unlock()
	pv.log.Debug("answer preview: "+why+"; the answer comes as a message", slog.Any("err", err))
	pv.withdraw(ctx)
}

// answer delivers outbox entry ob, the run's answer, once the loop is
// done (stream): through the open preview when the answer extends what it
// shows, else as a post after the preview is removed. When finishing
// fails, the preview is removed and the entry posted the way a restart
// posts it (Resender looks for it first): the person sees the answer
// once, and no half answer stays open beside it. The answer ends the
// preview only when this process may post the entry (mayPost, as for a
// post).
func (pv *preview) answer(ctx context.Context, ob Outbound) {
	b := pv.b
	b.delivering(ob.ID, pv.r.ThreadKey)
	pv.mu.Lock()
	st, shown, off := pv.st, pv.shown, pv.off
	pv.mu.Unlock()
	m := redacted(pv.q.redact, ob.Msg)
	m.Ref = ob.ID
	if st == nil || off || !strings.HasPrefix(strings.TrimSpace(m.Text), shown) {
		pv.withdraw(ctx)
		b.post(ctx, &delivery{ob: ob})
		return
	}
	var id string
	var final bool
	err := pv.call("finish stream", false, func(ctx context.Context) error {
		if err := b.mayPost(ctx, ob.ID); err != nil {
			return err
		}
		var err error
		id, final, err = st.Finish(ctx, m)
		return err
	})
	switch {
	case errors.Is(err, ErrFenced):
		// Another replica claimed the entry: it posts the answer, and
		// deletes this preview first (dropOrphan, by its record).
		pv.settle()
		b.delivered(ctx, &delivery{ob: ob}, "", err) // logs it, changes nothing
	case err == nil && final:
		pv.settle()
		b.delivered(ctx, &delivery{ob: ob}, id, nil) // forgets the record with the entry
	case err == nil:
		pv.settle()
		pv.forget(ctx)
		b.post(ctx, &delivery{ob: ob})
	default:
		pv.log.Warn("answer preview: could not end it; removing it and posting the answer", slog.String("outbox_id", ob.ID), slog.Any("err", err))
		pv.remove(ctx, st, false)
		b.post(ctx, &delivery{ob: ob, again: true})
	}
}

// withdraw removes the preview (a run that ends without an answer, an
// answer that does not extend it, a preview given up), and forgets its
// record once it is gone.
func (pv *preview) withdraw(ctx context.Context) {
	pv.mu.Lock()
	st := pv.st
	recorded := pv.recorded
	pv.mu.Unlock()
	switch {
	case st != nil:
		pv.remove(ctx, st, true)
	case recorded:
		pv.forget(ctx) // nothing opened
	}
}

// remove ends st without an answer (stop and delete) or, failing that,
// deletes its message by id, trying again up to removeTries times; it
// forgets the record once the preview is gone. finish is false when
// Finish has just failed: only the delete is tried.
func (pv *preview) remove(ctx context.Context, st Stream, finish bool) {
	// Stopping ends the tries: the record is left for the sweep.
	if err := removeRetrying(pv.b.quit, func() error { return pv.removeOnce(st, finish) }); err != nil {
		pv.log.Warn("answer preview: could not remove it; it is deleted before the answer's post", slog.Any("err", err))
		return
	}
	pv.settle()
	pv.forget(ctx)
}

// removeOnce tries Finish without an answer (when finish is set), then
// the delete by id.
func (pv *preview) removeOnce(st Stream, finish bool) error {
	var err error
	if finish {
		err = pv.call("end stream", false, func(ctx context.Context) error {
			_, _, err := st.Finish(ctx, pv.r.outgoing(""))
			return err
		})
		if err == nil {
			return nil
		}
	}
	ls, lasting := st.(LastingStream)
	if !lasting {
		return nil // nothing of it lasts (a draft vanishes by itself)
	}
	u, ok := pv.q.p.(Unfinisher)
	if !ok {
		return err
	}
	return pv.call("delete stream", false, func(ctx context.Context) error {
		return u.DeleteMessage(ctx, pv.r.ChatID, ls.MessageID())
	})
}

// removeRetrying tries a preview's removal up to removeTries times, the
// pause after a failure doubling from removeWait, until it succeeds or
// stop is closed. A rate limit ends the tries: it is the queue's to wait
// out.
func removeRetrying(stop <-chan struct{}, remove func() error) error {
	wait := removeWait
	for try := 1; ; try++ {
		err := remove()
		var rl RateLimited
		if err == nil || try >= removeTries || errors.As(err, &rl) {
			return err
		}
		select {
		case <-time.After(wait):
			wait *= 2
		case <-stop:
			return err
		}
	}
}

// settle marks the preview closed: nothing more is shown through it.
func (pv *preview) settle() {
	pv.mu.Lock()
	pv.st, pv.off = nil, true
	pv.mu.Unlock()
}

// record writes the preview's record, with its message id once open.
func (pv *preview) record(ctx context.Context, id string) error {
	rec := previewRecord{Platform: pv.q.p.Name(), ChatID: pv.r.ChatID, ThreadID: pv.r.ThreadID, ID: id, Alone: pv.r.DM, After: pv.after}
	if rec.After == "" {
		rec.Since = pv.r.Created
	}
	raw, err := json.Marshal(rec)
	if err == nil {
		err = pv.b.store.SetSetting(ctx, StreamKey(pv.r.ID), string(raw))
	}
	if err != nil {
		return fmt.Errorf("bot: record the preview of run %s: %w", pv.r.ID, err)
	}
	pv.mu.Lock()
	pv.recorded = true
	pv.mu.Unlock()
	return nil
}

// forget forgets the preview's record.
func (pv *preview) forget(ctx context.Context) {
	pv.mu.Lock()
	recorded := pv.recorded
	pv.recorded = false
	pv.mu.Unlock()
	if recorded {
		pv.b.forgetStream(ctx, pv.r.ID)
	}
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

// forgetStream forgets run runID's preview record.
func (b *Bot) forgetStream(ctx context.Context, runID string) {
	if err := b.store.SetSetting(context.WithoutCancel(ctx), StreamKey(runID), ""); err != nil {
		b.log.Warn("answer preview: could not forget its record", slog.String("run_id", runID), slog.Any("err", err))
	}
}

// dropOrphan is the sweep (see preview): when run runID has a preview
// record, the message it names is deleted in the chat's lane, ahead of
// what is queued next there, and the record forgotten once done. When
// that fails the record stays (the next post or start tries again) and
// the answer is posted all the same: twice shown beats lost.
func (b *Bot) dropOrphan(ctx context.Context, q *queuedPlatform, runID, chatID, threadID string) {
	u, ok := q.p.(Unfinisher)
	if !ok || runID == "" {
		return
	}
	if sp, ok := q.p.(StreamPlacer); ok && !sp.StreamsIn(chatID, threadID) {
		return // no preview opens there, so none was recorded: no read
	}
	raw, err := b.store.Setting(ctx, StreamKey(runID))
	if err != nil || raw == "" {
		if err != nil && !errors.Is(err, ErrNotFound) {
			b.log.Warn("answer preview: could not read its record", slog.String("run_id", runID), slog.Any("err", err))
		}
		return
	}
	var rec previewRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil || rec.Platform != q.p.Name() {
		b.forgetStream(ctx, runID)
		return
	}
	find, canFind := q.p.(OrphanFinder)
	if rec.ID == "" && (!rec.Alone || !canFind || rec.After == "" && rec.Since.IsZero()) {
		// Nothing it names can be deleted, and nothing may be looked
		// for: another person's live stream may be there.
		b.log.Warn("answer preview: a dead process may have left one it never learnt the id of", slog.String("run_id", runID))
		b.forgetStream(ctx, runID)
		return
	}
	sweep := func(ctx context.Context) error {
		ids := []string{rec.ID}
		if rec.ID == "" {
			var err error
			if ids, err = find.Unfinished(ctx, rec.ChatID, rec.ThreadID, rec.After, rec.Since); err != nil {
				return err
			}
		}
		for _, id := range ids {
			if err := u.DeleteMessage(ctx, rec.ChatID, id); err != nil {
				return err
			}
		}
		return nil
	}
	// Tried again in the lane (removeTries): the post queued behind it
	// waits, so that the person sees the answer once.
	q.s.PostThen(rec.ChatID, "delete orphan preview", func(ctx context.Context) error {
		return removeRetrying(ctx.Done(), func() error { return sweep(ctx) })
	}, func(err error) {
		if err != nil {
			b.log.Warn("answer preview: could not delete what a dead process left", slog.String("run_id", runID), slog.Any("err", err))
			return
		}
		b.log.Info("answer preview: deleted what a dead process left", slog.String("run_id", runID))
		b.forgetStream(ctx, runID)
	})
}
