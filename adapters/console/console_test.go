package console

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

func TestIncoming(t *testing.T) {
	a := New(&bytes.Buffer{})
	_, _ = a.Send(t.Context(), bot.Outgoing{Text: "Which one?", Buttons: []bot.Button{{Label: "Work", Data: "w:k:0"}, {Label: "Home", Data: "w:k:1"}}})
	for _, tt := range []struct {
		line string
		want bot.Incoming
	}{
		{"/tidy-inbox", bot.Incoming{Command: "tidy-inbox"}},
		{"/Help me", bot.Incoming{Command: "help", Text: "me"}},
		{"2", bot.Incoming{Button: "w:k:1"}},
		{"2", bot.Incoming{Text: "2"}}, // the options are gone once answered
	} {
		got := a.incoming(tt.line)
		if got.Command != tt.want.Command || got.Text != tt.want.Text || got.Button != tt.want.Button || got.Platform != Platform || got.UserID != UserID {
			t.Errorf("incoming(%q) = %+v, want %+v", tt.line, got, tt.want)
		}
	}
	_, _ = a.Send(t.Context(), bot.Outgoing{Text: "Delete it?", Buttons: []bot.Button{{Label: "Delete 1 task", Data: "w:c:y"}, {Label: "Cancel", Data: "w:c:n"}}})
	if got := a.incoming("no"); got.Button != "w:c:n" {
		t.Errorf("no → %+v", got)
	}
}

func TestSendPrintsVerbatimWithOptions(t *testing.T) {
	var out bytes.Buffer
	a := New(&out)
	_, _ = a.Send(t.Context(), bot.Outgoing{Text: "Delete \"x\"? *really*", Buttons: []bot.Button{{Label: "Delete 1 task", Data: "w:c:y"}, {Label: "Cancel", Data: "w:c:n"}}})
	want := "Delete \"x\"? *really*\n  (yes/no)\n  1) Delete 1 task\n  2) Cancel\n"
	if out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
}

// fakeBot records lines and says whether it was idle when each arrived.
type fakeBot struct {
	mu    sync.Mutex
	busy  bool
	lines []string
	waits int
}

func (b *fakeBot) Handle(_ context.Context, in bot.Incoming) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.busy {
		b.lines = append(b.lines, "BUSY:"+in.Text)
	} else {
		b.lines = append(b.lines, in.Text+in.Command)
	}
	b.busy = true
	return nil
}

func (b *fakeBot) WaitIdle(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.busy = false
	b.waits++
	return nil
}

func TestRunWaitsForIdleBeforeEachLine(t *testing.T) {
	b := &fakeBot{}
	if err := New(&bytes.Buffer{}).Run(t.Context(), strings.NewReader("one\n\ntwo\n/usage\n"), b, false); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(b.lines, ","); got != "one,two,usage" {
		t.Errorf("lines = %s", got)
	}
	if b.waits < 4 {
		t.Errorf("waited for idle %d times, want before every line and at the end", b.waits)
	}
}

func TestRunEndsOnCancelWhileReadBlocks(t *testing.T) {
	r, w := io.Pipe() // never written: a terminal nobody types into
	defer w.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- New(&bytes.Buffer{}).Run(ctx, r, &fakeBot{}, true) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestSendLeavesOutCommandButtons(t *testing.T) {
	var out bytes.Buffer
	a := New(&out)
	_, _ = a.Send(t.Context(), bot.Outgoing{Text: "Moved 2 tasks.", Buttons: []bot.Button{{Label: "↩️ Undo", Data: "u:r1", Command: "undo"}}})
	if out.String() != "Moved 2 tasks.\n" {
		t.Errorf("printed %q, want the answer alone (undo is typed here)", out.String())
	}
	if got := a.incoming("1"); got.Button != "" || got.Text != "1" {
		t.Errorf("1 after an answer → %+v, want plain text", got)
	}
}

// TestLinesAndPostsAreOrdered: a line typed before a question is printed
// comes before it; one typed after, after it.
func TestLinesAndPostsAreOrdered(t *testing.T) {
	a := New(&bytes.Buffer{})
	early := a.incoming("ok thanks")
	q, _ := a.Send(t.Context(), bot.Outgoing{Text: "Delete it?", Buttons: []bot.Button{{Label: "Delete 1 task", Data: "w:c:y"}, {Label: "Cancel", Data: "w:c:n"}}})
	late := a.incoming("yes")
	if after, ok := a.After(early.MessageID, q); after || !ok {
		t.Errorf("After(early %q, question %q) = %v, %v; want false, true", early.MessageID, q, after, ok)
	}
	if after, ok := a.After(late.MessageID, q); !after || !ok {
		t.Errorf("After(late %q, question %q) = %v, %v; want true, true", late.MessageID, q, after, ok)
	}
	if _, ok := a.After("", q); ok {
		t.Error("an empty id was placed")
	}
}

func TestReadLinesCutsAnOverlongLineAndGoesOn(t *testing.T) {
	long := strings.Repeat("ab€", 50_000) // 250 KB, 150,000 characters
	input := "first\r\n" + long + "\n\nlast without newline"
	var got []line
	if err := readLines(strings.NewReader(input), 999, func(l line) bool { got = append(got, l); return true }); err != nil {
		t.Fatal(err)
	}
	want := []line{{"first", 5}, {long[:997], 150_000}, {"", 0}, {"last without newline", 20}}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %.30q (%d chars), want %.30q (%d chars)", i, got[i].text, got[i].runes, want[i].text, want[i].runes)
		}
	}
}
