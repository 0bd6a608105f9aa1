package openai_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

func TestTranscribeVoiceNote(t *testing.T) {
	srv := openaitest.New(nil, openaitest.WithAPIKey("sk-speech"), openaitest.WithTranscripts(func(tr openaitest.Transcription) string {
		return " " + openaitest.VoiceNoteText + " "
	}))
	defer srv.Close()
	tc := openai.NewTranscriber(openai.Config{BaseURL: srv.URL, APIKey: "sk-speech"}, srv.Client())
	// Telegram names voice notes "voice/file_7.oga": the API accepts .ogg only.
	got, err := tc.Transcribe(t.Context(), "voice/file_7.oga", openaitest.VoiceNote)
	if err != nil {
		t.Fatal(err)
	}
	if got != openaitest.VoiceNoteText {
		t.Errorf("transcript = %q, want %q", got, openaitest.VoiceNoteText)
	}
	trs := srv.Transcriptions()
	if len(trs) != 1 {
		t.Fatalf("%d transcriptions, want 1", len(trs))
	}
	if tr := trs[0]; tr.Model != "gpt-transcribe" || tr.Filename != "file_7.ogg" || !bytes.Equal(tr.Audio, openaitest.VoiceNote) {
		t.Errorf("server got model %q file %q (%d bytes), want gpt-transcribe, file_7.ogg and the voice note", tr.Model, tr.Filename, len(tr.Audio))
	}
}

func TestTranscribeFailures(t *testing.T) {
	tests := []struct {
		name     string
		opts     []openaitest.Option
		key      string
		file     string
		audio    []byte
		code     agent.ErrorCode
		wantText string
	}{
		{name: "no audio endpoint", file: "a.ogg", audio: openaitest.VoiceNote, code: agent.ErrUnsupported, wantText: "does not transcribe audio"},
		{name: "not ogg", file: "a.ogg", audio: []byte("this is not audio"), code: agent.ErrInvalid, wantText: "corrupted",
			opts: []openaitest.Option{openaitest.WithTranscripts(func(openaitest.Transcription) string { return "x" })}},
		{name: "wrong key", key: "sk-wrong", file: "a.ogg", audio: openaitest.VoiceNote, code: agent.ErrUnauthorized, wantText: "TIDYBOT_TRANSCRIBE_API_KEY",
			opts: []openaitest.Option{openaitest.WithAPIKey("sk-right"), openaitest.WithTranscripts(func(openaitest.Transcription) string { return "x" })}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := openaitest.New(nil, tt.opts...)
			defer srv.Close()
			tc := openai.NewTranscriber(openai.Config{BaseURL: srv.URL, APIKey: tt.key}, srv.Client())
			_, err := tc.Transcribe(t.Context(), tt.file, tt.audio)
			var ae *agent.Error
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want an *agent.Error", err)
			}
			if ae.Code != tt.code || !strings.Contains(ae.Message, tt.wantText) {
				t.Errorf("err = %s %q, want %s mentioning %q", ae.Code, ae.Message, tt.code, tt.wantText)
			}
			if tt.key != "" && strings.Contains(err.Error(), tt.key) {
				t.Errorf("error %q repeats the key", err)
			}
		})
	}
}

// TestTranscribeTimedReportsTheDecodedLength: a model that answers
// verbose_json (whisper-1) reports how long the server decoded the audio
// to be; OpenAI's gpt-… transcription models answer json only, and are
// not asked for verbose_json (the fake refuses it, as OpenAI does).
func TestTranscribeTimedReportsTheDecodedLength(t *testing.T) {
	tests := []struct {
		model string
		want  time.Duration
	}{
		{"whisper-1", 95 * time.Second},
		{"gpt-transcribe", 0},
		{"gpt-4o-mini-transcribe", 0},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			srv := openaitest.New(nil, openaitest.WithTranscripts(func(openaitest.Transcription) string { return "hi" }),
				openaitest.WithAudioLength(func(openaitest.Transcription) time.Duration { return 95 * time.Second }))
			defer srv.Close()
			tc := openai.NewTranscriber(openai.Config{BaseURL: srv.URL, Model: tt.model}, srv.Client())
			text, played, err := tc.TranscribeTimed(t.Context(), "talk.mp3", []byte("ID3 not really audio"))
			if err != nil || text != "hi" || played != tt.want {
				t.Errorf("got %q %v %v, want hi %v", text, played, err, tt.want)
			}
		})
	}
}

// TestTranscribeSendsTheAudioType: the file part carries the audio's own
// media type, told from its bytes, whatever the system's MIME table
// (empty in a distroless image) says of the extension: Slack's clips are
// WebM or audio-only MP4 (adapters/slack/media.go), Telegram's voice
// notes Ogg/Opus.
func TestTranscribeSendsTheAudioType(t *testing.T) {
	m4a := append([]byte("\x00\x00\x00\x18ftypM4A \x00\x00\x00\x00"), bytes.Repeat([]byte{0}, 40)...)
	webm := append([]byte("\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01"), bytes.Repeat([]byte{0}, 40)...)
	tests := []struct {
		name     string
		audio    []byte
		wantFile string
		wantType string
	}{
		{"voice/file_7.oga", openaitest.VoiceNote, "file_7.ogg", "audio/ogg"},
		{"voice/file_8", openaitest.VoiceNote, "file_8.ogg", "audio/ogg"},
		{"audio_message.mp4", m4a, "audio_message.mp4", "audio/mp4"},
		{"audio_message.webm", webm, "audio_message.webm", "audio/webm"},
		{"Audio clip.m4a", m4a, "Audio clip.m4a", "audio/mp4"},
		{"clip", webm, "clip.webm", "audio/webm"},
	}
	srv := openaitest.New(nil, openaitest.WithTranscripts(func(openaitest.Transcription) string { return "ok" }))
	defer srv.Close()
	tc := openai.NewTranscriber(openai.Config{BaseURL: srv.URL}, srv.Client())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tc.Transcribe(t.Context(), tt.name, tt.audio); err != nil {
				t.Fatal(err)
			}
			trs := srv.Transcriptions()
			if tr := trs[len(trs)-1]; tr.Filename != tt.wantFile || tr.ContentType != tt.wantType {
				t.Errorf("sent %q as %q, want %q as %q", tr.Filename, tr.ContentType, tt.wantFile, tt.wantType)
			}
		})
	}
}

// TestTranscribeFallsBackToJSON: a server that answers json only (it
// refuses verbose_json with a 400 naming response_format) is asked again
// for json.
func TestTranscribeFallsBackToJSON(t *testing.T) {
	srv := openaitest.New(nil, openaitest.WithTranscripts(func(openaitest.Transcription) string { return "hi" }), openaitest.WithJSONOnly())
	defer srv.Close()
	tc := openai.NewTranscriber(openai.Config{BaseURL: srv.URL, Model: "whisper-large-v3"}, srv.Client())
	if text, played, err := tc.TranscribeTimed(t.Context(), "a.ogg", openaitest.VoiceNote); err != nil || text != "hi" || played != 0 {
		t.Errorf("got %q %v %v, want hi without a length", text, played, err)
	}
}
