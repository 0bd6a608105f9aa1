package bot

import (
	"context"
	"log/slog"
	"strings"
	"time"
)

// ThreadStatus is a Platform whose threads can show a status line of
// their own beside the conversation (Slack's assistant pane:
// assistant.threads.setStatus). In such a thread a run's progress notes
// are that line, not a status message edited in place, and the line is
// cleared when the run ends; elsewhere nothing changes.
type ThreadStatus interface {
	// HasStatus reports whether thread threadID of chat chatID shows a
	// status line.
	HasStatus(chatID, threadID string) bool
	// SetStatus shows text as the thread's status line; "" clears it.
	// An error means the thread shows none after all: the bot posts a
	// status message as it does elsewhere.
	SetStatus(ctx context.Context, chatID, threadID, text string) error
}

// Lapsing is a platform's native status that the platform removes by
// itself when nothing changes it for Lapse: a ThreadStatus platform's
// line (Slack's assistant.threads.setStatus: "A two minute timeout
// applies"), a Stream's preview (a Telegram draft, a ~30-second
// preview). Every native status goes through refreshEvery: while the
// run works and nothing new was shown, the bot shows the same again
// before it lapses (progress.loop for the line, preview.loop for the
// preview).
type Lapsing interface {
	Lapse() time.Duration
}

// refreshEvery is how long a native status v may go unchanged before
// the bot shows it again: two thirds of its lapse (Slack's status line,
// every 80 s; a Telegram draft, every 20 s), 0 when v does not lapse.
func refreshEvery(v any) time.Duration {
	if l, ok := v.(Lapsing); ok && l.Lapse() > 0 {
		return l.Lapse() * 2 / 3
	}
	return 0
}

// Status lines, as the platform shows them after the app's name
// ("tidybot is working on it…").
const (
	statusReading = "is reading your message…"
	statusWorking = "is working on it…"
)

// statusOf is the thread status line of r's thread, nil when its
// platform or thread shows none.
func statusOf(p Platform, r *Run) ThreadStatus {
	ts, ok := p.(ThreadStatus)
	if !ok || !ts.HasStatus(r.ChatID, r.ThreadID) {
		return nil
	}
	return ts
}

// statusNote is a progress note as a status line: "is working… moved
// 3 tasks to Birthday", clipped to one short line.
func statusNote(note string) string {
	note = strings.Join(strings.Fields(note), " ")
	if r := []rune(note); len(r) > 0 {
		note = strings.ToLower(string(r[:1])) + string(r[1:])
	}
	return cut("is working… "+note, 150)
}

// startLine begins a run's progress on its thread's status line. Should
// the platform refuse the line, the status message is posted instead,
// in the same call, so the chat's later calls find it.
func (pr *progress) startLine(first string) {
	pr.mu.Lock()
	pr.header, pr.posting, pr.sent, pr.started = first, true, len(pr.lines), true
	pr.posted = true // the line, or the status message in its place
	pr.mu.Unlock()
	m := pr.r.outgoing("")
	pr.q.s.PostThen(m.ChatID, "status", func(ctx context.Context) error {
		if pr.sign != nil {
			// The intake's "reading" line first (ack).
			select {
			case <-pr.sign:
			case <-ctx.Done():
			}
		}
		err := pr.line.SetStatus(ctx, m.ChatID, m.ThreadID, statusWorking)
		if err == nil {
			return nil
		}
		pr.log.Info("thread status line refused; posting a status message", slog.Any("err", err))
		pr.mu.Lock()
		pr.line = nil
		m.Text = strings.Join(append([]string{first}, pr.lines...), "\n")
		pr.mu.Unlock()
		id, err := pr.q.p.Send(ctx, redacted(pr.q.redact, m))
		pr.mu.Lock()
		pr.msgID = id
		pr.mu.Unlock()
		return err
	}, func(err error) {
		if err != nil {
			pr.log.Warn("post status message", slog.Any("err", err))
		}
		pr.mu.Lock()
		pr.posting = false
		pr.mu.Unlock()
	})
	go pr.loop()
}

// lineMode reports whether the run's progress is its thread's status
// line.
func (pr *progress) lineMode() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.line != nil
}

// showLine queues the newest note as the status line, or the working
// line when no note came yet (as a refresh does: see Lapsing); it is
// droppable, as an edit is: a later note shows anyway.
func (pr *progress) showLine() {
	m := pr.r.outgoing("")
	pr.q.s.PostDroppable(m.ChatID, "status", func(ctx context.Context) error {
		pr.mu.Lock()
		line := pr.line
		text := statusWorking
		if n := len(pr.lines); n > 0 {
			text = statusNote(pr.q.redact.String(pr.lines[n-1]))
		}
		pr.mu.Unlock()
		if line == nil {
			return nil
		}
		return line.SetStatus(ctx, m.ChatID, m.ThreadID, text)
	}, func(err error) {
		if err != nil {
			pr.log.Debug("thread status line", slog.Any("err", err))
		}
	})
}

// clearLine queues the clearing of the status line as the run ends,
// before its answer (which the worker queues after it).
func (pr *progress) clearLine() {
	m := pr.r.outgoing("")
	pr.q.s.PostThen(m.ChatID, "status", func(ctx context.Context) error {
		pr.mu.Lock()
		line := pr.line
		pr.mu.Unlock()
		if line == nil {
			return nil
		}
		return line.SetStatus(ctx, m.ChatID, m.ThreadID, "")
	}, func(err error) {
		if err != nil {
			pr.log.Debug("clear thread status line", slog.Any("err", err))
		}
	})
}
