package telegram_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/tidybot/tidybot/bot"
)

func update(t *testing.T, raw map[string]any) tgbotapi.Update {
	t.Helper()
	raw["update_id"] = 7
	b, _ := json.Marshal(raw)
	var u tgbotapi.Update
	if err := json.Unmarshal(b, &u); err != nil {
		t.Fatal(err)
	}
	return u
}

func mediaMessage(chatID int64, fields map[string]any) map[string]any {
	m := map[string]any{"message_id": 5, "date": 1700000000, "chat": map[string]any{"id": chatID, "type": map[bool]string{true: "private", false: "group"}[chatID > 0]},
		"from": map[string]any{"id": 42, "is_bot": false, "first_name": "A"}}
	for k, v := range fields {
		m[k] = v
	}
	return map[string]any{"message": m}
}

func TestIncomingMedia(t *testing.T) {
	a, _ := newAdapter(t, "")
	tests := []struct {
		name   string
		chat   int64
		fields map[string]any
		ok     bool
		want   bot.Attachment
		text   string
	}{
		{name: "voice note", chat: 42, ok: true, fields: map[string]any{"voice": map[string]any{"file_id": "v1", "file_unique_id": "u", "duration": 4, "mime_type": "audio/ogg", "file_size": 5000}},
			want: bot.Attachment{Kind: bot.AttachVoice, Ref: "v1", Name: "voice.ogg", MIME: "audio/ogg", Duration: 4 * time.Second, Size: 5000}},
		{name: "audio file", chat: 42, ok: true, fields: map[string]any{"audio": map[string]any{"file_id": "a1", "file_unique_id": "u", "duration": 30, "file_name": "memo.m4a", "mime_type": "audio/mp4"}},
			want: bot.Attachment{Kind: bot.AttachVoice, Ref: "a1", Name: "memo.m4a", MIME: "audio/mp4", Duration: 30 * time.Second}},
		{name: "photo picks the largest size up to 1280 px", chat: 42, ok: true, text: "Add these to Groceries", fields: map[string]any{"caption": "Add these to Groceries", "photo": []map[string]any{
			{"file_id": "p90", "file_unique_id": "a", "width": 90, "height": 68}, {"file_id": "p800", "file_unique_id": "b", "width": 800, "height": 600},
			{"file_id": "p1280", "file_unique_id": "c", "width": 1280, "height": 960}, {"file_id": "p2560", "file_unique_id": "d", "width": 2560, "height": 1920}}},
			want: bot.Attachment{Kind: bot.AttachImage, Ref: "p1280", Name: "photo.jpg", MIME: "image/jpeg"}},
		{name: "image document", chat: 42, ok: true, fields: map[string]any{"document": map[string]any{"file_id": "d1", "file_unique_id": "u", "file_name": "list.png", "mime_type": "image/png"}},
			want: bot.Attachment{Kind: bot.AttachImage, Ref: "d1", Name: "list.png", MIME: "image/png"}},
		{name: "pdf is ignored", chat: 42, fields: map[string]any{"document": map[string]any{"file_id": "d2", "file_unique_id": "u", "file_name": "a.pdf", "mime_type": "application/pdf"}}},
		{name: "voice in a group, not addressed", chat: -100, fields: map[string]any{"voice": map[string]any{"file_id": "v2", "file_unique_id": "u", "duration": 4}}},
		{name: "photo in a group, caption mentions the bot", chat: -100, ok: true, text: "add these", fields: map[string]any{"caption": "@tidybot add these",
			"caption_entities": []map[string]any{{"type": "mention", "offset": 0, "length": 8}},
			"photo":            []map[string]any{{"file_id": "g1", "file_unique_id": "a", "width": 640, "height": 480}}},
			want: bot.Attachment{Kind: bot.AttachImage, Ref: "g1", Name: "photo.jpg", MIME: "image/jpeg"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, ok := a.Incoming(update(t, mediaMessage(tt.chat, tt.fields)))
			if ok != tt.ok {
				t.Fatalf("handled = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if in.Attachment == nil || *in.Attachment != tt.want || in.Text != tt.text {
				t.Errorf("got %+v text %q, want %+v text %q", in.Attachment, in.Text, tt.want, tt.text)
			}
		})
	}
}

func TestDownloadThroughGetFile(t *testing.T) {
	a, srv := newAdapter(t, "")
	id := srv.AddFile("voice", ".oga", []byte("OggS-note"))
	got, err := a.Download(t.Context(), bot.Attachment{Kind: bot.AttachVoice, Ref: id, Name: "voice.ogg"}, bot.MaxFileBytes)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, []byte("OggS-note")) || srv.Downloads(id) != 1 {
		t.Errorf("downloaded %q (%d downloads)", got, srv.Downloads(id))
	}

	big := srv.AddBigFile("voice", ".oga", 21<<20)
	_, err = a.Download(t.Context(), bot.Attachment{Ref: big, Name: "voice.ogg"}, bot.MaxFileBytes)
	if !errors.Is(err, bot.ErrFileTooLarge) {
		t.Errorf("a 21 MB file: err = %v, want ErrFileTooLarge", err)
	}
	_, err = a.Download(t.Context(), bot.Attachment{Ref: "gone", Name: "voice.ogg"}, bot.MaxFileBytes)
	if err == nil || strings.Contains(err.Error(), srv.Token) || errors.Is(err, bot.ErrFileTooLarge) {
		t.Errorf("an unknown file: err = %v, want a plain error without the token", err)
	}
}
