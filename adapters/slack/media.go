package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.Downloader = (*Adapter)(nil)

// attachment returns the first audio clip or image of a message's files,
// or nil. Slack's own audio clips are audio/webm or audio/mp4 files
// with a duration_ms; any audio/* or image/* file counts.
func attachment(files []slack.File) *bot.Attachment {
	for _, f := range files {
		if f.URLPrivateDownload == "" {
			continue
		}
		switch {
		case strings.HasPrefix(f.Mimetype, "audio/"):
			return &bot.Attachment{Kind: bot.AttachVoice, Ref: f.URLPrivateDownload, Name: fileName(f), MIME: f.Mimetype,
				Duration: time.Duration(f.DurationMs) * time.Millisecond, Size: int64(f.Size)}
		case strings.HasPrefix(f.Mimetype, "image/"):
			return &bot.Attachment{Kind: bot.AttachImage, Ref: f.URLPrivateDownload, Name: fileName(f), MIME: f.Mimetype, Size: int64(f.Size)}
		}
	}
	return nil
}

// fileName is the file's name with an extension that tells its format.
func fileName(f slack.File) string {
	name := f.Name
	if name == "" {
		name = "file"
	}
	if f.Filetype != "" && !strings.Contains(name, ".") {
		name += "." + f.Filetype
	}
	return name
}

// limitWriter collects at most max bytes.
type limitWriter struct {
	buf []byte
	max int64
}

var errTooLarge = fmt.Errorf("over the limit: %w", bot.ErrFileTooLarge)

func (w *limitWriter) Write(p []byte) (int, error) {
	if int64(len(w.buf)+len(p)) > w.max {
		return 0, errTooLarge
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// Download implements bot.Downloader: the file's url_private_download,
// fetched with the bot token in an Authorization header, as Slack asks
// for private files ("To download a file, make a GET request to its
// url_private_download … include your token in an Authorization header",
// docs.slack.dev/messaging/working-with-files; the app needs files:read).
// slack-go's GetFileContext sends the token only to Slack's own hosts or
// the API host, and reports a redirect to the sign-in page (what Slack
// answers when the token cannot read the file) as an error.
func (a *Adapter) Download(ctx context.Context, at bot.Attachment, limit int64) ([]byte, error) {
	if at.Size > limit {
		return nil, fmt.Errorf("slack: download %s: %d bytes: %w", at.Name, at.Size, bot.ErrFileTooLarge)
	}
	w := &limitWriter{max: limit}
	if err := a.api.GetFileContext(ctx, at.Ref, w); err != nil {
		if errors.Is(err, bot.ErrFileTooLarge) {
			return nil, fmt.Errorf("slack: download %s: %w", at.Name, err)
		}
		return nil, fmt.Errorf("slack: download %s: %w", at.Name, a.redact(err))
	}
	return w.buf, nil
}
