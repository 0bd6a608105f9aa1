package openai

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tidybot/tidybot/agent"
)

// DefaultTranscribeModel is the speech-to-text model used when none is
// configured (TIDYBOT_TRANSCRIBE_MODEL).
const DefaultTranscribeModel = goopenai.GPTTranscribe

// Transcriber turns speech into text through an OpenAI-compatible
// POST /audio/transcriptions (OpenAI, or a local server such as speaches).
// It is safe for concurrent use.
type Transcriber struct {
	c *Client
}

// NewTranscriber returns a Transcriber for cfg's BaseURL, APIKey and
// Model (default DefaultTranscribeModel); other fields are ignored except
// Logger. hc should have a timeout (nil: 2 minutes).
func NewTranscriber(cfg Config, hc *http.Client) *Transcriber {
	if cfg.Model == "" {
		cfg.Model = DefaultTranscribeModel
	}
	return &Transcriber{c: New(Config{APIKey: cfg.APIKey, BaseURL: cfg.BaseURL, Model: cfg.Model, API: APIChat, Logger: cfg.Logger}, hc)}
}

// Model returns the transcription model's name.
func (t *Transcriber) Model() string { return t.c.model }

// audioTypes are the file extensions OpenAI accepts for transcription,
// with the media type of each: "The audio file object (not file name) to
// transcribe, in one of these formats: flac, mp3, mp4, mpeg, mpga, m4a,
// ogg, wav, or webm."
// (https://platform.openai.com/docs/api-reference/audio/createTranscription).
// OpenAI goes by the file name's extension, so a Telegram voice note
// (file path "voice/file_1.oga") must be sent as .ogg; compatible speech
// servers go by the file part's Content-Type, which is therefore set
// here and not left to go-openai's mime.TypeByExtension (nothing for
// these in a distroless image, so application/octet-stream; video/mp4
// for an audio-only .mp4 elsewhere). MP4 holding audio only is
// audio/mp4 (RFC 4337).
var audioTypes = map[string]string{".flac": "audio/flac", ".mp3": "audio/mpeg", ".mp4": "audio/mp4", ".mpeg": "audio/mpeg",
	".mpga": "audio/mpeg", ".m4a": "audio/mp4", ".ogg": "audio/ogg", ".wav": "audio/wav", ".webm": "audio/webm"}

// sniffAudio returns the extension of audio's format told from its first
// bytes (Ogg's "OggS", WebM's EBML magic, an MP4 "ftyp" box, RIFF/WAVE,
// "fLaC", an MP3 ID3 tag or frame sync), or "".
func sniffAudio(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("OggS")):
		return ".ogg"
	case bytes.HasPrefix(b, []byte("\x1a\x45\xdf\xa3")):
		return ".webm"
	case len(b) >= 12 && string(b[4:8]) == "ftyp":
		return ".m4a"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WAVE":
		return ".wav"
	case bytes.HasPrefix(b, []byte("fLaC")):
		return ".flac"
	case bytes.HasPrefix(b, []byte("ID3")), len(b) >= 2 && b[0] == 0xff && b[1]&0xe0 == 0xe0:
		return ".mp3"
	}
	return ""
}

// upload returns the file name and media type to send audio called name
// under: its format told from its bytes where they tell it, else from
// the name. Telegram's voice notes are Ogg/Opus (.oga, or no extension);
// Slack's audio clips are WebM or MP4 (adapters/slack/media.go) and come
// with their extension.
func upload(name string, audio []byte) (file, mediaType string) {
	base := strings.TrimSuffix(path.Base(name), path.Ext(name))
	if base == "" || base == "." || base == "/" {
		base = "voice"
	}
	ext := strings.ToLower(path.Ext(name))
	if sniffed := sniffAudio(audio); sniffed != "" && audioTypes[ext] != audioTypes[sniffed] {
		ext = sniffed
	}
	switch {
	case audioTypes[ext] != "":
	case ext == ".aac", ext == ".mp4a":
		ext = ".m4a"
	default:
		ext = ".ogg" // .oga, .opus, or a Telegram voice note's bare path
	}
	return base + ext, audioTypes[ext]
}

// typedReader is audio that tells go-openai its media type, which its
// form builder then sends as the file part's Content-Type.
type typedReader struct {
	*bytes.Reader
	mediaType string
}

// ContentType is what go-openai's CreateFormFileReader asks a reader.
func (r typedReader) ContentType() string { return r.mediaType }

// Transcribe returns the text spoken in audio, a file called name (its
// extension tells the format). Errors wrap an *agent.Error whose message
// is safe to show a user; a server without the endpoint (HTTP 404) gives
// code agent.ErrUnsupported.
func (t *Transcriber) Transcribe(ctx context.Context, name string, audio []byte) (string, error) {
	text, _, err := t.TranscribeTimed(ctx, name, audio)
	return text, err
}

// verbose reports whether the model answers verbose_json, which carries
// the duration the server decoded: "For gpt-4o-transcribe and
// gpt-4o-mini-transcribe, the only supported format is json"
// (platform.openai.com/docs/api-reference/audio/createTranscription), and
// so for OpenAI's gpt-… transcription models; whisper-1 and the
// Whisper servers (speaches, whisper.cpp, Groq) answer it.
func (t *Transcriber) verbose() bool { return !strings.HasPrefix(t.c.model, "gpt-") }

// TranscribeTimed implements bot.TimedTranscriber: Transcribe, and how
// long the audio played as the server decoded it (verbose_json's
// duration; 0 where the model answers json only).
func (t *Transcriber) TranscribeTimed(ctx context.Context, name string, audio []byte) (string, time.Duration, error) {
	file, mediaType := upload(name, audio)
	req := goopenai.AudioRequest{
		Model:    t.c.model,
		FilePath: file,
		Reader:   typedReader{bytes.NewReader(audio), mediaType},
		Format:   goopenai.AudioResponseFormatJSON,
	}
	if t.verbose() {
		req.Format = goopenai.AudioResponseFormatVerboseJSON
	}
	resp, err := t.c.api.CreateTranscription(ctx, req)
	var ge *goopenai.APIError
	if req.Format == goopenai.AudioResponseFormatVerboseJSON && errors.As(err, &ge) && ge.HTTPStatusCode == http.StatusBadRequest &&
		strings.Contains(strings.ToLower(ge.Message), "response_format") {
		// A server that answers json only: ask again without the length.
		req.Format, req.Reader = goopenai.AudioResponseFormatJSON, typedReader{bytes.NewReader(audio), mediaType}
		resp, err = t.c.api.CreateTranscription(ctx, req)
	}
	if err == nil {
		return strings.TrimSpace(resp.Text), time.Duration(resp.Duration * float64(time.Second)), nil
	}
	if ctx.Err() != nil {
		return "", 0, ctx.Err()
	}
	_, err = t.c.classify(err, nil, 0)
	var ae *agent.Error
	if errors.As(err, &ae) {
		var e *apiError
		switch {
		case errors.As(err, &e) && e.Status == http.StatusNotFound && e.Code != "model_not_found":
			ae = &agent.Error{Code: agent.ErrUnsupported, Err: ae.Err,
				Message: fmt.Sprintf("the speech server at %s does not transcribe audio (HTTP 404 for /audio/transcriptions): set TIDYBOT_TRANSCRIBE_URL to a server that does", t.c.host)}
		case errors.As(err, &e) && e.Status == http.StatusNotFound:
			ae = &agent.Error{Code: agent.ErrInvalid, Err: ae.Err,
				Message: fmt.Sprintf("the speech server at %s does not know model %q: check TIDYBOT_TRANSCRIBE_MODEL", t.c.host, t.c.model)}
		default:
			ae = &agent.Error{Code: ae.Code, Err: ae.Err, Message: strings.NewReplacer("model API", "speech server", "OPENAI_API_KEY", "TIDYBOT_TRANSCRIBE_API_KEY", "OPENAI_MODEL", "TIDYBOT_TRANSCRIBE_MODEL",
				"OPENAI_BASE_URL", "TIDYBOT_TRANSCRIBE_URL (OPENAI_BASE_URL when it is unset)").Replace(ae.Message)}
		}
		err = ae
	}
	return "", 0, fmt.Errorf("openai: transcribe %s: %w", file, err)
}
