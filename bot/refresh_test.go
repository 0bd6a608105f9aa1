package bot

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// testLapse is the lapse of the fakes below: a status shown less often
// than this while the run works has lapsed (see Lapsing).
const testLapse = 300 * time.Millisecond

// lapsingLine is a linePlatform whose status line lapses, as Slack's
// assistant.threads.setStatus does after two minutes; it records when
// each line was set.
type lapsingLine struct {
	*linePlatform
	mu sync.Mutex
	at []time.Time
}

func (p *lapsingLine) Lapse() time.Duration { return testLapse }

func (p *lapsingLine) SetStatus(ctx context.Context, chatID, threadID, text string) error {
	p.mu.Lock()
	p.at = append(p.at, time.Now())
	p.mu.Unlock()
	return p.linePlatform.SetStatus(ctx, chatID, threadID, text)
}

// longestGap is the longest time between two consecutive times of at.
func longestGap(at []time.Time) time.Duration {
	var most time.Duration
	for i := 1; i < len(at); i++ {
		most = max(most, at[i].Sub(at[i-1]))
	}
	return most
}

// slowStep is a StartFn whose one step outlasts the lapse several times.
var slowStep = scripted(func(_ context.Context, h agent.Hooks) {
	h.Observe(agent.Event{Kind: agent.EventNote, Summary: "Moved 3 tasks to Birthday"})
	time.Sleep(4 * testLapse)
})

// TestStatusLineRefreshedBeforeItLapses: while a step runs long, a
// status line that lapses is set again before it does, showing the
// latest note, until it is cleared.
func TestStatusLineRefreshedBeforeItLapses(t *testing.T) {
	plat := &fakePlatform{name: "slack"}
	lp := &lapsingLine{linePlatform: &linePlatform{fakePlatform: plat}}
	ag := &mockAgent{StartFn: slowStep}
	h := &harness{store: newMemStore(), agent: ag, plat: plat}
	h.bot = New(h.store, ag, Config{Workers: 2, AllowedUsers: []string{"slack:U1"}})
	h.bot.AddPlatform(lp)
	ctx, cancel := context.WithCancel(t.Context())
	if err := h.bot.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.bot.Stop(); cancel() })
	h.handle(t, paneMsg("t1"))
	h.idle(t)

	got := lp.got()
	lp.mu.Lock()
	at := slices.Clone(lp.at[1:]) // from "is working on it…" to the clearing
	lp.mu.Unlock()
	if gap := longestGap(at); gap >= testLapse {
		t.Errorf("the status line went %v unchanged (it lapses after %v): %q", gap, testLapse, got)
	}
	note := "is working… moved 3 tasks to Birthday"
	if n := len(slices.DeleteFunc(slices.Clone(got), func(s string) bool { return s != note })); n < 2 {
		t.Errorf("status lines %q: want the note shown again while the step runs", got)
	}
	if got[len(got)-1] != "" {
		t.Errorf("status lines %q: want the line cleared at the end", got)
	}
}

// lapsingStream is a fakeStream that lapses, as a Telegram draft does
// after about 30 seconds; it records when each text was shown.
type lapsingStream struct {
	*fakeStream
	mu sync.Mutex
	at []time.Time
}

func (s *lapsingStream) Lapse() time.Duration { return testLapse }

func (s *lapsingStream) Update(ctx context.Context, text string) error {
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	s.mu.Unlock()
	return s.fakeStream.Update(ctx, text)
}

type lapsingStreamer struct {
	*streamingPlatform
	mu   sync.Mutex
	st   *lapsingStream
	team string // the last StartStream's m.TeamID
}

func (p *lapsingStreamer) StartStream(ctx context.Context, m Outgoing, user string) (Stream, error) {
	st, err := p.streamingPlatform.StartStream(ctx, m, user)
	if err != nil {
		return nil, err
	}
	ls := &lapsingStream{fakeStream: st.(*fakeStream), at: []time.Time{time.Now()}}
	p.mu.Lock()
	p.st, p.team = ls, m.TeamID
	p.mu.Unlock()
	return ls, nil
}

// TestPreviewRefreshedBeforeItLapses: while the answer pauses longer
// than the preview lasts, a preview that lapses is shown again (the
// same text) before it does.
func TestPreviewRefreshedBeforeItLapses(t *testing.T) {
	sp := &streamingPlatform{fakePlatform: &fakePlatform{name: "telegram"}}
	p := &lapsingStreamer{streamingPlatform: sp}
	ag := &mockAgent{StartFn: func(ctx context.Context, in agent.Input, h agent.Hooks) agent.Outcome {
		out := speaking(sp, []string{"Moved "}, "", false)(ctx, in, h)
		time.Sleep(4 * testLapse)
		h.Answer("Moved three tasks.")
		return done(out.Transcript, "Moved three tasks.")
	}}
	h := startStreaming(t, p, sp, ag)
	h.handle(t, Incoming{Platform: "telegram", ChatID: "42", UserID: "42", MessageID: "m1", Text: "tidy", EventID: "e1", DM: true, TeamID: "T9"})
	h.idle(t)

	p.mu.Lock()
	st, team := p.st, p.team
	p.mu.Unlock()
	if st == nil {
		t.Fatal("no preview opened")
	}
	st.mu.Lock()
	at := slices.Clone(st.at)
	st.mu.Unlock()
	if gap := longestGap(at); gap >= testLapse || len(at) < 4 {
		t.Errorf("the preview went %v unchanged (it lapses after %v); shown %d times", gap, testLapse, len(at))
	}
	if team != "T9" {
		t.Errorf("the preview opened for team %q, want the sender's T9 (Slack's recipient_team_id)", team)
	}
	if sentText(sp.fakePlatform, "Moved three tasks.") != 1 {
		t.Errorf("the answer was not sent once: %q", sp.texts())
	}
}
