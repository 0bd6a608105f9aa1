package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/media"
)

// Attachment kinds.
const (
	// AttachVoice is a voice note or an audio file: it is transcribed and
	// the transcript is the user's message.
	AttachVoice = "voice"
	// AttachImage is a photo or an image file: it goes to the model as an
	// image input with the message.
	AttachImage = "image"
)

// Attachment is a file sent with a message. The bot fetches it through
// the platform's Downloader when the job runs, never in Handle.
type Attachment struct {
	Kind string `json:"kind"`
	// Ref is what the platform's Downloader needs to fetch the file
	// (Telegram: the file_id; Slack: url_private_download).
	Ref string `json:"ref"`
	// Name is the file's name, its extension telling the format
	// ("voice.ogg"); MIME its media type, if known.
	Name string `json:"name,omitempty"`
	MIME string `json:"mime,omitempty"`
	// Duration is a voice note's length, when the platform says.
	Duration time.Duration `json:"duration,omitempty"`
	// Size is the file's size in bytes, when the platform says.
	Size int64 `json:"size,omitempty"`
}

// MaxFileBytes is the most a Downloader is asked to fetch: the Bot API's
// getFile limit ("files of up to 20MB in size",
// core.telegram.org/bots/api#getfile), applied on every platform.
const MaxFileBytes = 20 << 20

// Downloader is a Platform that can fetch the file of an Attachment.
type Downloader interface {
	// Download returns the file's bytes. A file larger than max fails
	// with an error wrapping ErrFileTooLarge, before or while fetching.
	Download(ctx context.Context, a Attachment, max int64) ([]byte, error)
}

// ErrFileTooLarge is returned by a Downloader for a file over the limit.
var ErrFileTooLarge = errors.New("file too large")

// Transcriber turns speech into text; agent/openai implements it.
type Transcriber interface {
	// Transcribe returns what is said in audio, a file called name (its
	// extension tells the format). An error wrapping an *agent.Error
	// carries a message safe to show the user; agent.ErrUnsupported
	// means the server does not transcribe audio at all.
	Transcribe(ctx context.Context, name string, audio []byte) (string, error)
}

// TimedTranscriber is a Transcriber that also says how long the audio
// played, as the speech server measured it decoding the stream (0: it
// did not say); agent/openai implements it.
type TimedTranscriber interface {
	TranscribeTimed(ctx context.Context, name string, audio []byte) (text string, played time.Duration, err error)
}

// Vision settings (Config.Vision).
const (
	VisionAuto = "auto"
	VisionOn   = "on"
	VisionOff  = "off"
)

// voiceHeard is how the bot shows what it heard in a voice note.
func voiceHeard(text string) string { return "🎙 “" + text + "”" }

// screenMedia answers, in Handle, an attachment the bot will not take:
// a voice note that is too long or that cannot be transcribed, a photo
// while vision is off. It reports whether in was answered; in is then
// not stored and nothing is downloaded.
func (b *Bot) screenMedia(ctx context.Context, in Incoming) (bool, error) {
	a := in.Attachment
	var why string
	switch {
	case a.Kind == AttachVoice && b.cfg.Transcriber == nil:
		why = "I can't listen to voice notes here: no transcription model is configured (TIDYBOT_TRANSCRIBE_MODEL). Please type your message instead."
	case a.Kind == AttachVoice && a.Duration > b.cfg.VoiceMax:
		why = b.tooLongText(a.Duration)
	case a.Kind == AttachVoice && a.Size > media.MaxAudioBytes(a.Name, a.MIME, b.cfg.VoiceMax):
		// The duration a sender claims (none for a file sent as a
		// document, or 0 s) is not trusted: the size bounds it.
		why = b.tooBigText(*a, a.Size)
	case a.Kind == AttachImage && b.cfg.Vision == VisionOff && strings.TrimSpace(in.Text) == "":
		why = "I don't look at photos here (TIDYBOT_VISION=off). Please type what you'd like me to do."
	case a.Kind == AttachImage && b.visionOff() && strings.TrimSpace(in.Text) == "":
		why = noVisionText
	default:
		return false, nil
	}
	if dup, err := b.seen(ctx, in); err != nil || dup {
		return true, err
	}
	b.cfg.Metrics.Event(in.Platform, "refused")
	b.replyLater(ctx, in.Platform, reply(in, why))
	return true, nil
}

// tooLongText tells the user their voice note is longer than VoiceMax.
func (b *Bot) tooLongText(d time.Duration) string {
	return fmt.Sprintf("Sorry, that voice note is %s long; I take notes of up to %s. Could you send a shorter one, or type it?",
		d.Round(time.Second), b.cfg.VoiceMax)
}

// tooBigText tells the user an audio file of size bytes can be longer
// than VoiceMax.
func (b *Bot) tooBigText(a Attachment, size int64) string {
	return fmt.Sprintf("Sorry, that audio file is too large (%s): I take voice notes of up to %s, at most %s in this format. Could you send a shorter one, or type it?",
		megabytes(size), b.cfg.VoiceMax, megabytes(media.MaxAudioBytes(a.Name, a.MIME, b.cfg.VoiceMax)))
}

// megabytes formats n bytes for people ("19.0 MB").
func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// downloader returns the platform's Downloader, or nil.
func (b *Bot) downloader(platform string) Downloader {
	q := b.queue(platform)
	if q == nil {
		return nil
	}
	d, _ := q.p.(Downloader)
	return d
}

// transcribe turns job j's voice note into text. The transcript is stored
// as the user's message together with a job that carries it, in one
// transaction that retires j, before the run starts: a restart or a
// redelivered update never transcribes the note twice. It returns the
// job to go on with, or nil when the user was told why it cannot.
func (b *Bot) transcribe(ctx context.Context, j Job) (*Job, error) {
	in := j.Incoming
	a := in.Attachment
	log := b.log.With(slog.String("job_id", j.ID), slog.String("thread_key", j.ThreadKey))
	fail := func(text string) (*Job, error) {
		b.send(ctx, in.Platform, reply(in, text))
		return nil, nil
	}
	if b.cfg.Transcriber == nil {
		return fail("I can't listen to voice notes here: no transcription model is configured (TIDYBOT_TRANSCRIBE_MODEL). Please type your message instead.")
	}
	d := b.downloader(in.Platform)
	if d == nil {
		return fail("I can't fetch voice notes on this platform. Please type your message instead.")
	}
	audio, err := d.Download(ctx, *a, MaxFileBytes)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		log.Warn("download voice note", slog.Any("err", err))
		if errors.Is(err, ErrFileTooLarge) {
			return fail("Sorry, that voice note is too large for me to fetch (over 20 MB). Could you send a shorter one, or type it?")
		}
		return fail("Sorry, I couldn't download that voice note. Please send it again, or type your message.")
	}
	// What the sender said of its length is not trusted: the bytes
	// bound it, and where the bot can read the stream (Ogg Opus, WAV)
	// its real length decides, before the speech server is paid.
	if int64(len(audio)) > media.MaxAudioBytes(a.Name, a.MIME, b.cfg.VoiceMax) {
		log.Warn("voice note over the size its length allows", slog.Int("bytes", len(audio)))
		return fail(b.tooBigText(*a, int64(len(audio))))
	}
	if d, ok := media.AudioDuration(audio); ok && d > b.cfg.VoiceMax {
		log.Warn("voice note longer than allowed", slog.Duration("played", d), slog.Duration("claimed", a.Duration))
		return fail(b.tooLongText(d))
	}
	var text string
	var played time.Duration
	if tt, ok := b.cfg.Transcriber.(TimedTranscriber); ok {
		text, played, err = tt.TranscribeTimed(ctx, a.Name, audio)
	} else {
		text, err = b.cfg.Transcriber.Transcribe(ctx, a.Name, audio)
	}
	if err == nil && played > b.cfg.VoiceMax {
		// The speech server decoded more than the limit: its transcript
		// is not used.
		log.Warn("voice note longer than allowed, as transcribed", slog.Duration("played", played), slog.Duration("claimed", a.Duration))
		return fail(b.tooLongText(played))
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		log.Warn("transcribe voice note", slog.Any("err", err))
		var ae *agent.Error
		switch {
		case agent.ErrorCodeOf(err) == agent.ErrUnsupported && errors.As(err, &ae):
			return fail("I can't listen to voice notes: " + ae.Message + ". Please type your message instead.")
		case errors.As(err, &ae):
			return fail("Sorry, I couldn't transcribe that voice note: " + ae.Message + ".")
		}
		return fail("Sorry, I couldn't transcribe that voice note. Please try again, or type your message.")
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return fail("I couldn't make out any words in that voice note. Could you try again, or type it?")
	}
	in.Text, in.Transcribed = text, true
	next := Job{ID: j.ID + "-heard", ThreadKey: j.ThreadKey, Kind: JobIncoming, Incoming: in, Enqueued: j.Enqueued}
	m := &Message{ThreadKey: j.ThreadKey, Role: RoleUser, Text: text, At: in.At}
	if err := b.commit(ctx, Change{Message: m, Job: &next, DeleteJob: j.ID}); err != nil {
		return nil, fmt.Errorf("bot: store transcript of %s: %w", j.ID, err)
	}
	log.Info("voice note transcribed", slog.Int("bytes", len(audio)), slog.Int("chars", len(text)))
	b.send(ctx, in.Platform, reply(in, voiceHeard(text)))
	return &next, nil
}
