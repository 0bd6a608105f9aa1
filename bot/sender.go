package bot

import (
	"context"
	"errors"
	"hash/fnv"
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

// sendLanes is how many calls to one platform may be in flight at once.
// Calls for one chat always take the same lane, so a chat sees its
// messages in the order they were queued (the status message before the
// answer); different chats do not wait for each other's round trips.
// Slack and Telegram limit posting per chat (about one message a second)
// and per workspace or bot (a 429 for the whole platform), not to one
// call at a time: with a single lane every message of every chat waited
// for every other chat's round trips.
const sendLanes = 8

// maxRateLimitRetries is how often one call is retried after a 429.
const maxRateLimitRetries = 5

// sendOp is one platform call.
type sendOp struct {
	what string
	call func(ctx context.Context) error
	done chan error  // nil: nobody waits
	then func(error) // called with the result, when set
	// droppable marks a progress edit: rather than wait out the
	// platform's pause or retry a 429, it is dropped (errSkipped), so the
	// chat's answer queued behind it does not wait for it; a later edit
	// shows the same lines.
	droppable bool
}

// errSkipped is the result of a droppable call not made because the
// platform asked for a pause.
var errSkipped = errors.New("bot: skipped while the platform is rate limited")

// sender makes every call to one platform from a bounded queue, a few at
// a time (one lane per chat, see sendLanes), and pauses every lane when
// the platform asks (RateLimited). sendLanes goroutines per platform,
// never one per send.
type sender struct {
	name  string
	log   *slog.Logger
	lanes []chan sendOp
	quit  <-chan struct{}
	// mu protects pending (ops queued or in progress), idle (closed and
	// replaced when pending drops to zero), pausedUntil (no call starts
	// before it: the platform's Retry-After), enqueuing (calls being put
	// in a lane) and closed (the lanes have stopped; see enter).
	mu          sync.Mutex
	pending     int
	idle        chan struct{}
	pausedUntil time.Time
	enqueuing   int
	closed      bool
}

func newSender(name string, log *slog.Logger, quit <-chan struct{}) *sender {
	s := &sender{name: name, log: log, quit: quit, idle: make(chan struct{})}
	s.lanes = make([]chan sendOp, sendLanes)
	for i := range s.lanes {
		s.lanes[i] = make(chan sendOp, sendQueueSize)
	}
	return s
}

// lane is the queue of key's calls (a chat id): the same key always
// takes the same lane.
func (s *sender) lane(key string) chan sendOp {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return s.lanes[h.Sum32()%uint32(len(s.lanes))]
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

// enter counts in a call about to be queued; it reports false once the
// lanes have stopped (the call cannot be made), or when limit (> 0) calls
// are pending already. A lane stops only when no call is being queued, so
// a call that entered is always taken: sent calls that find the lanes
// gone would be neither made nor answered.
func (s *sender) enter(limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || limit > 0 && s.pending >= limit {
		return false
	}
	s.pending++
	s.enqueuing++
	return true
}

// entered ends enter's queuing (the call is in its lane, or given up).
func (s *sender) entered() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.enqueuing--
}

// post queues a call for chat key that nobody waits for; it is dropped
// when the platform's queue is full (sendQueueSize calls waiting besides
// the one in flight) or the bot stops.
func (s *sender) post(key, what string, call func(ctx context.Context) error) {
	select {
	case <-s.quit:
		s.log.Warn("stopping; reply dropped", slog.String("platform", s.name), slog.String("call", what))
		return
	default:
	}
	if !s.enter(sendQueueSize + 1) {
		s.log.Warn("send queue full; reply dropped", slog.String("platform", s.name), slog.String("call", what))
		return
	}
	defer s.entered()
	select {
	case s.lane(key) <- sendOp{what: what, call: call}:
	default:
		s.end()
		s.log.Warn("send queue full; reply dropped", slog.String("platform", s.name), slog.String("call", what))
	}
}

// postThen queues a call for chat key that nobody waits for, waiting
// for room in its lane, and calls then with the call's final result (after
// any 429 retries), or with ErrStopped when the lanes have stopped.
func (s *sender) postThen(key, what string, call func(ctx context.Context) error, then func(error)) {
	if !s.enter(0) {
		then(ErrStopped)
		return
	}
	defer s.entered()
	s.lane(key) <- sendOp{what: what, call: call, then: then}
}

// postDroppable is postThen for a droppable call (see sendOp).
func (s *sender) postDroppable(key, what string, call func(ctx context.Context) error, then func(error)) {
	if !s.enter(0) {
		then(ErrStopped)
		return
	}
	defer s.entered()
	s.lane(key) <- sendOp{what: what, call: call, then: then, droppable: true}
}

// do queues a call for chat key and waits for its result. It returns
// ErrStopped when the bot stops before the call is made.
func (s *sender) do(ctx context.Context, key, what string, call func(ctx context.Context) error) error {
	op := sendOp{what: what, call: call, done: make(chan error, 1)}
	if !s.enter(0) {
		return ErrStopped
	}
	select {
	case s.lane(key) <- op:
		s.entered()
	case <-ctx.Done():
		s.entered()
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

// run makes the queued calls of every lane until the bot stops; calls
// queued by then are made before it returns (Stop bounds the wait).
func (s *sender) run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, q := range s.lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.runLane(ctx, q)
		}()
	}
	wg.Wait()
}

func (s *sender) runLane(ctx context.Context, q chan sendOp) {
	for {
		select {
		case op := <-q:
			s.make(ctx, op)
		case <-s.quit:
			s.drain(ctx, q)
			return
		}
	}
}

// drain makes what is queued on q, and what is being queued, then stops
// the lanes taking calls (see enter).
func (s *sender) drain(ctx context.Context, q chan sendOp) {
	for {
		select {
		case op := <-q:
			s.make(ctx, op)
			continue
		default:
		}
		s.mu.Lock()
		if s.enqueuing == 0 && len(q) == 0 {
			s.closed = true
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		// A call is being queued, maybe on this lane: take it.
		t := time.NewTimer(time.Millisecond)
		select {
		case op := <-q:
			s.make(ctx, op)
		case <-t.C:
		}
		t.Stop()
	}
}

// pause holds every lane's next call for d.
func (s *sender) pause(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if until := time.Now().Add(d); until.After(s.pausedUntil) {
		s.pausedUntil = until
	}
}

// paused reports whether the platform's pause is on.
func (s *sender) paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Before(s.pausedUntil)
}

// waitPause waits out a pause the platform asked for; it reports false
// when the bot stops first.
func (s *sender) waitPause() bool {
	for {
		s.mu.Lock()
		wait := time.Until(s.pausedUntil)
		s.mu.Unlock()
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.quit:
			t.Stop()
			return false
		}
	}
}

func (s *sender) make(ctx context.Context, op sendOp) {
	defer s.end()
	var err error
	for attempt := 0; ; attempt++ {
		if op.droppable && s.paused() {
			err = errSkipped
			break
		}
		// A 429 on any lane pauses them all. Stopping cuts the pause
		// short: a call queued before the stop is still made once, but
		// a retry is not worth the shutdown grace (the outbox keeps
		// what must be delivered).
		if !s.waitPause() && attempt > 0 {
			break
		}
		err = op.call(ctx)
		var rl RateLimited
		if err == nil || !errors.As(err, &rl) || attempt == maxRateLimitRetries {
			break
		}
		wait := max(rl.RetryAfter(), time.Second)
		s.log.Warn("platform rate limit; send queue paused", slog.String("platform", s.name), slog.String("call", op.what), slog.Duration("retry_after", wait))
		s.pause(wait)
		if op.droppable {
			err = errSkipped
			break
		}
	}
	switch {
	case op.done != nil:
		op.done <- err
	case op.then != nil:
		op.then(err)
	case err != nil:
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
	err := q.s.do(ctx, m.ChatID, "send", func(ctx context.Context) error {
		var err error
		id, err = q.p.Send(ctx, m)
		return err
	})
	if err != nil {
		return "", err // id may still be written: the call can be made during shutdown
	}
	return id, nil
}

// sendThen queues m without waiting and calls then with the posted
// message's id, or the error, once the call is made.
func (q *queuedPlatform) sendThen(m Outgoing, then func(id string, err error)) {
	m = redacted(q.redact, m)
	var id string
	q.s.postThen(m.ChatID, "send", func(ctx context.Context) error {
		var err error
		id, err = q.p.Send(ctx, m)
		return err
	}, func(err error) { then(id, err) })
}

// resendThen is sendThen for an entry that may have been posted already:
// a Resender looks for it first (see Resender); other platforms post it
// again.
func (q *queuedPlatform) resendThen(m Outgoing, since time.Time, then func(id string, err error)) {
	rs, ok := q.p.(Resender)
	if !ok {
		q.sendThen(m, then)
		return
	}
	m = redacted(q.redact, m)
	var id string
	q.s.postThen(m.ChatID, "send", func(ctx context.Context) error {
		var err error
		id, err = rs.Resend(ctx, m, since)
		return err
	}, func(err error) { then(id, err) })
}

// sendLater queues m without waiting.
func (q *queuedPlatform) sendLater(m Outgoing) {
	m = redacted(q.redact, m)
	q.s.post(m.ChatID, "send", func(ctx context.Context) error {
		_, err := q.p.Send(ctx, m)
		return err
	})
}

// answerLater queues a button answer without waiting.
func (q *queuedPlatform) answerLater(ref, text string) {
	if a, ok := q.p.(ButtonAnswerer); ok && ref != "" {
		q.s.post(ref, "answer button", func(ctx context.Context) error { return a.AnswerButton(ctx, ref, text) })
	}
}

type queuedEditor struct {
	q  *queuedPlatform
	ed Editor
}

// Edit implements Editor: it waits for its turn in the queue.
func (e queuedEditor) Edit(ctx context.Context, id string, m Outgoing) error {
	return e.editQueued(ctx, func() string { return id }, m)
}

// editLater queues a status message's edit (droppable, see sendOp) of
// the message id names without waiting; a failure is logged. id and text
// are asked when the edit is made, so id may name a message queued before
// it in the same chat and not posted yet ("": no message, nothing to
// edit), and the text is the latest. then, when set, hears the result.
func (e queuedEditor) editLater(id func() string, m Outgoing, text func() string, then func(error)) {
	// A run's own output waits for room rather than be dropped, as its
	// answer does; only replies made while acknowledging an event are
	// dropped when the queue is full.
	e.q.s.postDroppable(m.ChatID, "edit", func(ctx context.Context) error {
		if text != nil {
			m.Text = text()
		}
		return e.editNow(ctx, id, redacted(e.q.redact, m))
	}, func(err error) {
		if then != nil {
			then(err)
		}
		if err != nil && !errors.Is(err, errSkipped) {
			e.q.s.log.Warn("edit status message", slog.String("platform", e.q.s.name), slog.Any("err", err))
		}
	})
}

// editQueued is Edit with id asked when the edit is made (see
// editLater); it waits for its turn in the queue.
func (e queuedEditor) editQueued(ctx context.Context, id func() string, m Outgoing) error {
	m = redacted(e.q.redact, m)
	return e.q.s.do(ctx, m.ChatID, "edit", func(ctx context.Context) error { return e.editNow(ctx, id, m) })
}

func (e queuedEditor) editNow(ctx context.Context, id func() string, m Outgoing) error {
	msgID := id()
	if msgID == "" {
		return nil
	}
	return e.ed.Edit(ctx, msgID, m)
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
	return a.q.s.do(ctx, ref, "answer button", func(ctx context.Context) error { return a.ba.AnswerButton(ctx, ref, text) })
}
