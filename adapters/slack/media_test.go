package slack_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/bot"
)

func TestAudioClipAndImageInADM(t *testing.T) {
	a, srv := newAdapter(t)
	rec := &recorder{}
	h := a.EventsHandler(rec)
	clip := srv.AddFile(slacktest.File{Name: "audio_message.webm", Mimetype: "audio/webm", Filetype: "webm", Data: []byte("OggS-ish clip"), DurationMs: 4200})
	img := srv.AddFile(slacktest.File{Name: "list.png", Mimetype: "image/png", Filetype: "png", Data: []byte("png"), Width: 800, Height: 600})
	for i, m := range []slacktest.Message{
		{Channel: "D1", ChannelType: "im", User: "U1", TS: "1.1", Files: []slacktest.File{clip}},
		{Channel: "D1", ChannelType: "im", User: "U1", Text: "Add these to Groceries", TS: "2.2", Files: []slacktest.File{img}},
		{Channel: "C1", ChannelType: "channel", User: "U1", TS: "3.3", Files: []slacktest.File{clip}}, // not addressed
	} {
		for _, body := range srv.Events(m) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, signed(t, "/slack/events", "application/json", body, secret, time.Now()))
			if w.Code != 200 {
				t.Errorf("message %d: status %d", i, w.Code)
			}
		}
	}
	got := rec.got()
	if len(got) != 2 {
		t.Fatalf("handled %d events, want the two DMs: %+v", len(got), got)
	}
	want := bot.Attachment{Kind: bot.AttachVoice, Ref: clip.URL(), Name: "audio_message.webm", MIME: "audio/webm", Duration: 4200 * time.Millisecond, Size: int64(len("OggS-ish clip"))}
	if a := got[0].Attachment; a == nil || *a != want || got[0].Text != "" {
		t.Errorf("audio clip: %+v, want %+v", got[0].Attachment, want)
	}
	if a := got[1].Attachment; a == nil || a.Kind != bot.AttachImage || got[1].Text != "Add these to Groceries" {
		t.Errorf("image: %+v %q", got[1].Attachment, got[1].Text)
	}

	data, err := a.Download(t.Context(), *got[0].Attachment, bot.MaxFileBytes)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, []byte("OggS-ish clip")) || srv.Downloads(clip) != 1 {
		t.Errorf("downloaded %q, %d downloads with the token", data, srv.Downloads(clip))
	}
	if _, err := a.Download(t.Context(), *got[0].Attachment, 4); !errors.Is(err, bot.ErrFileTooLarge) {
		t.Errorf("over the limit: err = %v, want ErrFileTooLarge", err)
	}
}

// TestDownloadNeedsTheBotToken: the fake serves a private file only with
// the bot token; without it Slack redirects to the sign-in page.
func TestDownloadNeedsTheBotToken(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	clip := srv.AddFile(slacktest.File{Name: "a.webm", Mimetype: "audio/webm", Data: []byte("clip")})
	resp, err := http.Get(clip.URL())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if bytes.Contains(body, []byte("clip")) || resp.Request.URL.Query().Get("redir") == "" || srv.Downloads(clip) != 0 {
		t.Errorf("without a token: got %q from %s, want the sign-in page", body, resp.Request.URL)
	}
	a, err := slack.New(t.Context(), slack.Config{BotToken: slacktest.Token, SigningSecret: secret, APIURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Download(t.Context(), bot.Attachment{Kind: bot.AttachVoice, Ref: clip.URL(), Name: "a.webm"}, bot.MaxFileBytes); err != nil || srv.Downloads(clip) != 1 {
		t.Errorf("with the token: err %v, %d downloads", err, srv.Downloads(clip))
	}
}
