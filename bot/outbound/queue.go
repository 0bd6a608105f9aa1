// Package outbound is a platform's send queue: every call to one
// platform waits its turn in a bounded queue of a few lanes (one chat
// always on the same lane, so a chat's calls keep their order), and a
// rate-limited call pauses every lane for as long as the platform asks.
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

// QueueSize bounds the calls waiting for one platform; a reply that
// finds the queue full is dropped (logged), so a flood of events cannot
// pile up calls.
const QueueSize = 256

// Lanes is how many calls to one platform may be in flight at once.
// Calls for one chat always take the same lane, so a chat sees its
// messages in the order they were queued (the status message before the
// answer); different chats do not wait for each other's round trips.
// Slack and Telegram limit posting per chat (about one message a second)
// and per workspace or bot (a 429 for the whole platform), not to one
// call at a time: with a single lane every message of every chat waited
// for every other chat's round trips.
const Lanes = 8

// MaxRateLimitRetries is how often one call is retried after a 429.
const MaxRateLimitRetries = 5

// sendOp is one platform call.
type sendOp struct {
	what string
	call func(ctx context.Context) error
	done chan error  // nil: nobody waits
	then func(error) // called with the result, when set
	// droppable marks a progress edit: rather than wait out the
	// platform's pause or retry a 429, it is dropped (ErrSkipped), so the
	// chat's answer queued behind it does not wait for it; a later edit
	// shows the same lines.
	droppable bool
}

// ErrSkipped is the result of a droppable call not made because the
// platform asked for a pause.
var ErrSkipped = errors.New("outbound: skipped while the platform is rate limited")

// ErrStopped is the result of a call queued once the lanes have stopped.
var ErrStopped = errors.New("outbound: send queue stopped")

// Queue makes every call to one platform from a bounded queue, a few at
// a time (one lane per chat, see Lanes), and pauses every lane when
// the platform asks (RateLimited). Lanes goroutines per platform,
// never one per send.
type Queue struct {
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

// New returns the send queue of the platform called name. It takes calls
// until quit is closed; Run makes them.
func New(name string, log *slog.Logger, quit <-chan struct{}) *Queue {
	s := &Queue{name: name, log: log, quit: quit, idle: make(chan struct{})}
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
	case s.lane(key) <- sendOp{what: what, call: call}:
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
	s.lane(key) <- sendOp{what: what, call: call, then: then}
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
	s.lane(key) <- sendOp{what: what, call: call, then: then, droppable: true}
}

// Do queues a call for chat key and waits for its result. It returns
// ErrStopped when the queue stops before the call is made.
func (s *Queue) Do(ctx context.Context, key, what string, call func(ctx context.Context) error) error {
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
			s.make(ctx, op)
		case <-s.quit:
			s.drain(ctx, q)
			return
		}
	}
}

// drain makes what is queued on q, and what is being queued, then stops
// the lanes taking calls (see enter).
func (s *Queue) drain(ctx context.Context, q chan sendOp) {
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
func (s *Queue) pause(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if until := time.Now().Add(d); until.After(s.pausedUntil) {
		s.pausedUntil = until
	}
}

// paused reports whether the platform's pause is on.
func (s *Queue) paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Before(s.pausedUntil)
}

// waitPause waits out a pause the platform asked for; it reports false
// when the queue stops (quit) first.
func (s *Queue) waitPause() bool {
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

func (s *Queue) make(ctx context.Context, op sendOp) {
	defer s.end()
	var err error
	for attempt := 0; ; attempt++ {
		if op.droppable && s.paused() {
			err = ErrSkipped
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
		if err == nil || !errors.As(err, &rl) || attempt == MaxRateLimitRetries {
			break
		}
		wait := max(rl.RetryAfter(), time.Second)
		s.log.Warn("platform rate limit; send queue paused", slog.String("platform", s.name), slog.String("call", op.what), slog.Duration("retry_after", wait))
		s.pause(wait)
		if op.droppable {
			err = ErrSkipped
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
