package bot

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"
)

// Unfinisher is a Streamer whose preview is a message that stays in the
// chat when the process dies before Stream.Finish (Slack's
// chat.startStream; a Telegram draft is ephemeral and is none), and
// that can find and delete such messages.
type Unfinisher interface {
	// Unfinished returns the ids of the bot's messages in chatID (in
	// thread threadID, "" for none) posted after message after (or,
	// when after is "", since the time since) that are previews a dead
	// process left: not the outbox's posts (see Resender), nor any other
	// message the bot posted (a reply to /cancel beside the run).
	Unfinished(ctx context.Context, chatID, threadID, after string, since time.Time) ([]string, error)
	// DeleteMessage removes message id from chatID; a message already
	// gone is no error.
	DeleteMessage(ctx context.Context, chatID, id string) error
}

// A lasting preview is recorded, as the store's setting StreamKey(run
// id), before it opens, once the chat's lane has posted the run's
// status message: the chat and thread, and that status message, which
// comes before it there. It is
// forgotten when the preview ends without an answer, and by the
// transaction that takes the run's answer out of the outbox
// (Store.Delivered) when the preview became it: one small write of its
// own per streamed answer. A record still there when the
// run's answer (or question) is posted — by a restart, a run resumed on
// another replica, the outbox of a dead replica taken over, or a
// fallback post — marks an orphan: a half answer whose process died,
// perhaps before it learnt the message's id. So the messages after the
// status message that carry no outbox tag are looked up and deleted,
// in the chat's lane ahead of the post: the person sees the answer
// once. A resumed run does the same as it starts, ahead of its own
// status message (which would come after the old one untagged too). An answer that the preview became carries its tag,
// is kept, and Resender finds it.

// StreamKey is the setting recording run runID's open preview; the
// store's Delivered deletes it with the run's answer.
func StreamKey(runID string) string { return "stream:" + runID }

// openStream is what the record holds.
type openStream struct {
	Platform string `json:"platform"`
	ChatID   string `json:"chat_id"`
	ThreadID string `json:"thread_id,omitempty"`
	// After is the id of the run's status message; "" for a run with
	// none (a thread with a status line: Slack's assistant pane), whose
	// previews are looked for since the run began (Since).
	After string    `json:"after"`
	Since time.Time `json:"since,omitzero"`
}

// recordStream records that run r opens a lasting preview on q after
// status message after; false when it cannot be recorded (then no
// preview is opened: a crash would leave it for good).
func (b *Bot) recordStream(ctx context.Context, q *queuedPlatform, r *Run, after string) bool {
	if _, ok := q.p.(Unfinisher); !ok {
		return true // nothing of it lasts
	}
	rec := openStream{Platform: q.p.Name(), ChatID: r.ChatID, ThreadID: r.ThreadID, After: after}
	if after == "" {
		rec.Since = r.Created
	}
	raw, err := json.Marshal(rec)
	if err == nil {
		err = b.store.SetSetting(ctx, StreamKey(r.ID), string(raw))
	}
	if err != nil {
		b.log.Warn("answer preview: could not record it; none shown", slog.String("run_id", r.ID), slog.Any("err", err))
		return false
	}
	return true
}

// forgetStream forgets run runID's preview record.
func (b *Bot) forgetStream(ctx context.Context, runID string) {
	if err := b.store.SetSetting(ctx, StreamKey(runID), ""); err != nil {
		b.log.Warn("answer preview: could not forget its record", slog.String("run_id", runID), slog.Any("err", err))
	}
}

// dropOrphan queues, when run runID has a preview record, the deletion
// of what its previews left in its chat's lane (ahead of what is queued
// next there), and forgets the record once done. When that fails the
// answer is posted all the same: twice shown beats lost.
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
	var os openStream
	if err := json.Unmarshal([]byte(raw), &os); err != nil || os.Platform != q.p.Name() || (os.After == "" && os.Since.IsZero()) {
		return
	}
	n := 0
	q.s.PostThen(os.ChatID, "delete orphan preview", func(ctx context.Context) error {
		ids, err := u.Unfinished(ctx, os.ChatID, os.ThreadID, os.After, os.Since)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if err := u.DeleteMessage(ctx, os.ChatID, id); err != nil {
				return err
			}
			n++
		}
		return nil
	}, func(err error) {
		if err != nil {
			b.log.Warn("answer preview: could not delete what a dead process left", slog.String("run_id", runID), slog.Any("err", err))
			return
		}
		if n > 0 {
			b.log.Info("answer preview: deleted what a dead process left", slog.String("run_id", runID), slog.Int("messages", n))
		}
		b.forgetStream(context.WithoutCancel(ctx), runID)
	})
}
