package bot

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// RateLimited is implemented by a Platform's error that asks for a pause
// before the next call (an HTTP 429 with Retry-After, Telegram's
// retry_after): the platform's send queue waits that long, then retries.
type RateLimited interface {
	error
	RetryAfter() time.Duration
}

// RetryLater wraps err, a platform's rate-limit answer, as RateLimited:
// the send queue waits after before retrying the call.
func RetryLater(err error, after time.Duration) error {
	return &rateLimitedError{err: err, after: after}
}

type rateLimitedError struct {
	err   error
	after time.Duration
}

func (e *rateLimitedError) Error() string             { return e.err.Error() }
func (e *rateLimitedError) Unwrap() error             { return e.err }
func (e *rateLimitedError) RetryAfter() time.Duration { return e.after }

// sendQueueSize bounds the calls waiting for one platform; a reply that
// finds the queue full is dropped (logged), so a flood of events cannot
// pile up calls.
const sendQueueSize = 256

// maxRateLimitRetries is how often one call is retried after a 429.
const maxRateLimitRetries = 5

// sendOp is one platform call.
type sendOp struct {
	what string
	call func(ctx context.Context) error
	done chan error // nil: nobody waits
}

// sender makes every call to one platform, one at a time from a bounded
// queue, and pauses the queue when the platform asks (RateLimited). One
// goroutine per platform, never one per send.
type sender struct {
	name string
	log  *slog.Logger
	q    chan sendOp
	quit <-chan struct{}
	// mu protects pending (ops queued or in progress) and idle (closed
	// and replaced when pending drops to zero).
	mu      sync.Mutex
	pending int
	idle    chan struct{}
}

func newSender(name string, log *slog.Logger, quit <-chan struct{}) *sender {
	return &sender{name: name, log: log, q: make(chan sendOp, sendQueueSize), quit: quit, idle: make(chan struct{})}
}

func (s *sender) begin() {
	s.mu.Lock()
	s.pending++
	s.mu.Unlock()
}

func (s *sender) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending--
	if s.pending == 0 {
		close(s.idle)
		s.idle = make(chan struct{})
	}
}

// waitIdle blocks until no op is queued or in progress, or ctx ends.
func (s *sender) waitIdle(ctx context.Context) error {
	for {
		s.mu.Lock()
		n, idle := s.pending, s.idle
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-idle:
		}
	}
}

func (s *sender) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending
}

// post queues a call nobody waits for; it is dropped when the queue is
// full or the bot stops.
func (s *sender) post(what string, call func(ctx context.Context) error) {
	select {
	case <-s.quit:
		s.log.Warn("stopping; reply dropped", slog.String("platform", s.name), slog.String("call", what))
		return
	default:
	}
	s.begin()
	select {
	case s.q <- sendOp{what: what, call: call}:
	default:
		s.end()
		s.log.Warn("send queue full; reply dropped", slog.String("platform", s.name), slog.String("call", what))
	}
}

// postWait queues a call nobody waits for, waiting for room in the queue;
// it is dropped when the bot stops first.
func (s *sender) postWait(what string, call func(ctx context.Context) error) {
	s.begin()
	select {
	case s.q <- sendOp{what: what, call: call}:
	case <-s.quit:
		s.end()
	}
}

// do queues a call and waits for its result. It returns ErrStopped when
// the bot stops before the call is made.
func (s *sender) do(ctx context.Context, what string, call func(ctx context.Context) error) error {
	op := sendOp{what: what, call: call, done: make(chan error, 1)}
	s.begin()
	select {
	case s.q <- op:
	case <-s.quit:
		s.end()
		return ErrStopped
	case <-ctx.Done():
		s.end()
		return ctx.Err()
	}
	select {
	case err := <-op.done:
		return err
	case <-s.quit:
		return ErrStopped
	}
}

// run makes the queued calls until the bot stops; calls queued by then
// are made before it returns (Stop bounds the wait).
func (s *sender) run(ctx context.Context) {
	for {
		select {
		case op := <-s.q:
			s.make(ctx, op)
		case <-s.quit:
			for {
				select {
				case op := <-s.q:
					s.make(ctx, op)
				default:
					return
				}
			}
		}
	}
}

func (s *sender) make(ctx context.Context, op sendOp) {
	defer s.end()
	var err error
	for attempt := 0; ; attempt++ {
		err = op.call(ctx)
		var rl RateLimited
		if err == nil || !errors.As(err, &rl) || attempt == maxRateLimitRetries {
			break
		}
		wait := max(rl.RetryAfter(), time.Second)
		s.log.Warn("platform rate limit; send queue paused", slog.String("platform", s.name), slog.String("call", op.what), slog.Duration("retry_after", wait))
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.quit:
			// Stopping: one last try after the pause is not worth the
			// shutdown grace; the outbox keeps what must be delivered.
			t.Stop()
			if op.done != nil {
				op.done <- err
			}
			return
		}
	}
	if op.done != nil {
		op.done <- err
	} else if err != nil {
		s.log.Error("send", slog.String("platform", s.name), slog.String("call", op.what), slog.Any("err", err))
	}
}

// queuedPlatform is a Platform whose calls go through its sender, with
// every text posted or edited redacted.
type queuedPlatform struct {
	p      Platform
	s      *sender
	redact *agent.Redactor // nil: nothing hidden
}

// queued wraps q's platform so that every call goes through q's sender,
// keeping the platform's optional abilities (Editor, ButtonAnswerer) and
// no others.
func queued(q *queuedPlatform) Platform {
	p := q.p
	ed, canEdit := p.(Editor)
	ba, canAnswer := p.(ButtonAnswerer)
	switch {
	case canEdit && canAnswer:
		return struct {
			*queuedPlatform
			queuedEditor
			queuedAnswerer
		}{q, queuedEditor{q, ed}, queuedAnswerer{q, ba}}
	case canEdit:
		return struct {
			*queuedPlatform
			queuedEditor
		}{q, queuedEditor{q, ed}}
	case canAnswer:
		return struct {
			*queuedPlatform
			queuedAnswerer
		}{q, queuedAnswerer{q, ba}}
	}
	return q
}

// redacted returns m with secrets hidden in its text and button labels.
func redacted(r *agent.Redactor, m Outgoing) Outgoing {
	m.Text = r.String(m.Text)
	if len(m.Buttons) > 0 {
		bs := make([]Button, len(m.Buttons))
		for i, bt := range m.Buttons {
			bs[i] = bt
			bs[i].Label = r.String(bt.Label)
		}
		m.Buttons = bs
	}
	return m
}

// Name implements Platform.
func (q *queuedPlatform) Name() string { return q.p.Name() }

// Send implements Platform: it waits for its turn in the queue.
func (q *queuedPlatform) Send(ctx context.Context, m Outgoing) (string, error) {
	var id string
	m = redacted(q.redact, m)
	err := q.s.do(ctx, "send", func(ctx context.Context) error {
		var err error
		id, err = q.p.Send(ctx, m)
		return err
	})
	if err != nil {
		return "", err // id may still be written: the call can be made during shutdown
	}
	return id, nil
}

// sendLater queues m without waiting.
func (q *queuedPlatform) sendLater(m Outgoing) {
	m = redacted(q.redact, m)
	q.s.post("send", func(ctx context.Context) error {
		_, err := q.p.Send(ctx, m)
		return err
	})
}

// answerLater queues a button answer without waiting.
func (q *queuedPlatform) answerLater(ref, text string) {
	if a, ok := q.p.(ButtonAnswerer); ok && ref != "" {
		q.s.post("answer button", func(ctx context.Context) error { return a.AnswerButton(ctx, ref, text) })
	}
}

type queuedEditor struct {
	q  *queuedPlatform
	ed Editor
}

// Edit implements Editor: it waits for its turn in the queue.
func (e queuedEditor) Edit(ctx context.Context, id string, m Outgoing) error {
	m = redacted(e.q.redact, m)
	return e.q.s.do(ctx, "edit", func(ctx context.Context) error { return e.ed.Edit(ctx, id, m) })
}

// EditInterval implements Editor.
func (e queuedEditor) EditInterval() time.Duration { return e.ed.EditInterval() }

type queuedAnswerer struct {
	q  *queuedPlatform
	ba ButtonAnswerer
}

// AnswerButton implements ButtonAnswerer: it waits for its turn in the
// queue.
func (a queuedAnswerer) AnswerButton(ctx context.Context, ref, text string) error {
	return a.q.s.do(ctx, "answer button", func(ctx context.Context) error { return a.ba.AnswerButton(ctx, ref, text) })
}
