package bot

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// progress keeps one status message per run up to date: edited in place,
// no more often than the platform allows, or, where the platform cannot
// edit, as appended notes.
type progress struct {
	p   Platform
	ed  Editor // nil when the platform cannot edit
	r   *Run
	log *slog.Logger

	// mu protects the fields below.
	mu      sync.Mutex
	lines   []string
	sent    int // lines already shown
	msgID   string
	posting bool // the status message is queued, its id not known yet
	header  string

	kick chan struct{}
	quit chan struct{}
	done chan struct{}
}

func newProgress(p Platform, r *Run, log *slog.Logger) *progress {
	pr := &progress{p: p, r: r, log: log, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	pr.ed, _ = p.(Editor)
	pr.lines = append(pr.lines, r.Notes...)
	pr.sent = len(pr.lines)
	return pr
}

// start posts the status message and starts the updater. On a queued
// platform (every platform the bot posts to) the post is queued and the
// run goes on at once: the chat's later calls (edits, the answer) queue
// behind it and ask for its id when they are made.
func (pr *progress) start(ctx context.Context, first string) {
	pr.header = first
	m := Outgoing{ChatID: pr.r.ChatID, ThreadID: pr.r.ThreadID, Text: first}
	if q, ok := pr.p.(interface {
		sendThen(Outgoing, func(string, error))
	}); ok {
		pr.mu.Lock()
		pr.posting = true
		pr.mu.Unlock()
		q.sendThen(m, func(id string, err error) {
			if err != nil {
				pr.log.Warn("post status message", slog.Any("err", err))
			}
			pr.mu.Lock()
			pr.msgID, pr.posting = id, false
			pr.mu.Unlock()
		})
	} else {
		id, err := pr.p.Send(ctx, m)
		if err != nil {
			pr.log.Warn("post status message", slog.Any("err", err))
		}
		pr.mu.Lock()
		pr.msgID = id
		pr.mu.Unlock()
	}
	pr.mu.Lock()
	pr.sent = len(pr.lines)
	pr.mu.Unlock()
	go pr.loop(context.WithoutCancel(ctx))
}

// messageID is the status message's id, "" until it is posted.
func (pr *progress) messageID() string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.msgID
}

// queuedEdits are a queued platform's edits that ask for the message id
// only when they are made (see queuedEditor.editLater).
type queuedEdits interface {
	editLater(id func() string, m Outgoing)
	editQueued(ctx context.Context, id func() string, m Outgoing) error
}

// add records an agent event; it never blocks.
func (pr *progress) add(ev agent.Event) {
	if ev.Kind == agent.EventThinking || ev.Summary == "" {
		return
	}
	pr.mu.Lock()
	pr.lines = append(pr.lines, ev.Summary)
	pr.mu.Unlock()
	select {
	case pr.kick <- struct{}{}:
	default:
	}
}

func (pr *progress) notes() []string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return append([]string(nil), pr.lines...)
}

func (pr *progress) interval() time.Duration {
	if pr.ed != nil {
		return pr.ed.EditInterval()
	}
	return time.Second
}

// loop shows new lines, at most once per interval.
func (pr *progress) loop(ctx context.Context) {
	defer close(pr.done)
	for {
		select {
		case <-pr.quit:
			pr.flush(ctx)
			return
		case <-pr.kick:
		}
		pr.flush(ctx)
		t := time.NewTimer(pr.interval())
		select {
		case <-pr.quit:
			t.Stop()
			pr.flush(ctx)
			return
		case <-t.C:
		}
	}
}

// flush shows lines not yet shown.
func (pr *progress) flush(ctx context.Context) {
	pr.mu.Lock()
	if pr.sent == len(pr.lines) {
		pr.mu.Unlock()
		return
	}
	fresh := pr.lines[pr.sent:]
	all := append([]string(nil), pr.lines...)
	pr.sent = len(pr.lines)
	id, posting := pr.msgID, pr.posting
	pr.mu.Unlock()
	m := Outgoing{ChatID: pr.r.ChatID, ThreadID: pr.r.ThreadID}
	if qe, ok := pr.ed.(queuedEdits); ok && (id != "" || posting) {
		m.Text = strings.Join(all, "\n")
		if err := qe.editQueued(ctx, pr.messageID, m); err != nil {
			pr.log.Warn("edit status message", slog.Any("err", err))
		}
		return
	}
	if pr.ed != nil && id != "" {
		m.Text = strings.Join(all, "\n")
		if err := pr.ed.Edit(ctx, id, m); err != nil {
			pr.log.Warn("edit status message", slog.Any("err", err))
		}
		return
	}
	m.Text = strings.Join(fresh, "\n")
	if _, err := pr.p.Send(ctx, m); err != nil {
		pr.log.Warn("post progress note", slog.Any("err", err))
	}
}

// stop shows what is left and stops the updater.
func (pr *progress) stop(context.Context) {
	close(pr.quit)
	<-pr.done
}

// settle closes a status message that never got a progress line (a run
// that answered in one step), so it does not say "Working on it…" next
// to the answer: it is edited to say how the run ended. A message with
// lines already says what was done; a platform that cannot edit posted
// nothing more.
func (pr *progress) settle(ctx context.Context, st agent.Status) {
	pr.mu.Lock()
	id, posting, empty := pr.msgID, pr.posting, len(pr.lines) == 0
	pr.mu.Unlock()
	if pr.ed == nil || (id == "" && !posting) || !empty {
		return
	}
	var text string
	switch st {
	case agent.StatusDone:
		text = "✅ Done"
	case agent.StatusAsking, agent.StatusConfirming:
		text = "❓ Waiting for your answer"
	case agent.StatusFailed, agent.StatusStopped:
		text = "⚠️ Stopped"
	default:
		return // interrupted: it goes on
	}
	m := Outgoing{ChatID: pr.r.ChatID, ThreadID: pr.r.ThreadID, Text: text}
	if qe, ok := pr.ed.(queuedEdits); ok {
		// Queued behind the status message's other calls and before the
		// answer, which the worker need not wait for.
		qe.editLater(pr.messageID, m)
		return
	}
	if id == "" {
		return
	}
	if err := pr.ed.Edit(ctx, id, m); err != nil {
		pr.log.Warn("settle status message", slog.Any("err", err))
	}
}
