package bot

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
)

// LastingStream is a Stream whose preview is a message that stays in
// the chat when the process dies before Finish (Slack's
// chat.startStream; a Telegram draft is ephemeral and is none).
type LastingStream interface {
	Stream
	// ID is the preview message's id.
	ID() string
}

// Deleter is a Platform that can remove a message it posted.
type Deleter interface {
	// DeleteMessage removes message id from chatID; a message already
	// gone is no error.
	DeleteMessage(ctx context.Context, chatID, id string) error
}

// A lasting preview is recorded, as the store's setting streamKey(run
// id), when it opens (one small write per streamed answer) and
// forgotten when it becomes the answer or ends without one. A record
// still there when the run's answer (or question) is delivered again —
// by a restart, a run resumed on another replica, the outbox of a dead
// replica taken over, or a fallback post — is an orphan: a half answer
// whose process died. It is deleted first, in the chat's lane ahead of
// the post, so that the person sees the answer once. A resumed run that
// streams again deletes it before opening its own.

// streamKeyPrefix starts the setting recording a run's open preview.
const streamKeyPrefix = "stream:"

func streamKey(runID string) string { return streamKeyPrefix + runID }

// openStream is what the record holds.
type openStream struct {
	Platform string `json:"platform"`
	ChatID   string `json:"chat_id"`
	ID       string `json:"id"`
}

// recordStream records st, run r's preview on platform, if it lasts.
func (b *Bot) recordStream(ctx context.Context, platform string, r *Run, st Stream) {
	ls, ok := st.(LastingStream)
	if !ok {
		return
	}
	raw, err := json.Marshal(openStream{Platform: platform, ChatID: r.ChatID, ID: ls.ID()})
	if err == nil {
		err = b.store.SetSetting(ctx, streamKey(r.ID), string(raw))
	}
	if err != nil {
		b.log.Warn("answer preview: could not record it; a crash may leave it in the chat", slog.String("run_id", r.ID), slog.Any("err", err))
	}
}

// forgetStream forgets run runID's preview record.
func (b *Bot) forgetStream(ctx context.Context, runID string) {
	if err := b.store.SetSetting(ctx, streamKey(runID), ""); err != nil {
		b.log.Warn("answer preview: could not forget its record", slog.String("run_id", runID), slog.Any("err", err))
	}
}

// orphanStream returns run runID's recorded preview on platform, if
// one is recorded and q's platform can delete it.
func (b *Bot) orphanStream(ctx context.Context, q *queuedPlatform, runID string) (openStream, Deleter, bool) {
	d, ok := q.p.(Deleter)
	if !ok || runID == "" {
		return openStream{}, nil, false
	}
	raw, err := b.store.Setting(ctx, streamKey(runID))
	if err != nil || raw == "" {
		if err != nil && !errors.Is(err, ErrNotFound) {
			b.log.Warn("answer preview: could not read its record", slog.String("run_id", runID), slog.Any("err", err))
		}
		return openStream{}, nil, false
	}
	var os openStream
	if err := json.Unmarshal([]byte(raw), &os); err != nil || os.Platform != q.p.Name() || os.ID == "" {
		return openStream{}, nil, false
	}
	return os, d, true
}

// dropOrphan queues the deletion of run runID's orphan preview, if
// any, in its chat's lane (ahead of what is queued next there), and
// forgets it once deleted. When the deletion fails the answer is
// posted all the same: twice shown beats lost.
func (b *Bot) dropOrphan(ctx context.Context, q *queuedPlatform, runID string) {
	os, d, ok := b.orphanStream(ctx, q, runID)
	if !ok {
		return
	}
	q.s.PostThen(os.ChatID, "delete orphan preview", func(ctx context.Context) error {
		return d.DeleteMessage(ctx, os.ChatID, os.ID)
	}, func(err error) {
		if err != nil {
			b.log.Warn("answer preview: could not delete the one a dead process left", slog.String("run_id", runID), slog.Any("err", err))
			return
		}
		b.log.Info("answer preview: deleted the one a dead process left", slog.String("run_id", runID))
		b.forgetStream(context.WithoutCancel(ctx), runID)
	})
}
