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
// edit, as appended notes. Every call goes through the platform's send
// queue, without the run waiting for the post: the chat's later calls
// (edits, the answer) queue behind it in the chat's lane and ask for the
// message's id when they are made.
type progress struct {
	q  *queuedPlatform
	ed *queuedEditor // nil when the platform cannot edit
	// line, when set, is the thread's own status line (ThreadStatus),
	// shown instead of a status message; set back to nil, under mu, if
	// the platform refuses it (startLine).
	line ThreadStatus
	r    *Run
	log  *slog.Logger

	// mu protects the fields below.
	mu      sync.Mutex
	lines   []string
	sent    int // lines already shown
	msgID   string
	posting bool // the status message is queued, its id not known yet
	header  string
	editing bool // an edit is queued and not begun: it shows the lines then
	started bool // start was called: the updater runs
	// quiet: the run's message was acknowledged at intake (see ack), so
	// the status message waits for the first note or quietStatus;
	// posted: the status message was queued.
	quiet, posted bool
	// sign, when set, closes once the status line the intake is setting
	// is set (see ack): the run's first line waits for it.
	sign <-chan struct{}

	kick chan struct{}
	quit chan struct{}
	done chan struct{}
}

func newProgress(q *queuedPlatform, r *Run, log *slog.Logger) *progress {
	pr := &progress{q: q, r: r, log: log, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	if ed, ok := q.p.(Editor); ok {
		pr.ed = &queuedEditor{q, ed}
	}
	pr.line = statusOf(q.p, r)
	pr.lines = append(pr.lines, r.Notes...)
	pr.sent = len(pr.lines)
	return pr
}

// quietStatus is how long the run of a message acknowledged at intake
// (ack) works without a note before its status message is posted.
var quietStatus = 2 * time.Second

// start queues the status message and starts the updater. A quiet
// progress (its message acknowledged at intake) queues the status
// message only with the first note, or showing first once the run has
// worked for quietStatus without one (loop).
func (pr *progress) start(_ context.Context, first string) {
	if pr.lineMode() {
		pr.startLine(first)
		return
	}
	pr.mu.Lock()
	pr.header, pr.started = first, true
	quiet := pr.quiet
	pr.mu.Unlock()
	if !quiet {
		pr.post(true)
	}
	go pr.loop()
}

// post queues the status message, once: the header alone, or, when
// header is false, the lines not shown yet.
func (pr *progress) post(header bool) {
	pr.mu.Lock()
	if pr.posted {
		pr.mu.Unlock()
		return
	}
	text := pr.header
	if !header {
		text = strings.Join(pr.lines[pr.sent:], "\n")
	}
	pr.posted, pr.posting, pr.sent = true, true, len(pr.lines)
	pr.mu.Unlock()
	pr.q.sendThen(pr.r.outgoing(text), func(id string, err error) {
		if err != nil {
			pr.log.Warn("post status message", slog.Any("err", err))
		}
		pr.mu.Lock()
		pr.msgID, pr.posting = id, false
		pr.mu.Unlock()
	})
}

// unposted reports whether a quiet progress has not queued its status
// message yet.
func (pr *progress) unposted() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.quiet && !pr.posted
}

// messageID is the status message's id, "" until it is posted.
func (pr *progress) messageID() string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.msgID
}

// editable reports whether the status message is posted or queued on a
// platform that edits: "" and not queued means its post failed.
func (pr *progress) editable() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.ed != nil && (pr.msgID != "" || pr.posting)
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

// loop shows new lines, at most once per interval; on a status line
// that lapses (Lapsing), it shows the line again when nothing new was
// shown for refreshEvery.
func (pr *progress) loop() {
	defer close(pr.done)
	var quiet <-chan time.Time
	if pr.unposted() {
		t := time.NewTimer(quietStatus)
		defer t.Stop()
		quiet = t.C
	}
	for {
		var refresh <-chan time.Time
		if d := pr.refreshEvery(); d > 0 {
			refresh = time.After(d)
		}
		select {
		case <-pr.quit:
			pr.flush()
			return
		case <-refresh:
			pr.showLine()
			continue
		case <-quiet:
			pr.post(true)
			continue
		case <-pr.kick:
		}
		pr.flush()
		t := time.NewTimer(pr.interval())
		select {
		case <-pr.quit:
			t.Stop()
			pr.flush()
			return
		case <-t.C:
		}
	}
}

// refreshEvery is refreshEvery of the run's status line, 0 without one.
func (pr *progress) refreshEvery() time.Duration {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return refreshEvery(pr.line) // 0 for nil: it is no Lapsing
}

// flush shows lines not yet shown.
func (pr *progress) flush() {
	pr.mu.Lock()
	if pr.sent == len(pr.lines) {
		pr.mu.Unlock()
		return
	}
	fresh := pr.lines[pr.sent:]
	pr.sent = len(pr.lines)
	pr.mu.Unlock()
	if pr.lineMode() {
		pr.showLine()
		return
	}
	if pr.unposted() {
		// The first note is the status message (its lines say what was
		// done: nothing to settle at the end).
		pr.mu.Lock()
		pr.sent -= len(fresh)
		pr.mu.Unlock()
		pr.post(false)
		return
	}
	m := pr.r.outgoing("")
	if pr.editable() {
		pr.edit(m)
		return
	}
	m.Text = strings.Join(fresh, "\n")
	pr.q.sendThen(m, func(_ string, err error) {
		if err != nil {
			pr.log.Warn("post progress note", slog.Any("err", err))
		}
	})
}

// edit queues an edit of the status message showing every line, without
// waiting for it, unless one is queued and not begun: that one shows the
// lines when it is made. Edits are droppable (see sendOp): one the
// platform's rate limit drops is followed by the next flush's.
func (pr *progress) edit(m Outgoing) {
	pr.mu.Lock()
	if pr.editing {
		pr.mu.Unlock()
		return
	}
	pr.editing = true
	pr.mu.Unlock()
	text := func() string {
		pr.mu.Lock()
		defer pr.mu.Unlock()
		pr.editing = false
		return strings.Join(pr.lines, "\n")
	}
	pr.ed.editLater(pr.messageID, m, text, false, func(error) {
		pr.mu.Lock()
		pr.editing = false // also when the edit was dropped before it began
		pr.mu.Unlock()
	})
}

// stop shows what is left and stops the updater (if start started it).
func (pr *progress) stop(context.Context) {
	close(pr.quit)
	pr.mu.Lock()
	started := pr.started
	pr.mu.Unlock()
	if started {
		<-pr.done
	}
}

// settle closes a status message that never got a progress line (a run
// that answered in one step), so it does not say "Working on it…" next
// to the answer: it is edited to say how the run ended. A message with
// lines already says what was done; a platform that cannot edit posted
// nothing more.
func (pr *progress) settle(st agent.Status) {
	if pr.lineMode() {
		pr.clearLine()
		return
	}
	pr.mu.Lock()
	empty := len(pr.lines) == 0
	pr.mu.Unlock()
	if !empty || !pr.editable() {
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
	// Queued behind the status message's other calls and before the
	// answer, which the worker does not wait for.
	pr.ed.editLater(pr.messageID, pr.r.outgoing(text), nil, true, nil)
}
