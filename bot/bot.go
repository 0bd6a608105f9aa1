package bot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// TidyInboxInstruction is what /tidy-inbox asks the agent to do.
const TidyInboxInstruction = "Tidy my inbox: read the inbox, group related tasks, find or create a fitting project for each group, move the tasks there, and check that the inbox is empty."

// Agent runs agent runs; *agent.Engine implements it.
type Agent interface {
	Start(ctx context.Context, in agent.Input, h agent.Hooks) agent.Outcome
	Resume(ctx context.Context, tr *agent.Transcript, answer string, h agent.Hooks) agent.Outcome
	Undo(ctx context.Context, journal []agent.Applied) (agent.UndoReport, error)
}

// Config tunes the bot. Zero values take the defaults.
type Config struct {
	// Workers is the number of concurrent runs (default 4).
	Workers int
	// History is how many earlier messages the model sees (default 15).
	History int
	// AllowedUsers lists "platform:user id" entries; the console user is
	// always allowed.
	AllowedUsers []string
	// DedupeFor is how long event ids are kept (default 24h).
	DedupeFor time.Duration
	// ShutdownGrace is how long runs get to reach a checkpoint on
	// shutdown (default 10s).
	ShutdownGrace time.Duration
	Logger        *slog.Logger
	Metrics       Metrics
	// Redact hides configured secrets in every message the bot posts
	// (error text from an upstream service included) and every answer
	// it stores (nil: nothing is hidden).
	Redact *agent.Redactor
	Now    func() time.Time
}

func (c *Config) defaults() {
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.History <= 0 {
		c.History = 15
	}
	if c.DedupeFor <= 0 {
		c.DedupeFor = 24 * time.Hour
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Metrics == nil {
		c.Metrics = noMetrics{}
	}
}

// ErrStopped is returned by Handle once the bot is shutting down.
var ErrStopped = errors.New("bot: shutting down")

// Bot is the pipeline: ingest → store → queue → workers.
type Bot struct {
	store   Store
	agent   Agent
	cfg     Config
	log     *slog.Logger
	allowed map[string]bool

	// mu protects the fields below.
	mu        sync.Mutex
	platforms map[string]Platform
	queues    map[string][]Job // per thread, in order
	active    map[string]bool  // threads with a worker on them
	running   map[string]*activeRun
	sending   int // replies posted in the background, not yet done
	stopped   bool
	idle      *sync.Cond

	readyQ []string      // threads with work and no worker, under mu
	notify chan struct{} // pokes an idle worker
	quit   chan struct{} // closed by Stop
	wg     sync.WaitGroup
}

// activeRun is a run a worker is executing.
type activeRun struct {
	runID     string
	cancel    context.CancelCauseFunc
	cancelled bool // by /cancel
}

var errCancelled = errors.New("cancelled by the user")

// New returns a bot. Add platforms, then call Start.
func New(store Store, ag Agent, cfg Config) *Bot {
	cfg.defaults()
	b := &Bot{
		store:     store,
		agent:     ag,
		cfg:       cfg,
		log:       cfg.Logger,
		allowed:   map[string]bool{},
		platforms: map[string]Platform{},
		queues:    map[string][]Job{},
		active:    map[string]bool{},
		running:   map[string]*activeRun{},
		notify:    make(chan struct{}, 1),
		quit:      make(chan struct{}),
	}
	b.idle = sync.NewCond(&b.mu)
	for _, u := range cfg.AllowedUsers {
		if u = strings.TrimSpace(u); u != "" {
			b.allowed[u] = true
		}
	}
	return b
}

// AddPlatform registers a platform to post to.
func (b *Bot) AddPlatform(p Platform) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.platforms[p.Name()] = p
}

func (b *Bot) platform(name string) (Platform, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.platforms[name]
	if !ok {
		return nil, fmt.Errorf("bot: no platform %q", name)
	}
	return p, nil
}

func newID() string {
	var x [8]byte
	_, _ = rand.Read(x[:])
	return hex.EncodeToString(x[:])
}

// Allowed reports whether a user may use the bot.
func (b *Bot) Allowed(platform, userID string) bool {
	return platform == "console" || b.allowed[platform+":"+userID]
}

// Handle ingests one event: it drops duplicates, refuses unknown users,
// stores the message and queues a durable job. It returns quickly and
// never calls the model, so adapters can acknowledge the platform at once.
func (b *Bot) Handle(ctx context.Context, in Incoming) error {
	b.mu.Lock()
	stopped := b.stopped
	b.mu.Unlock()
	if stopped {
		return ErrStopped
	}
	if in.At.IsZero() {
		in.At = b.cfg.Now()
	}
	log := b.log.With(slog.String("platform", in.Platform), slog.String("chat_id", in.ChatID), slog.String("user_id", in.UserID))
	if in.EventID != "" {
		fresh, err := b.store.MarkEvent(ctx, in.Platform+":"+in.EventID, in.At)
		if err != nil {
			return fmt.Errorf("bot: dedupe event %s: %w", in.EventID, err)
		}
		if !fresh {
			log.Info("duplicate event dropped", slog.String("event_id", in.EventID))
			b.cfg.Metrics.Event(in.Platform, "duplicate")
			return nil
		}
	}
	if !b.Allowed(in.Platform, in.UserID) {
		log.Warn("refused unknown user")
		b.cfg.Metrics.Event(in.Platform, "refused")
		if in.Button != "" {
			b.answerButtonLater(ctx, in, "Sorry, you are not allowed to use this bot.")
			return nil
		}
		b.replyLater(ctx, in.Platform, Outgoing{ChatID: in.ChatID, ThreadID: in.ThreadID,
			Text: fmt.Sprintf("Sorry, I only work for the people my owner allowed. Your id is %s:%s; ask the owner to add it to TIDYBOT_ALLOWED_USERS.", in.Platform, in.UserID)})
		return nil
	}
	if in.Button != "" {
		b.cfg.Metrics.Event(in.Platform, "button")
		return b.press(ctx, in)
	}
	if in.Command != "" {
		b.cfg.Metrics.Event(in.Platform, "command")
	} else {
		b.cfg.Metrics.Event(in.Platform, "accepted")
	}
	switch in.Command {
	case "help", "start":
		b.replyLater(ctx, in.Platform, reply(in, helpText))
		return nil
	case "cancel":
		b.cancel(ctx, in)
		return nil
	case "usage":
		b.usage(ctx, in)
		return nil
	case "tidy-inbox", "tidy_inbox", "reset", "undo", "":
	default:
		b.replyLater(ctx, in.Platform, reply(in, fmt.Sprintf("I don't know /%s. %s", in.Command, helpText)))
		return nil
	}
	if in.Command == "" && strings.TrimSpace(in.Text) == "" {
		return nil
	}
	return b.enqueue(ctx, in)
}

// enqueue stores the message and a durable job for it, atomically.
func (b *Bot) enqueue(ctx context.Context, in Incoming) error {
	key := in.ThreadKey()
	var m *Message
	if in.Command == "" && in.Text != "" {
		m = &Message{ThreadKey: key, Role: RoleUser, Text: in.Text, At: in.At}
	}
	j := Job{ID: newID(), ThreadKey: key, Incoming: in, Enqueued: b.cfg.Now()}
	th := Thread{Key: key, Platform: in.Platform, ChatID: in.ChatID, ThreadID: in.ThreadID}
	if err := b.store.Enqueue(ctx, th, m, j); err != nil {
		return fmt.Errorf("bot: store message and job for %s: %w", key, err)
	}
	b.schedule(j, false)
	return nil
}

// schedule queues a job for its thread; front puts it first (resumed
// runs go before new messages).
func (b *Bot) schedule(j Job, front bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if front {
		b.queues[j.ThreadKey] = append([]Job{j}, b.queues[j.ThreadKey]...)
	} else {
		b.queues[j.ThreadKey] = append(b.queues[j.ThreadKey], j)
	}
	if !b.active[j.ThreadKey] {
		b.active[j.ThreadKey] = true
		b.markReady(j.ThreadKey)
	}
}

// WaitIdle blocks until no job is queued or running and no reply is being
// posted (runs waiting for the user do not count), or ctx ends.
func (b *Bot) WaitIdle(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		b.mu.Lock()
		for (len(b.active) > 0 || b.sending > 0) && ctx.Err() == nil {
			b.idle.Wait()
		}
		b.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		b.idle.Broadcast()
		b.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// Start recovers what a previous process left (runs that were working,
// queued jobs) and starts the workers. It returns once recovery is
// scheduled; workers stop when ctx ends, after Stop.
func (b *Bot) Start(ctx context.Context) error {
	if n, err := b.store.PruneEvents(ctx, b.cfg.Now().Add(-b.cfg.DedupeFor)); err != nil {
		return fmt.Errorf("bot: prune events: %w", err)
	} else if n > 0 {
		b.log.Info("pruned event ids", slog.Int("count", n))
	}
	runs, err := b.store.Runs(ctx, RunWorking, RunQueued)
	if err != nil {
		return fmt.Errorf("bot: list unfinished runs: %w", err)
	}
	jobs, err := b.store.Jobs(ctx)
	if err != nil {
		return fmt.Errorf("bot: list jobs: %w", err)
	}
	for _, j := range jobs {
		b.schedule(j, false)
	}
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		b.log.Info("resuming run", slog.String("run_id", r.ID), slog.String("thread_key", r.ThreadKey))
		b.schedule(Job{ID: "resume-" + r.ID, ThreadKey: r.ThreadKey, Incoming: Incoming{Platform: r.Platform, ChatID: r.ChatID, ThreadID: r.ThreadID, UserID: r.UserID}, Enqueued: b.cfg.Now()}, true)
	}
	for range b.cfg.Workers {
		b.wg.Add(1)
		go b.worker(ctx)
	}
	b.wg.Add(1)
	go b.pruneLoop(ctx)
	return nil
}

// Stop stops intake, interrupts runs at their next checkpoint (they stay
// resumable), and waits for workers up to the grace period.
func (b *Bot) Stop() {
	b.mu.Lock()
	if !b.stopped {
		close(b.quit)
	}
	b.stopped = true
	for _, ar := range b.running {
		ar.cancel(ErrStopped)
	}
	b.mu.Unlock()
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(b.cfg.ShutdownGrace):
		b.log.Warn("shutdown grace period over; runs left mid-step resume at next start")
	}
}

func (b *Bot) pruneLoop(ctx context.Context) {
	defer b.wg.Done()
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.quit:
			return
		case <-t.C:
			if _, err := b.store.PruneEvents(ctx, b.cfg.Now().Add(-b.cfg.DedupeFor)); err != nil {
				b.log.Error("prune events", slog.Any("err", err))
			}
		}
	}
}

// markReady queues a thread for a worker; mu must be held.
func (b *Bot) markReady(key string) {
	b.readyQ = append(b.readyQ, key)
	select {
	case b.notify <- struct{}{}:
	default:
	}
}

// next waits for a thread with work; "" when the bot stops.
func (b *Bot) next(ctx context.Context) string {
	for {
		b.mu.Lock()
		if b.stopped {
			b.mu.Unlock()
			return ""
		}
		if len(b.readyQ) > 0 {
			key := b.readyQ[0]
			b.readyQ = b.readyQ[1:]
			if len(b.readyQ) > 0 {
				select { // wake another worker for the rest
				case b.notify <- struct{}{}:
				default:
				}
			}
			b.mu.Unlock()
			return key
		}
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return ""
		case <-b.quit:
			return ""
		case <-b.notify:
		}
	}
}

func (b *Bot) worker(ctx context.Context) {
	defer b.wg.Done()
	for {
		key := b.next(ctx)
		if key == "" {
			return
		}
		b.mu.Lock()
		q := b.queues[key]
		if len(q) == 0 {
			b.finishThread(key)
			b.mu.Unlock()
			continue
		}
		j := q[0]
		b.queues[key] = q[1:]
		b.mu.Unlock()

		b.process(ctx, j)

		b.mu.Lock()
		if len(b.queues[key]) > 0 && !b.stopped {
			b.markReady(key)
		} else {
			b.finishThread(key)
		}
		b.mu.Unlock()
	}
}

// finishThread marks a thread idle; mu must be held.
func (b *Bot) finishThread(key string) {
	delete(b.active, key)
	delete(b.queues, key)
	b.idle.Broadcast()
}

// process handles one job; errors are logged with the run id and the user
// hears a plain-words message.
func (b *Bot) process(ctx context.Context, j Job) {
	log := b.log.With(slog.String("job_id", j.ID), slog.String("thread_key", j.ThreadKey))
	defer func() {
		if !strings.HasPrefix(j.ID, "resume-") {
			if err := b.store.DeleteJob(context.WithoutCancel(ctx), j.ID); err != nil {
				log.Error("delete job", slog.Any("err", err))
			}
		}
	}()
	in := j.Incoming
	var err error
	switch {
	case strings.HasPrefix(j.ID, "resume-"):
		err = b.resumeRun(ctx, strings.TrimPrefix(j.ID, "resume-"), "")
	case in.Command == "reset":
		err = b.reset(ctx, in)
	case in.Command == "undo":
		err = b.undo(ctx, in)
	case in.Command == "tidy-inbox" || in.Command == "tidy_inbox":
		err = b.startRun(ctx, j.ID, in, TidyInboxInstruction)
	default:
		err = b.message(ctx, j.ID, in)
	}
	if err != nil {
		log.Error("job failed", slog.Any("err", err))
		b.send(ctx, in.Platform, reply(in, "Something went wrong on my side; the details are in the log. Please try again."))
	}
}

// message handles a text message: the answer to a waiting run of this
// thread, or a new run.
func (b *Bot) message(ctx context.Context, jobID string, in Incoming) error {
	if r, err := b.waitingRun(ctx, in.ThreadKey()); err != nil {
		return err
	} else if r != nil {
		if r.Waiting.UserID != "" && r.Waiting.UserID != in.UserID && in.Button == "" {
			// Someone else spoke in the thread: that is a new request.
			return b.startRun(ctx, jobID, in, in.Text)
		}
		answer := in.Text
		if in.Button != "" {
			if answer = buttonAnswer(r.Waiting, in.Button); answer == "" {
				return nil // a press for an earlier question
			}
		}
		b.clearButtons(ctx, r, answer)
		return b.resumeRun(ctx, r.ID, answer)
	}
	if in.Button != "" {
		return nil // a press for a question that is gone; already answered
	}
	return b.startRun(ctx, jobID, in, in.Text)
}

func (b *Bot) waitingRun(ctx context.Context, threadKey string) (*Run, error) {
	runs, err := b.store.ThreadRuns(ctx, threadKey)
	if err != nil {
		return nil, fmt.Errorf("bot: list runs of %s: %w", threadKey, err)
	}
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].Status == RunWaiting && runs[i].Waiting != nil {
			return runs[i], nil
		}
	}
	return nil, nil
}

func reply(in Incoming, text string) Outgoing {
	return Outgoing{ChatID: in.ChatID, ThreadID: in.ThreadID, Text: text}
}

// later runs fn in the background, so that Handle returns (and the
// platform is acknowledged) without waiting on a platform API; WaitIdle
// and Stop wait for it.
func (b *Bot) later(ctx context.Context, fn func(ctx context.Context)) {
	ctx = context.WithoutCancel(ctx)
	b.mu.Lock()
	b.sending++
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer func() {
			b.mu.Lock()
			b.sending--
			b.idle.Broadcast()
			b.mu.Unlock()
		}()
		fn(ctx)
	}()
}

// replyLater posts a reply in the background (see later).
func (b *Bot) replyLater(ctx context.Context, platform string, m Outgoing) {
	b.later(ctx, func(ctx context.Context) { b.send(ctx, platform, m) })
}

// send posts a message, logging a failure: the chat cannot be told.
func (b *Bot) send(ctx context.Context, platform string, m Outgoing) string {
	p, err := b.platform(platform)
	if err != nil {
		b.log.Error("send", slog.Any("err", err))
		return ""
	}
	m.Text = b.cfg.Redact.String(m.Text)
	id, err := p.Send(context.WithoutCancel(ctx), m)
	if err != nil {
		b.log.Error("send message", slog.String("platform", platform), slog.Any("err", err))
	}
	return id
}

const helpText = `I manage your Todoist. Tell me what to do in plain words, for example "what's due today?" or "move everything about the birthday into one project".
Commands:
/tidy-inbox: sort the inbox into projects
/undo: revert the last run's changes
/cancel: stop the current run
/reset: forget this conversation
/usage: tokens used here
/help: this message`
