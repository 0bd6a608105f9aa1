package openaitest

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTranscriptionChecks(t *testing.T) {
	s := New(nil, WithTranscripts(func(Transcription) string { return "hello" }))
	defer s.Close()
	tests := []struct {
		name, model, file string
		audio             []byte
		status            int
	}{
		{"voice note", "gpt-transcribe", "v.ogg", VoiceNote, 200},
		{"telegram extension", "gpt-transcribe", "v.oga", VoiceNote, 400},
		{"no model", "", "v.ogg", VoiceNote, 400},
		{"not an ogg stream", "gpt-transcribe", "v.ogg", []byte("OggX not really"), 400},
		{"ogg without opus head", "gpt-transcribe", "v.ogg", append([]byte("OggS\x00\x02"), bytes.Repeat([]byte{0}, 40)...), 400},
		{"wav", "gpt-transcribe", "v.wav", []byte("RIFF"), 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body bytes.Buffer
			mw := multipart.NewWriter(&body)
			fw, _ := mw.CreateFormFile("file", tt.file)
			_, _ = fw.Write(tt.audio)
			if tt.model != "" {
				_ = mw.WriteField("model", tt.model)
			}
			_ = mw.Close()
			req := httptest.NewRequest(http.MethodPost, "/v1/audio/transcriptions", &body)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Errorf("status = %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if tt.status == 200 && !strings.Contains(rec.Body.String(), `"text":"hello"`) {
				t.Errorf("body = %s, want the scripted text", rec.Body)
			}
		})
	}
	if len(VoiceNote) > 20000 || !validOgg(VoiceNote) {
		t.Errorf("testdata/voice.ogg: %d bytes, valid Ogg/Opus %v; want a small valid note", len(VoiceNote), validOgg(VoiceNote))
	}
}
