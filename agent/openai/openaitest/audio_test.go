package openaitest

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"testing"
)

func TestTranscriptionChecks(t *testing.T) {
	s := New(nil, WithTranscripts(func(Transcription) string { return "hello" }))
	defer s.Close()
	m4a := append([]byte("\x00\x00\x00\x18ftypM4A \x00\x00\x00\x00"), bytes.Repeat([]byte{0}, 40)...)
	tests := []struct {
		name, model, file, ct string
		audio                 []byte
		status                int
	}{
		{"voice note", "gpt-transcribe", "v.ogg", "audio/ogg", VoiceNote, 200},
		{"voice note with codecs", "gpt-transcribe", "v.ogg", "audio/ogg; codecs=opus", VoiceNote, 200},
		{"telegram extension", "gpt-transcribe", "v.oga", "audio/ogg", VoiceNote, 400},
		{"no model", "", "v.ogg", "audio/ogg", VoiceNote, 400},
		{"not an ogg stream", "gpt-transcribe", "v.ogg", "audio/ogg", []byte("OggX not really"), 400},
		{"ogg without opus head", "gpt-transcribe", "v.ogg", "audio/ogg", append([]byte("OggS\x00\x02"), bytes.Repeat([]byte{0}, 40)...), 400},
		{"wav", "gpt-transcribe", "v.wav", "audio/wav", []byte("RIFF"), 200},
		{"octet-stream", "gpt-transcribe", "v.ogg", "application/octet-stream", VoiceNote, 400},
		{"no part type", "gpt-transcribe", "v.ogg", "", VoiceNote, 400},
		{"audio-only mp4", "gpt-transcribe", "clip.mp4", "audio/mp4", m4a, 200},
		{"audio-only mp4 as video", "gpt-transcribe", "clip.mp4", "video/mp4", m4a, 400},
		{"ogg sent as webm", "gpt-transcribe", "v.webm", "audio/webm", VoiceNote, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body bytes.Buffer
			mw := multipart.NewWriter(&body)
			h := textproto.MIMEHeader{"Content-Disposition": {`form-data; name="file"; filename="` + tt.file + `"`}}
			if tt.ct != "" {
				h.Set("Content-Type", tt.ct)
			}
			fw, _ := mw.CreatePart(h)
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

func TestImageChecks(t *testing.T) {
	tests := []struct {
		name, body string
		opts       []Option
		status     int
	}{
		{"user image", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}}]}]}`, nil, 200},
		{"image in a system message", `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}}]}]}`, nil, 400},
		{"not a data URL of an image", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:text/plain;base64,aGk="}}]}]}`, nil, 400},
		{"model without vision", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}}]}]}`, []Option{WithoutVision()}, 400},
		{"responses input_image", `{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","image_url":"data:image/jpeg;base64,/9j/"}]}]}`, nil, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(nil, tt.opts...)
			defer s.Close()
			path := "/v1/chat/completions"
			if strings.Contains(tt.body, `"input"`) {
				path = "/v1/responses"
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(tt.body)))
			if rec.Code != tt.status {
				t.Errorf("status = %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
		})
	}
}
