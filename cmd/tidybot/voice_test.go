package main

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
	"github.com/tidybot/tidybot/bot"
)

// serve gives the bot a transcriber that reports a voice note's length.
var _ bot.TimedTranscriber = (*openai.Transcriber)(nil)

// withSpeech replaces e's model server by one that also transcribes: the
// real voice note (openaitest.VoiceNote) reads as said; anything else
// fails the test.
func withSpeech(t *testing.T, e *env, said string) {
	t.Helper()
	e.model.Close()
	e.model = openaitest.New(openaitest.FromAgent(e.scen.reply), openaitest.WithTranscripts(func(tr openaitest.Transcription) string {
		if !bytes.Equal(tr.Audio, openaitest.VoiceNote) {
			t.Errorf("transcribed %d bytes that are not the voice note", len(tr.Audio))
		}
		return said
	}))
	t.Cleanup(e.model.Close)
	e.cfg.OpenAIBaseURL = e.model.URL
	e.cfg.TranscribeModel = "gpt-transcribe"
}

func TestTelegramVoiceNoteTidiesTheInbox(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	withSpeech(t, e, "Tidy my inbox")
	tg := serveTelegram(t, e)
	id := tg.AddFile("voice", ".oga", openaitest.VoiceNote)
	tg.PushVoice(42, 42, id, 3)
	// Said, not the /tidy-inbox command: moves of tasks the person did
	// not name wait for their yes (agent/injection.go).
	waitFor(t, "the question", func() bool { return strings.Contains(lastText(tg, 42), "You did not ask for this") })
	tg.PushText(42, 42, "yes")
	waitFor(t, "the tidy's answer", func() bool { return strings.HasPrefix(lastText(tg, 42), "Moved ") })
	if msgs := tg.Messages(42); msgs[0].Text != "🎙 “Tidy my inbox”" {
		t.Errorf("first message %q, want what was heard", msgs[0].Text)
	}
	if len(e.layout()["Inbox"]) != 0 {
		t.Errorf("layout: %v", e.layout())
	}
	trs := e.model.Transcriptions()
	if len(trs) != 1 || trs[0].Model != "gpt-transcribe" || !strings.HasSuffix(trs[0].Filename, ".ogg") {
		t.Errorf("transcriptions: %+v", trs)
	}
}

func TestTelegramVoiceNoteFailures(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *env)
		file  func(tg fileAdder) string
		secs  int
		want  string
	}{
		{name: "no transcription model", setup: func(e *env) { e.cfg.TranscribeModel = "" }, want: "no transcription model is configured"},
		{name: "server without audio", setup: func(e *env) { e.cfg.TranscribeModel = "gpt-transcribe" }, want: "does not transcribe audio"},
		{name: "too long", setup: func(e *env) { withSpeech(t, e, "x"); e.cfg.VoiceMax = time.Minute }, secs: 90, want: "1m30s long; I take notes of up to 1m0s"},
		{name: "download fails", setup: func(e *env) { withSpeech(t, e, "x") }, file: func(fileAdder) string { return "AgADgone" }, want: "couldn't download"},
		{name: "over 20 MB", setup: func(e *env) { withSpeech(t, e, "x") }, file: func(tg fileAdder) string { return tg.AddBigFile("voice", ".oga", 25<<20) }, want: "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			tt.setup(e)
			tg := serveTelegram(t, e)
			id := ""
			if tt.file != nil {
				id = tt.file(tg)
			} else {
				id = tg.AddFile("voice", ".oga", openaitest.VoiceNote)
			}
			secs := max(tt.secs, 3)
			tg.PushVoice(42, 42, id, secs)
			waitFor(t, "the answer", func() bool { return lastText(tg, 42) != "" })
			if got := lastText(tg, 42); !strings.Contains(got, tt.want) {
				t.Errorf("answer %q, want %q", got, tt.want)
			}
			if tt.secs > 0 && tg.Downloads(id) != 0 {
				t.Errorf("a note that is too long was downloaded")
			}
			// Nothing was stored half-way: the next message runs alone.
			tg.PushText(42, 42, "hello")
			waitFor(t, "the next answer", func() bool { return lastText(tg, 42) == "You said: hello" })
			if n := len(tg.Messages(42)); n > 4 {
				t.Errorf("%d messages, want the failure, then one run", n)
			}
		})
	}
}

type fileAdder interface {
	AddBigFile(kind, ext string, size int) string
}

func TestSlackAudioClipMovesTheMilkTask(t *testing.T) {
	e := newEnv(t)
	e.todo.AddTask(todoisttest.Task{Content: "Buy milk"})
	withSpeech(t, e, openaitest.VoiceNoteText)
	sl, base := serveSlack(t, e)
	clip := sl.AddFile(slacktest.File{Name: "audio_message.ogg", Mimetype: "audio/ogg", Filetype: "ogg", Data: openaitest.VoiceNote, DurationMs: 2100})
	for _, ev := range sl.Events(slacktest.Message{Channel: "D1", ChannelType: "im", User: "U1", TS: "5.5", Files: []slacktest.File{clip}}) {
		if code := postSigned(t, base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
			t.Fatalf("event: %d", code)
		}
	}
	waitFor(t, "the answer", func() bool { return lastPost(sl, "D1").Text == "Moved the milk task to Groceries." })
	if ps := sl.Posts("D1"); ps[0].Text != "🎙 “"+openaitest.VoiceNoteText+"”" {
		t.Errorf("first post %q, want what was heard", ps[0].Text)
	}
	if got := e.layout()["Groceries"]; len(got) != 1 || got[0] != "Buy milk" {
		t.Errorf("layout: %v", e.layout())
	}
	if sl.Downloads(clip) != 1 {
		t.Errorf("%d downloads with the bot token, want 1", sl.Downloads(clip))
	}
	if !strings.Contains(readRepoFile(t, "deploy/slack-manifest.yaml"), "- files:read") {
		t.Error("the Slack manifest lacks the files:read scope that downloads need")
	}
}

func TestTelegramPhotoOfAListAddsTheItems(t *testing.T) {
	e := newEnv(t)
	e.todo.AddProject(todoisttest.Project{Name: "Groceries"})
	tg := serveTelegram(t, e)
	small := tg.AddFile("photos", ".jpg", []byte("thumbnail"))
	right := tg.AddFile("photos", ".jpg", listPhoto())
	huge := tg.AddFile("photos", ".jpg", []byte("too big"))
	tg.PushPhoto(42, 42, "Add these to Groceries",
		telegramtest.PhotoSize{FileID: small, Width: 90, Height: 68},
		telegramtest.PhotoSize{FileID: right, Width: 1280, Height: 960},
		telegramtest.PhotoSize{FileID: huge, Width: 2560, Height: 1920})
	waitFor(t, "the answer", func() bool { return lastText(tg, 42) == "Added 3 items to Groceries." })
	if got := e.layout()["Groceries"]; strings.Join(got, ",") != "Bread,Eggs,Milk" {
		t.Errorf("Groceries: %v", got)
	}
	if tg.Downloads(right) != 1 || tg.Downloads(small)+tg.Downloads(huge) != 0 {
		t.Errorf("downloads: %d of the 1280 px size, %d others", tg.Downloads(right), tg.Downloads(small)+tg.Downloads(huge))
	}
	// The last request holds the whole run: one add_tasks call, a batch.
	reqs := e.model.Requests()
	adds := 0
	for _, m := range reqs[len(reqs)-1].Messages {
		for _, c := range m.ToolCalls {
			if c.Name == "add_tasks" {
				adds++
			}
		}
	}
	if adds != 1 {
		t.Errorf("%d add_tasks calls, want the items in one batch", adds)
	}
}

func TestSlackImageAddsTheItems(t *testing.T) {
	e := newEnv(t)
	e.todo.AddProject(todoisttest.Project{Name: "Groceries"})
	sl, base := serveSlack(t, e)
	img := sl.AddFile(slacktest.File{Name: "IMG_0042.png", Mimetype: "image/png", Filetype: "png", Data: listPhoto(), Width: 640, Height: 480})
	for _, ev := range sl.Events(slacktest.Message{Channel: "D1", ChannelType: "im", User: "U1", Text: "Add these to Groceries", TS: "6.6", Files: []slacktest.File{img}}) {
		if code := postSigned(t, base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
			t.Fatalf("event: %d", code)
		}
	}
	waitFor(t, "the answer", func() bool { return lastPost(sl, "D1").Text == "Added 3 items to Groceries." })
	if got := e.layout()["Groceries"]; strings.Join(got, ",") != "Bread,Eggs,Milk" {
		t.Errorf("Groceries: %v", got)
	}
}

func TestPhotoToAModelWithoutVision(t *testing.T) {
	e := newEnv(t)
	e.model.Close()
	e.model = openaitest.New(openaitest.FromAgent(e.scen.reply), openaitest.WithoutVision())
	t.Cleanup(e.model.Close)
	e.cfg.OpenAIBaseURL = e.model.URL
	tg := serveTelegram(t, e)
	id := tg.AddFile("photos", ".jpg", listPhoto())
	tg.PushPhoto(42, 42, "Add these to Groceries", telegramtest.PhotoSize{FileID: id, Width: 640, Height: 480})
	waitFor(t, "the answer", func() bool { return strings.Contains(lastText(tg, 42), "Pick a vision model") })
	// A typed message still works.
	tg.PushText(42, 42, "hello")
	waitFor(t, "the next answer", func() bool { return lastText(tg, 42) == "You said: hello" })
}

// TestSlackLargeImageIsScaledDown: an image over 1280 px reaches the model
// scaled down to 1280 px.
func TestSlackLargeImageIsScaledDown(t *testing.T) {
	e := newEnv(t)
	sl, base := serveSlack(t, e)
	big := image.NewRGBA(image.Rect(0, 0, 2000, 1500))
	var buf bytes.Buffer
	if err := png.Encode(&buf, big); err != nil {
		t.Fatal(err)
	}
	img := sl.AddFile(slacktest.File{Name: "IMG_0043.png", Mimetype: "image/png", Filetype: "png", Data: buf.Bytes(), Width: 2000, Height: 1500})
	for _, ev := range sl.Events(slacktest.Message{Channel: "D1", ChannelType: "im", User: "U1", Text: "what is this?", TS: "7.7", Files: []slacktest.File{img}}) {
		if code := postSigned(t, base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
			t.Fatalf("event: %d", code)
		}
	}
	waitFor(t, "the answer", func() bool { return lastPost(sl, "D1").Text == "You said: what is this?" })
	reqs := e.model.Requests()
	var sent string
	for _, m := range reqs[0].Messages {
		if len(m.Images) > 0 {
			sent = m.Images[0]
		}
	}
	data, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sent, "data:image/jpeg;base64,"))
	if err != nil {
		t.Fatalf("image sent: %.40q: %v", sent, err)
	}
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(data))
	if err != nil || cfg.Width != 1280 || cfg.Height != 960 {
		t.Errorf("image sent %dx%d (%v), want 1280x960", cfg.Width, cfg.Height, err)
	}
}

func TestTelegramVoiceNoteAnswersAQuestion(t *testing.T) {
	e := newEnv(t)
	e.todo.AddTask(todoisttest.Task{Content: "Call the dentist"})
	withSpeech(t, e, "Health")
	tg := serveTelegram(t, e)
	tg.PushText(42, 42, "file the dentist task")
	waitFor(t, "the question", func() bool { return strings.Contains(lastText(tg, 42), "Which project") })
	tg.PushVoice(42, 42, tg.AddFile("voice", ".oga", openaitest.VoiceNote), 2)
	waitFor(t, "the answer", func() bool { return lastText(tg, 42) == "Filed the dentist task." })
	if got := e.layout()["Health"]; len(got) != 1 {
		t.Errorf("layout: %v", e.layout())
	}
}

func TestSlackAudioClipThatCannotBeDownloaded(t *testing.T) {
	e := newEnv(t)
	withSpeech(t, e, "x")
	sl, base := serveSlack(t, e)
	clip := sl.AddFile(slacktest.File{Name: "audio_message.webm", Mimetype: "audio/webm", Filetype: "webm", Data: openaitest.VoiceNote, DurationMs: 2100})
	ev := sl.Events(slacktest.Message{Channel: "D1", ChannelType: "im", User: "U1", TS: "8.8", Files: []slacktest.File{clip}})[0]
	ev = bytes.ReplaceAll(ev, []byte(clip.URL()), []byte(strings.Replace(clip.URL(), "F0000", "F9999", 1)))
	if code := postSigned(t, base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
		t.Fatalf("event: %d", code)
	}
	waitFor(t, "the answer", func() bool { return strings.Contains(lastPost(sl, "D1").Text, "couldn't download") })
	if n := len(e.model.Transcriptions()); n != 0 {
		t.Errorf("%d transcriptions", n)
	}
}

// TestTranscribeConfig: the model API's address and key by default; a
// speech server of its own never gets OPENAI_API_KEY.
func TestTranscribeConfig(t *testing.T) {
	base := Config{OpenAIKey: "sk-model", OpenAIBaseURL: "https://api.openai.com/v1", TranscribeModel: "gpt-transcribe"}
	tests := []struct {
		name      string
		url, key  string
		wantURL   string
		wantKey   string
		wantModel string
	}{
		{"default", "", "", "https://api.openai.com/v1", "sk-model", "gpt-transcribe"},
		{"own server", "http://localhost:8000/v1", "", "http://localhost:8000/v1", "", "gpt-transcribe"},
		{"own server and key", "http://localhost:8000/v1", "sk-speech", "http://localhost:8000/v1", "sk-speech", "gpt-transcribe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			c.TranscribeURL, c.TranscribeKey = tt.url, tt.key
			got := c.Transcribe(nil)
			if got.BaseURL != tt.wantURL || got.APIKey != tt.wantKey || got.Model != tt.wantModel {
				t.Errorf("got %s key %q model %s, want %s key %q model %s", got.BaseURL, got.APIKey, got.Model, tt.wantURL, tt.wantKey, tt.wantModel)
			}
		})
	}
}
