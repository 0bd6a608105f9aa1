// Package console is a terminal chat with the bot: the same pipeline as
// Slack and Telegram, no platform account needed. It is also the harness
// of the end-to-end tests.
package console

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tidybot/tidybot/bot"
)

// Platform, chat and user names of the console.
const (
	Platform = "console"
	ChatID   = "local"
	UserID   = "owner"
)

// Bot is what the console needs from the bot.
type Bot interface {
	bot.Handler
	// WaitIdle returns once no run is working or queued.
	WaitIdle(ctx context.Context) error
}

// Adapter prints the bot's messages and reads the user's lines.
type Adapter struct {
	out io.Writer

	// mu protects the fields below.
	mu      sync.Mutex
	buttons []bot.Button // of the last question, answered by number
	seq     int
}

var _ bot.Platform = (*Adapter)(nil)

// Greeting is the line a conversation in a terminal starts with: who
// you are talking to, and how to get help and leave.
func Greeting(model string) string {
	return "tidybot, on your Todoist with the model " + model + ". Type a message or /tidy-inbox; /help lists the commands, Ctrl-D leaves."
}

// New returns a console writing to out.
func New(out io.Writer) *Adapter { return &Adapter{out: out} }

// Name implements bot.Platform.
func (a *Adapter) Name() string { return Platform }

// Send implements bot.Platform: it prints the text verbatim, then the
// buttons that answer a question as numbered options. A button that
// stands for a command (the Undo button) is left out: the command is
// typed here ("/undo", or "undo").
func (a *Adapter) Send(_ context.Context, m bot.Outgoing) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	m.Buttons = slices.DeleteFunc(slices.Clone(m.Buttons), func(b bot.Button) bool { return b.Command != "" || b.Feedback != "" })
	var b strings.Builder
	b.WriteString(m.Text)
	b.WriteString("\n")
	if len(m.Buttons) > 0 {
		a.buttons = m.Buttons
		if isConfirm(m.Buttons) {
			b.WriteString("  (yes/no)\n")
		}
		for i, btn := range m.Buttons {
			fmt.Fprintf(&b, "  %d) %s\n", i+1, btn.Label)
		}
	}
	if _, err := io.WriteString(a.out, b.String()); err != nil {
		return "", fmt.Errorf("console: write: %w", err)
	}
	return "c" + strconv.Itoa(a.seq), nil
}

var _ bot.Sequencer = (*Adapter)(nil)

// After implements bot.Sequencer: the terminal's lines, typed and
// printed, are numbered in one sequence ("c1", "c2", …), so a line typed
// before a question was printed is never its answer.
func (a *Adapter) After(x, y string) (after, ok bool) {
	m, okX := lineNumber(x)
	n, okY := lineNumber(y)
	if !okX || !okY {
		return false, false
	}
	return m > n, true
}

func lineNumber(id string) (int, bool) {
	rest, ok := strings.CutPrefix(id, "c")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n > 0
}

// MaxText implements bot.TextLimiter: a terminal shows a long answer
// whole, up to a generous cap against a runaway one.
func (a *Adapter) MaxText() int { return 100_000 }

var _ bot.TextLimiter = (*Adapter)(nil)

func isConfirm(bs []bot.Button) bool {
	return len(bs) == 2 && strings.HasSuffix(bs[0].Data, ":y") && strings.HasSuffix(bs[1].Data, ":n")
}

// Run reads one message per line from in. When interactive is false (a
// pipe or a file), it reads the next line only once the bot is idle or
// waiting for the user, and returns at end of input once the last run has
// ended. Interactive input is read at once, so /cancel reaches a running
// run.
func (a *Adapter) Run(ctx context.Context, in io.Reader, b Bot, interactive bool) error {
	// Lines come from a goroutine so that ctx (Ctrl-C) ends Run even while
	// a terminal read blocks.
	lines := make(chan line)
	readErr := make(chan error, 1)
	go func() {
		defer close(lines)
		readErr <- readLines(in, maxLine, func(l line) bool {
			select {
			case lines <- l:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	for {
		if !interactive {
			if err := b.WaitIdle(ctx); err != nil {
				return err
			}
		}
		var l line
		select {
		case <-ctx.Done():
			return ctx.Err()
		case next, ok := <-lines:
			if !ok {
				select {
				case err := <-readErr:
					if err != nil {
						return fmt.Errorf("console: read input: %w", err)
					}
				default:
				}
				return b.WaitIdle(ctx)
			}
			l = next
		}
		text := strings.TrimSpace(l.text)
		if text == "" {
			continue
		}
		in := a.incoming(text)
		if l.runes > utf8.RuneCountInString(l.text) {
			in.Clipped = l.runes // the bot says how long it was
		}
		if err := b.Handle(ctx, in); err != nil {
			return fmt.Errorf("console: %w", err)
		}
	}
}

// maxLine is the most bytes of one input line kept: far more than the
// bot reads of a message (bot.MaxMessage characters), which it cuts and
// says so. The rest of a longer line is read and dropped, so the next
// line is still the next message.
const maxLine = 64 << 10

// line is one line of input: its first maxLine bytes and its length in
// characters.
type line struct {
	text  string
	runes int
}

// readLines reads r line by line and hands each to emit until emit
// returns false or the input ends (nil) or fails. A line longer than
// keep bytes is cut to keep bytes at a character boundary.
func readLines(r io.Reader, keep int, emit func(line) bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	runes := 0
	for {
		chunk, err := br.ReadSlice('\n')
		more := errors.Is(err, bufio.ErrBufferFull) // the line goes on
		switch {
		case more:
			err = nil
		case err != nil && !errors.Is(err, io.EOF):
			return fmt.Errorf("read line: %w", err)
		default:
			chunk = bytes.TrimSuffix(bytes.TrimSuffix(chunk, []byte("\n")), []byte("\r"))
		}
		for _, c := range chunk {
			if utf8.RuneStart(c) { // a character split between chunks counts once
				runes++
			}
		}
		if room := keep - len(buf); room > 0 {
			buf = append(buf, chunk[:min(room, len(chunk))]...)
		}
		if more {
			continue
		}
		if (err == nil || runes > 0) && !emit(line{text: string(trimPartialRune(buf)), runes: runes}) {
			return nil
		}
		if err != nil {
			return nil // io.EOF
		}
		buf, runes = buf[:0], 0
	}
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b
// (where a cut line ended).
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// incoming turns a line into an event: a command, the number (or yes/no)
// of a shown option, or text.
func (a *Adapter) incoming(line string) bot.Incoming {
	in := bot.Incoming{Platform: Platform, ChatID: ChatID, UserID: UserID, DM: true}
	a.mu.Lock()
	a.seq++
	in.MessageID = "c" + strconv.Itoa(a.seq) // in the order of what is printed (see After)
	a.mu.Unlock()
	if strings.HasPrefix(line, "/") {
		cmd, rest, _ := strings.Cut(line[1:], " ")
		in.Command = strings.ToLower(cmd)
		in.Text = strings.TrimSpace(rest)
		return in
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.buttons) > 0 {
		choice := -1
		if n, err := strconv.Atoi(line); err == nil && n >= 1 && n <= len(a.buttons) {
			choice = n - 1
		} else if isConfirm(a.buttons) {
			switch strings.ToLower(line) {
			case "yes", "y":
				choice = 0
			case "no", "n":
				choice = 1
			}
		}
		if choice >= 0 {
			in.Button = a.buttons[choice].Data
			a.buttons = nil
			return in
		}
	}
	a.buttons = nil
	in.Text = line
	return in
}
