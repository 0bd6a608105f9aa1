package bot

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// fakeTranscriber has one function field, so a test can fail it.
type fakeTranscriber struct {
	mu    sync.Mutex
	calls []string // file names
	f     func(name string, audio []byte) (string, error)
}

func (f *fakeTranscriber) Transcribe(_ context.Context, name string, audio []byte) (string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, name)
	fn := f.f
	f.mu.Unlock()
	return fn(name, audio)
}

func (f *fakeTranscriber) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func newVoiceHarness(t *testing.T, ag *mockAgent, tr Transcriber) *harness {
	t.Helper()
	plat := newTelegram()
	plat.download = func(a Attachment, _ int64) ([]byte, error) {
		if a.Ref != "file-1" {
			return nil, errors.New("no such file")
		}
		return []byte("OggS voice"), nil
	}
	return startHarness(t, ag, plat, Config{Workers: 2, AllowedUsers: []string{"telegram:42"}, Transcriber: tr, VoiceMax: time.Minute})
}

func voice(event string, d time.Duration) Incoming {
	in := msg("", event)
	in.Attachment = &Attachment{Kind: AttachVoice, Ref: "file-1", Name: "voice/file_1.oga", Duration: d}
	return in
}

func TestVoiceNoteRunsAsTyped(t *testing.T) {
	tr := &fakeTranscriber{f: func(name string, audio []byte) (string, error) {
		if string(audio) != "OggS voice" {
			return "", errors.New("not the downloaded audio")
		}
		return " move the milk task to groceries ", nil
	}}
	ag := &mockAgent{}
	h := newVoiceHarness(t, ag, tr)
	h.handle(t, voice("v1", 3*time.Second))
	h.handle(t, voice("v1", 3*time.Second)) // redelivered
	h.idle(t)
	const said = "move the milk task to groceries"
	if got := h.agent.startedList(); joined(got) != said {
		t.Errorf("runs started: %q, want one with the transcript", got)
	}
	if tr.count() != 1 {
		t.Errorf("transcribed %d times, want 1", tr.count())
	}
	texts := h.plat.texts()
	if len(texts) < 2 || texts[0] != "🎙 “"+said+"”" {
		t.Errorf("sent %q, want what was heard first", texts)
	}
	if len(h.store.messages) < 1 || h.store.messages[0].Text != said || h.store.messages[0].Role != RoleUser {
		t.Errorf("stored messages %+v, want the transcript as the user's", h.store.messages)
	}
	if len(h.store.jobs) != 0 {
		t.Errorf("%d jobs left", len(h.store.jobs))
	}
}

func TestVoiceNoteAnswersAQuestion(t *testing.T) {
	ag := &mockAgent{StartFn: asking("Groceries", "Home")}
	tr := &fakeTranscriber{f: func(string, []byte) (string, error) { return "the second one", nil }}
	h := newVoiceHarness(t, ag, tr)
	h.handle(t, msg("file the milk task", "m1"))
	h.idle(t)
	h.handle(t, voice("v2", 2*time.Second))
	h.idle(t)
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if joined(ag.resumed) != "the second one" || len(ag.started) != 1 {
		t.Errorf("resumed with %q, started %q; want the transcript to answer the question", ag.resumed, ag.started)
	}
}

// TestVoiceNoteTranscribedOnceAfterRestart: the transcript is stored with
// a job that carries it, so a restart between hearing and running does not
// transcribe again.
func TestVoiceNoteTranscribedOnceAfterRestart(t *testing.T) {
	tr := &fakeTranscriber{f: func(string, []byte) (string, error) { return "what's due today?", nil }}
	ag := &mockAgent{}
	h := newVoiceHarness(t, ag, tr)
	var heard Change
	h.store.onCommit = func(c Change) {
		if c.Message != nil && c.Job != nil {
			heard = c
		}
	}
	h.handle(t, voice("v3", time.Second))
	h.idle(t)
	if heard.Job == nil || !heard.Job.Incoming.Transcribed || heard.Job.Incoming.Text != "what's due today?" || heard.DeleteJob == "" {
		t.Fatalf("transcript stored as %+v, want message and a job carrying it, retiring the voice job", heard)
	}
	// A new process finds that job: it runs with the text, no transcription.
	st := newMemStore()
	st.jobs = []Job{*heard.Job}
	st.threads[heard.Job.ThreadKey] = Thread{Key: heard.Job.ThreadKey, Platform: "telegram", ChatID: "c1"}
	tr2 := &fakeTranscriber{f: func(string, []byte) (string, error) { return "", errors.New("transcribed again") }}
	ag2 := &mockAgent{}
	b := New(st, ag2, Config{AllowedUsers: []string{"telegram:42"}, Transcriber: tr2})
	b.AddPlatform(&fakePlatform{name: "telegram"})
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := b.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if tr2.count() != 0 || joined(ag2.startedList()) != "what's due today?" {
		t.Errorf("after restart: %d transcriptions, runs %q", tr2.count(), ag2.startedList())
	}
}

func TestVoiceNoteFailures(t *testing.T) {
	unsupported := &agent.Error{Code: agent.ErrUnsupported, Message: "the speech server at localhost does not transcribe audio (HTTP 404 for /audio/transcriptions): set TIDYBOT_TRANSCRIBE_URL to a server that does"}
	tests := []struct {
		name      string
		tr        Transcriber
		in        Incoming
		want      string
		downloads int
	}{
		{name: "no transcription model", in: voice("f1", time.Second), want: "no transcription model is configured"},
		{name: "server without audio", tr: &fakeTranscriber{f: func(string, []byte) (string, error) { return "", unsupported }},
			in: voice("f2", time.Second), want: "does not transcribe audio", downloads: 1},
		{name: "too long", tr: &fakeTranscriber{f: func(string, []byte) (string, error) { return "x", nil }},
			in: voice("f3", 2*time.Minute), want: "2m0s long; I take notes of up to 1m0s"},
		{name: "download fails", tr: &fakeTranscriber{f: func(string, []byte) (string, error) { return "x", nil }},
			in: func() Incoming { in := voice("f4", time.Second); in.Attachment.Ref = "gone"; return in }(), want: "couldn't download", downloads: 1},
		{name: "nothing said", tr: &fakeTranscriber{f: func(string, []byte) (string, error) { return "  ", nil }},
			in: voice("f5", time.Second), want: "couldn't make out any words", downloads: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ag := &mockAgent{}
			h := newVoiceHarness(t, ag, tt.tr)
			h.handle(t, tt.in)
			h.idle(t)
			texts := h.plat.texts()
			if len(texts) != 1 || !strings.Contains(texts[0], tt.want) {
				t.Errorf("sent %q, want one message saying %q", texts, tt.want)
			}
			if n := len(ag.startedList()); n != 0 {
				t.Errorf("%d runs started", n)
			}
			if len(h.store.messages)+len(h.store.jobs)+len(h.store.runs) != 0 {
				t.Errorf("stored half-way: %d messages, %d jobs, %d runs", len(h.store.messages), len(h.store.jobs), len(h.store.runs))
			}
			if h.plat.downloads != tt.downloads {
				t.Errorf("%d downloads, want %d", h.plat.downloads, tt.downloads)
			}
		})
	}
}
