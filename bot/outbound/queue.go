// Package outbound is a platform's send queue: every call to one
// platform waits its turn in a bounded queue of a few lanes (one chat
// always on the same lane, so a chat's calls keep their order), and a
// rate-limited call holds back its own chat, and only it, for as long as
// the platform asks: the lane goes on with other chats meanwhile.
package outbound

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"
)

// RateLimited is implemented by a platform's error that asks for a pause
// before the next call (an HTTP 429 with Retry-After, Telegram's
// retry_after): the calls of the chat that got it wait that long, then
// the call is tried again (see Queue).
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

// QueueSize bounds the calls waiting for one platform; a reply that
// finds the queue full is dropped (logged), so a flood of events cannot
// pile up calls.
const QueueSize = 256

// Lanes is how many calls to one platform may be in flight at once.
// Calls for one chat always take the same lane, so a chat sees its
// messages in the order they were queued (the status message before the
// answer); different chats do not wait for each other's round trips.
// Slack and Telegram limit posting per chat (about one message a second)
// and per method and workspace (Slack's tiers) or bot, not to one call
// at a time: with a single lane every message of every chat waited for
// every other chat's round trips.
const Lanes = 8

// MaxRateLimitRetries is how often one call is retried after a 429.
const MaxRateLimitRetries = 5

// sendOp is one platform call.
type sendOp struct {
	key  string // the chat: its lane, and what a 429 holds back
	what string
	call func(ctx context.Context) error
	done chan error  // nil: nobody waits
	then func(error) // called with the result, when set
	// droppable marks a progress edit: rather than wait out the
	// platform's pause or retry a 429, it is dropped (ErrSkipped), so the
	// chat's answer queued behind it does not wait for it; a later edit
	// shows the same lines.
	droppable bool
	attempt   int   // 429s answered so far
	err       error // the last answer, once attempt > 0
	resume    bool  // no call: the pause of chat key is over (see hold)
}

// ErrSkipped is the result of a droppable call not made, or answered
// RateLimited, because the platform asked for a pause.
var ErrSkipped = errors.New("outbound: skipped while the platform is rate limited")

// ErrStopped is the result of a call queued once the lanes have stopped.
var ErrStopped = errors.New("outbound: send queue stopped")

// Queue makes every call to one platform from a bounded queue, a few at
// a time (one lane per chat, see Lanes). A call the platform answers
// RateLimited holds back its chat's calls, in order, until the pause is
// over (see hold), while its lane serves other chats: Slack limits each
// method per workspace and posting per channel, Telegram mostly per
// chat, so one chat's 429 says nothing about another's next call (the
// adapter keeps the platform's own lanes, see adapters/slack/limits.go).
// Lanes goroutines per platform, never one per send.
type Queue struct {
	name  string
	log   *slog.Logger
	lanes []chan sendOp
	quit  <-chan struct{}
	// mu protects pending (ops queued or in progress), idle (closed and
	// replaced when pending drops to zero), held (by chat: the calls
	// waiting out a 429, the first the one answered it; see hold), cool
	// (by chat: until when a droppable call's 429 drops the chat's
	// droppable calls without a call), enqueuing (calls being put in a lane) and closed (the lanes have
	// stopped; see enter).
	mu        sync.Mutex
	pending   int
	idle      chan struct{}
	held      map[string]*heldChat
	cool      map[string]time.Time // by chat: a droppable call's 429 lasts until then
	enqueuing int
	closed    bool
}

// heldChat is a chat whose calls wait out a platform's pause.
type heldChat struct {
	ops   []sendOp
	timer *time.Timer
}

// New returns the send queue of the platform called name. It takes calls
// until quit is closed; Run makes them.
func New(name string, log *slog.Logger, quit <-chan struct{}) *Queue {
	s := &Queue{name: name, log: log, quit: quit, idle: make(chan struct{}), held: map[string]*heldChat{}, cool: map[string]time.Time{}}
	s.lanes = make([]chan sendOp, Lanes)
	for i := range s.lanes {
		s.lanes[i] = make(chan sendOp, QueueSize)
	}
	return s
}

// Lane is the number of the lane key's calls (a chat id) take: the same
// key always takes the same lane.
func (s *Queue) Lane(key string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(len(s.lanes)))
}

func (s *Queue) lane(key string) chan sendOp { return s.lanes[s.Lane(key)] }

func (s *Queue) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending--
	if s.pending == 0 {
		close(s.idle)
		s.idle = make(chan struct{})
	}
}

// WaitIdle blocks until no op is queued or in progress, or ctx ends.
func (s *Queue) WaitIdle(ctx context.Context) error {
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

// Pending is the number of calls queued or in progress.
func (s *Queue) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending
}

// enter counts in a call about to be queued; it reports false once the
// lanes have stopped (the call cannot be made), or when limit (> 0) calls
// are pending already. A lane stops only when no call is being queued, so
// a call that entered is always taken: sent calls that find the lanes
// gone would be neither made nor answered.
func (s *Queue) enter(limit int) bool {
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
func (s *Queue) entered() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.enqueuing--
}

// Post queues a call for chat key that nobody waits for; it is dropped
// when the platform's queue is full (QueueSize calls waiting besides
// the one in flight) or the queue stops (quit).
func (s *Queue) Post(key, what string, call func(ctx context.Context) error) {
	select {
	case <-s.quit:
		s.log.Warn("stopping; reply dropped", slog.String("platform", s.name), slog.String("call", what))
		return
	default:
	}
	if !s.enter(QueueSize + 1) {
		s.log.Warn("send queue full; reply dropped", slog.String("platform", s.name), slog.String("call", what))
		return
	}
	defer s.entered()
	select {
	case s.lane(key) <- sendOp{key: key, what: what, call: call}:
	default:
		s.end()
		s.log.Warn("send queue full; reply dropped", slog.String("platform", s.name), slog.String("call", what))
	}
}

// PostThen queues a call for chat key that nobody waits for, waiting
// for room in its lane, and calls then with the call's final result (after
// any 429 retries), or with ErrStopped when the lanes have stopped.
func (s *Queue) PostThen(key, what string, call func(ctx context.Context) error, then func(error)) {
	if !s.enter(0) {
		then(ErrStopped)
		return
	}
	defer s.entered()
	s.lane(key) <- sendOp{key: key, what: what, call: call, then: then}
}

// PostDroppable is PostThen for a call that may be dropped (a progress
// edit): rather than wait out the platform's pause or retry a 429, it is
// answered ErrSkipped, so the calls queued behind it do not wait for it.
func (s *Queue) PostDroppable(key, what string, call func(ctx context.Context) error, then func(error)) {
	if !s.enter(0) {
		then(ErrStopped)
		return
	}
	defer s.entered()
	s.lane(key) <- sendOp{key: key, what: what, call: call, then: then, droppable: true}
}

// Do queues a call for chat key and waits for its result. It returns
// ErrStopped when the queue stops before the call is made.
func (s *Queue) Do(ctx context.Context, key, what string, call func(ctx context.Context) error) error {
	op := sendOp{key: key, what: what, call: call, done: make(chan error, 1)}
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

// Run makes the queued calls of every lane until quit is closed; calls
// queued by then are made before it returns (the caller bounds the wait).
func (s *Queue) Run(ctx context.Context) {
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

func (s *Queue) runLane(ctx context.Context, q chan sendOp) {
	for {
		select {
		case op := <-q:
			s.take(ctx, op)
		case <-s.quit:
			s.drain(ctx, q)
			return
		}
	}
}

// take makes op, or keeps it behind its chat's held calls; a resume
// makes the held calls of its chat, in order, until one is held again.
func (s *Queue) take(ctx context.Context, op sendOp) {
	s.mu.Lock()
	h := s.held[op.key]
	if op.resume {
		delete(s.held, op.key)
		s.mu.Unlock()
		if h != nil {
			s.makeAll(ctx, op.key, h.ops)
		}
		return
	}
	if op.droppable && (h != nil || time.Now().Before(s.cool[op.key])) {
		s.mu.Unlock()
		s.finish(op, ErrSkipped) // a progress edit does not wait out the pause
		return
	}
	delete(s.cool, op.key)
	if h != nil {
		h.ops = append(h.ops, op)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.make(ctx, op)
}

// makeAll makes ops of chat key in order; once one is held (a 429), the
// rest wait behind it.
func (s *Queue) makeAll(ctx context.Context, key string, ops []sendOp) {
	for i, op := range ops {
		s.mu.Lock()
		if h := s.held[key]; h != nil {
			h.ops = append(h.ops, ops[i:]...)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.make(ctx, op)
	}
}

// hold keeps op, answered RateLimited, and every later call of its chat
// out of the lane for wait, then puts them back in order (a resume in
// the chat's lane). The lane meanwhile serves other chats.
func (s *Queue) hold(op sendOp, wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &heldChat{ops: []sendOp{op}}
	s.held[op.key] = h
	h.timer = time.AfterFunc(wait, func() {
		select {
		case s.lane(op.key) <- sendOp{key: op.key, resume: true}:
		case <-s.quit: // drain makes what is held
		}
	})
}

// drain makes what is queued on q, and what is being queued, then stops
// the lanes taking calls (see enter). Calls held by a pause are made
// now: a call queued before the stop is made once, but a retry is not
// worth the shutdown grace (the outbox keeps what must be delivered).
func (s *Queue) drain(ctx context.Context, q chan sendOp) {
	for {
		select {
		case op := <-q:
			s.drainOne(ctx, op)
			continue
		default:
		}
		if s.drainHeld(ctx, q) {
			continue
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
			s.drainOne(ctx, op)
		case <-t.C:
		}
		t.Stop()
	}
}

func (s *Queue) drainOne(ctx context.Context, op sendOp) {
	if !op.resume {
		s.take(ctx, op)
	}
}

// drainHeld makes, once, the held calls of the chats of lane q; it
// reports whether there were any.
func (s *Queue) drainHeld(ctx context.Context, q chan sendOp) bool {
	s.mu.Lock()
	var ops []sendOp
	for key, h := range s.held {
		if s.lanes[s.Lane(key)] == q {
			h.timer.Stop()
			delete(s.held, key)
			ops = append(ops, h.ops...)
		}
	}
	s.mu.Unlock()
	for _, op := range ops {
		if op.attempt > 0 {
			s.finish(op, op.err)
			continue
		}
		s.make(ctx, op)
	}
	return len(ops) > 0
}

func (s *Queue) stopping() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

// make makes op's call; a call answered RateLimited is held with its
// chat (see hold) and tried again after the pause, at most
// MaxRateLimitRetries times, unless droppable (ErrSkipped) or the queue
// is stopping (the 429 is its answer).
func (s *Queue) make(ctx context.Context, op sendOp) {
	err := op.call(ctx)
	var rl RateLimited
	if err != nil && errors.As(err, &rl) && op.attempt < MaxRateLimitRetries && !s.stopping() {
		wait := max(rl.RetryAfter(), time.Second)
		if op.droppable {
			s.mu.Lock()
			s.cool[op.key] = time.Now().Add(wait)
			s.mu.Unlock()
			s.finish(op, ErrSkipped)
			return
		}
		s.log.Warn("platform rate limit; the chat's calls wait", slog.String("platform", s.name), slog.String("call", op.what), slog.Duration("retry_after", wait))
		op.attempt++
		op.err = err
		s.hold(op, wait)
		return
	}
	if err != nil && op.droppable && errors.As(err, &rl) {
		err = ErrSkipped
	}
	s.finish(op, err)
}

// finish answers op with err and counts it done.
func (s *Queue) finish(op sendOp, err error) {
	defer s.end()
	switch {
	case op.done != nil:
		op.done <- err
	case op.then != nil:
		op.then(err)
	case err != nil:
		s.log.Error("send", slog.String("platform", s.name), slog.String("call", op.what), slog.Any("err", err))
	}
}
