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

// streamingPlatform is a fakePlatform that previews answers: each
// preview records what it showed and how it ended.
type streamingPlatform struct {
	*fakePlatform
	mu       sync.Mutex // protects the fields below
	startErr error
	finalize bool  // Finish makes the preview the answer's post
	finErr   error // Finish fails
	streams  []*fakeStream
}

type fakeStream struct {
	p      *streamingPlatform
	shown  []string
	ended  bool
	endedM Outgoing
}

func (p *streamingPlatform) StartStream(_ context.Context, m Outgoing, _ string) (Stream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.startErr != nil {
		return nil, p.startErr
	}
	s := &fakeStream{p: p, shown: []string{m.Text}}
	p.streams = append(p.streams, s)
	return s, nil
}

func (s *fakeStream) Update(_ context.Context, text string) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if !strings.HasPrefix(text, s.shown[len(s.shown)-1]) {
		return errors.New("fake: an update that does not extend the preview")
	}
	s.shown = append(s.shown, text)
	return nil
}

func (s *fakeStream) Interval() time.Duration { return 10 * time.Millisecond }

func (s *fakeStream) Finish(_ context.Context, m Outgoing) (string, bool, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.ended, s.endedM = true, m
	if s.p.finErr != nil {
		return "", false, s.p.finErr
	}
	return "stream-1", s.p.finalize && m.Text != "", nil
}

func (p *streamingPlatform) snapshot() []fakeStream {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []fakeStream
	for _, s := range p.streams {
		c := *s
		c.shown = append([]string(nil), s.shown...)
		out = append(out, c)
	}
	return out
}

// speaking is a StartFn that tells h.Answer each text of words, waiting
// for the preview to show each, then ends with answer (a question when
// ask is set).
func speaking(p *streamingPlatform, words []string, answer string, ask bool) func(context.Context, agent.Input, agent.Hooks) agent.Outcome {
	return func(_ context.Context, in agent.Input, h agent.Hooks) agent.Outcome {
		for _, w := range words {
			h.Answer(w)
			deadline := time.Now().Add(2 * time.Second)
			for time.Now().Before(deadline) {
				ss := p.snapshot()
				if len(ss) > 0 && ss[0].shown[len(ss[0].shown)-1] == wholeWords(w) {
					break
				}
				p.mu.Lock()
				refused := p.startErr != nil
				p.mu.Unlock()
				if refused {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		tr := newTranscript(in)
		if ask {
			tr.Status = agent.StatusAsking
			return agent.Outcome{Status: agent.StatusAsking, Question: answer, Transcript: tr}
		}
		return done(tr, answer)
	}
}

// startStreaming starts a bot on p, a streamingPlatform or one that
// wraps sp.
func startStreaming(t *testing.T, p Platform, sp *streamingPlatform, ag *mockAgent) *harness {
	t.Helper()
	h := &harness{store: newMemStore(), agent: ag, plat: sp.fakePlatform}
	h.bot = New(h.store, ag, Config{Workers: 1, AllowedUsers: []string{"telegram:42"}})
	h.bot.AddPlatform(p)
	ctx, cancel := context.WithCancel(t.Context())
	if err := h.bot.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.bot.Stop(); cancel() })
	return h
}

// sentText reports how often text was sent as a message.
func sentText(p *fakePlatform, text string) int {
	n := 0
	for _, s := range p.texts() {
		if s == text {
			n++
		}
	}
	return n
}

func TestPreview(t *testing.T) {
	const answer = "Moved three tasks to Family."
	grow := []string{"Moved ", "Moved three ", "Moved three tasks to"}
	tests := []struct {
		name  string
		setup func(*streamingPlatform)
		words []string
		ask   bool
		// want: the previews shown, whether the answer was posted as
		// a message, and how the preview ended.
		shown    []string
		posted   int
		finished string
	}{
		{name: "becomes the answer", setup: func(p *streamingPlatform) { p.finalize = true }, words: grow,
			shown: []string{"Moved", "Moved three", "Moved three tasks"}, posted: 0, finished: answer},
		{name: "gives way to the message", words: grow,
			shown: []string{"Moved", "Moved three", "Moved three tasks"}, posted: 1, finished: answer},
		// What the model withdrew does not stay: the preview is
		// removed at once, and the answer posted.
		{name: "starts over", setup: func(p *streamingPlatform) { p.finalize = true }, words: []string{"Moved three ", "Sorry, I could not "},
			shown: []string{"Moved three"}, posted: 1, finished: ""},
		{name: "finish fails", setup: func(p *streamingPlatform) { p.finalize, p.finErr = true, errors.New("fake: stop refused") }, words: grow,
			shown: []string{"Moved", "Moved three", "Moved three tasks"}, posted: 1, finished: answer},
		{name: "refused", setup: func(p *streamingPlatform) { p.startErr = errors.New("fake: no streams here") }, words: grow,
			posted: 1},
		{name: "a question ends it", setup: func(p *streamingPlatform) { p.finalize = true }, words: grow[:2], ask: true,
			shown: []string{"Moved", "Moved three"}, finished: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &streamingPlatform{fakePlatform: newTelegram()}
			if tt.setup != nil {
				tt.setup(p)
			}
			ag := &mockAgent{StartFn: speaking(p, tt.words, answer, tt.ask)}
			h := startStreaming(t, p, p, ag)
			h.handle(t, msg("file it", "e1"))
			h.idle(t)
			ss := p.snapshot()
			if tt.shown == nil {
				if len(ss) != 0 {
					t.Fatalf("previews %+v, want none", ss)
				}
			} else {
				if len(ss) != 1 || strings.Join(ss[0].shown, "|") != strings.Join(tt.shown, "|") {
					t.Fatalf("previews %+v, want one showing %q", ss, tt.shown)
				}
				if !ss[0].ended || ss[0].endedM.Text != tt.finished {
					t.Errorf("the preview ended %v with %q, want %q", ss[0].ended, ss[0].endedM.Text, tt.finished)
				}
				if tt.finished != "" && ss[0].endedM.Ref == "" {
					t.Error("the preview ended without the outbox entry's ref")
				}
			}
			if !tt.ask {
				if n := sentText(p.fakePlatform, answer); n != tt.posted {
					t.Errorf("the answer was posted %d times as a message, want %d", n, tt.posted)
				}
			} else if sentText(p.fakePlatform, answer) != 1 {
				t.Errorf("the question was not posted: %q", p.texts())
			}
			if ob, _ := h.store.Outbox(t.Context()); len(ob) != 0 {
				t.Errorf("left in the outbox: %+v", ob)
			}
		})
	}
}
