package telegram

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.Downloader = (*Adapter)(nil)

// maxPhotoSide is the longest side of the photo size the bot picks: large
// enough to read a handwritten list, small enough for the model's image
// input without scaling.
const maxPhotoSide = 1280

// attachment returns the voice note, audio file or image a message
// carries, or nil.
func attachment(m *tgbotapi.Message) *bot.Attachment {
	switch {
	case m.Voice != nil:
		// Voice notes are OGG/Opus (core.telegram.org/bots/api#voice);
		// the file path Telegram gives them ends in .oga.
		return &bot.Attachment{Kind: bot.AttachVoice, Ref: m.Voice.FileID, Name: "voice.ogg", MIME: m.Voice.MimeType,
			Duration: time.Duration(m.Voice.Duration) * time.Second, Size: int64(m.Voice.FileSize)}
	case m.Audio != nil:
		name := m.Audio.FileName
		if name == "" {
			name = "audio" + extOf(m.Audio.MimeType)
		}
		return &bot.Attachment{Kind: bot.AttachVoice, Ref: m.Audio.FileID, Name: name, MIME: m.Audio.MimeType,
			Duration: time.Duration(m.Audio.Duration) * time.Second, Size: int64(m.Audio.FileSize)}
	case len(m.Photo) > 0:
		p := pickPhoto(m.Photo)
		return &bot.Attachment{Kind: bot.AttachImage, Ref: p.FileID, Name: "photo.jpg", MIME: "image/jpeg", Size: int64(p.FileSize)}
	case m.Document != nil && strings.HasPrefix(m.Document.MimeType, "image/"):
		return &bot.Attachment{Kind: bot.AttachImage, Ref: m.Document.FileID, Name: m.Document.FileName, MIME: m.Document.MimeType, Size: int64(m.Document.FileSize)}
	case m.Document != nil && strings.HasPrefix(m.Document.MimeType, "audio/"):
		return &bot.Attachment{Kind: bot.AttachVoice, Ref: m.Document.FileID, Name: m.Document.FileName, MIME: m.Document.MimeType, Size: int64(m.Document.FileSize)}
	}
	return nil
}

// pickPhoto returns the largest size of a photo whose longer side is at
// most maxPhotoSide, else the smallest. Telegram sends "available sizes
// of the photo" (core.telegram.org/bots/api#message), small to large.
func pickPhoto(sizes []tgbotapi.PhotoSize) tgbotapi.PhotoSize {
	best, smallest := -1, 0
	for i, p := range sizes {
		side := max(p.Width, p.Height)
		if side <= maxPhotoSide && (best < 0 || side > max(sizes[best].Width, sizes[best].Height)) {
			best = i
		}
		if side < max(sizes[smallest].Width, sizes[smallest].Height) {
			smallest = i
		}
	}
	if best < 0 {
		return sizes[smallest]
	}
	return sizes[best]
}

func extOf(mime string) string {
	switch mime {
	case "audio/mpeg":
		return ".mp3"
	case "audio/mp4", "audio/x-m4a":
		return ".m4a"
	case "audio/wav", "audio/x-wav":
		return ".wav"
	}
	return ".ogg"
}

// Download implements bot.Downloader: getFile gives the file's path, then
// the file is fetched from <api>/file/bot<token>/<file_path>. The Bot API
// lets bots download "files of up to 20MB in size"
// (core.telegram.org/bots/api#getfile). Errors never hold the token.
func (a *Adapter) Download(ctx context.Context, at bot.Attachment, limit int64) ([]byte, error) {
	if at.Size > limit {
		return nil, fmt.Errorf("telegram: download %s: %d bytes: %w", at.Name, at.Size, bot.ErrFileTooLarge)
	}
	var f tgbotapi.File
	err := a.call(ctx, "getFile", func() error {
		var err error
		f, err = a.api.GetFile(tgbotapi.FileConfig{FileID: at.Ref})
		return err
	})
	if err != nil {
		var te *tgbotapi.Error
		if errors.As(err, &te) && strings.Contains(te.Message, "file is too big") {
			return nil, fmt.Errorf("telegram: download %s: %w: %w", at.Name, bot.ErrFileTooLarge, err)
		}
		return nil, err
	}
	if int64(f.FileSize) > limit {
		return nil, fmt.Errorf("telegram: download %s: %d bytes: %w", at.Name, f.FileSize, bot.ErrFileTooLarge)
	}
	if f.FilePath == "" {
		return nil, fmt.Errorf("telegram: download %s: getFile gave no file_path", at.Name)
	}
	u := strings.TrimRight(a.cfg.APIURL, "/") + "/file/bot" + a.cfg.Token + "/" + (&url.URL{Path: f.FilePath}).EscapedPath()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("telegram: download %s: %w", path.Base(f.FilePath), redact(err, a.cfg.Token))
	}
	resp, err := a.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("telegram: download %s: %w", path.Base(f.FilePath), redact(err, a.cfg.Token))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("telegram: download %s: HTTP %d", path.Base(f.FilePath), resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("telegram: download %s: %w", path.Base(f.FilePath), redact(err, a.cfg.Token))
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("telegram: download %s: %w", path.Base(f.FilePath), bot.ErrFileTooLarge)
	}
	return data, nil
}
