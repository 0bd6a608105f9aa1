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
	"sync/atomic"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot/outbound"
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
	// ModelTiers are the models a person may pick with /settings model
	// (TIDYBOT_MODELS), the first the default; none: no choice, and
	// runs name no model (the model client's own).
	ModelTiers []agent.ModelTier
	// AllowedUsers lists "platform:user id" entries; the console user is
	// always allowed.
	AllowedUsers []string
	// DedupeFor is how long event ids are kept (default 24h).
	DedupeFor time.Duration
	// Retention is how long messages, runs (with their transcripts) and
	// the audit journal are kept (default 720h).
	Retention time.Duration
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
	// Notice, when set, is said once in each conversation (per process),
	// before its first run: something every user should know, such as a
	// model about to shut down.
	Notice string
	// RunLink returns the address of a run's Details page, or "" for
	// none (nil: no links). The final message carries it for the asker.
	RunLink func(r *Run) string
	// Transcriber turns voice notes into text (nil: voice notes are
	// answered with a note that none is configured).
	Transcriber Transcriber
	// VoiceMax is the longest voice note accepted (default 5m).
	VoiceMax time.Duration
	// Vision is VisionAuto (default), VisionOn or VisionOff: whether
	// photos go to the model as images.
	Vision string
	// Accounts, when set, is team mode: each person's runs use their own
	// Todoist, connected with /connect (nil: every run uses the agent
	// given to New).
	Accounts Accounts
	// UserDailyTokens caps the model tokens of one person per UTC day (0:
	// no cap).
	UserDailyTokens int
	// TimerEvery is how often the bot looks for due timers (default
	// 15s): a digest comes at most this late.
	TimerEvery time.Duration
	// AutopilotPerHour bounds one person's autopilot runs per hour
	// (default DefaultAutopilotPerHour); new tasks beyond it wait.
	AutopilotPerHour int
	// AutopilotTokensPerHour bounds the model tokens of one person's
	// autopilot runs per hour (default DefaultAutopilotTokensPerHour);
	// once spent, new tasks wait.
	AutopilotTokensPerHour int
	// AutopilotEvery is how often autopilot looks at the inbox of a
	// person who turned it on (default 1m; TIDYBOT_AUTOPILOT_INTERVAL),
	// at most TimerEvery late.
	AutopilotEvery time.Duration
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
	if c.Retention <= 0 {
		c.Retention = 720 * time.Hour
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
	if c.VoiceMax <= 0 {
		c.VoiceMax = 5 * time.Minute
	}
	if c.Vision == "" {
		c.Vision = VisionAuto
	}
	if c.TimerEvery <= 0 {
		c.TimerEvery = 15 * time.Second
	}
	if c.AutopilotEvery <= 0 {
		c.AutopilotEvery = time.Minute
	}
	if c.AutopilotPerHour <= 0 {
		c.AutopilotPerHour = DefaultAutopilotPerHour
	}
	if c.AutopilotTokensPerHour <= 0 {
		c.AutopilotTokensPerHour = DefaultAutopilotTokensPerHour
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
	sched   *scheduler
	// feed, with a Shared store, fills sched with the work of
	// conversations this process leases; nil with a store of its own.
	feed *feeder
	// noVision is set once the model rejected an image (TIDYBOT_VISION=auto).
	noVision atomic.Bool
	// ledger holds each person's tokens of the day (see cap.go).
	ledger ledger
	// autopilotLocks serialise the autopilot's looks per person.
	autopilotLocks autopilotLocks

	// mu protects the fields below.
	mu        sync.Mutex
	platforms map[string]Platform // wrapped: calls go through queues
	queues    map[string]*queuedPlatform
	running   map[string]*activeRun // by thread
	// posting holds the outbox entries this process is delivering
	// (queued, posted or waiting for a retry), by id, with the key of
	// their conversation ("" when none is known): an entry claimed again
	// (from this process's previous incarnation, after its leases were
	// lost) is not queued twice, and a conversation's lease is released
	// only once its entries are settled (feeder.sending).
	posting map[string]string
	// failures counts the failed tries of the jobs tried again (see
	// tryAgain), by id.
	failures map[string]int
	started  bool
	noticed  map[string]bool // threads told Config.Notice
	// signs are the status lines being set at intake (ack), by chat and
	// thread: closed once the call is done.
	signs    map[string]chan struct{}
	timerFns map[string]TimerHandler // by timer kind (HandleTimer)
	stopped  bool
	// timerPasses counts the RunTimers passes in progress (WaitIdle
	// waits for them: a timer's post is queued only once it has run).
	timerPasses atomic.Int32

	quit chan struct{} // closed by Stop: intake and workers stop
	// sendQuit is closed by Stop once the workers are done (or the grace
	// period is over), so that answers of runs ending meanwhile are
	// posted; sendLoops counts the send queues' goroutines.
	sendQuit  chan struct{}
	sendLoops sync.WaitGroup
	// workLoops counts the other goroutines Start starts (workers, the
	// prune loop, the watch of Start's context); Add (of workLoops and
	// sendLoops) is only called under mu before stopped is set, so it
	// never races Wait.
	workLoops sync.WaitGroup
	// runTails counts the ends of runs being committed and posted (see
	// handOff); only workers Add to it, so Stop waits for it once the
	// workers are done. tailRoom bounds them.
	runTails sync.WaitGroup
	tailRoom chan struct{}
}

// activeRun is a run a worker is executing.
type activeRun struct {
	runID     string
	cancel    context.CancelCauseFunc
	cancelled bool // by /cancel
	// cancelMark, with a Shared store, is the latest /cancel stored for
	// the conversation as the run began, but those stored for its job
	// while it waited (see Bot.cancelMark, stopCancelled).
	cancelMark int64
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
		sched:     newScheduler(),
		platforms: map[string]Platform{},
		queues:    map[string]*queuedPlatform{},
		running:   map[string]*activeRun{},
		posting:   map[string]string{},
		failures:  map[string]int{},
		quit:      make(chan struct{}),
		sendQuit:  make(chan struct{}),
		tailRoom:  make(chan struct{}, cfg.Workers),
	}
	b.registerDigest()
	b.registerAutopilot()
	for _, u := range cfg.AllowedUsers {
		if u = strings.TrimSpace(u); u != "" {
			b.allowed[u] = true
		}
	}
	if q, ok := store.(Shared); ok {
		b.feed = newFeeder(b, q)
		b.sched.refill = b.feed.refill
		b.sched.started = b.feed.wakeIfMore
	}
	return b
}

// AddPlatform registers a platform to post to. Every call to it goes
// through its own bounded send queue.
func (b *Bot) AddPlatform(p Platform) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := outbound.New(p.Name(), b.log, b.sendQuit)
	q := &queuedPlatform{p: p, s: s, redact: b.cfg.Redact, log: b.log}
	b.queues[p.Name()] = q
	b.platforms[p.Name()] = queued(q)
	if b.started && !b.stopped {
		b.sendLoops.Add(1)
		go b.runSender(s)
	}
}

func (b *Bot) runSender(s *outbound.Queue) {
	defer b.sendLoops.Done()
	s.Run(context.Background())
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

// queue returns a platform's send queue, or nil.
func (b *Bot) queue(name string) *queuedPlatform {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queues[name]
}

// senders returns every platform's send queue.
func (b *Bot) senders() []*outbound.Queue {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*outbound.Queue, 0, len(b.queues))
	for _, q := range b.queues {
		out = append(out, q.s)
	}
	return out
}

func newID() string {
	var x [8]byte
	_, _ = rand.Read(x[:])
	return hex.EncodeToString(x[:])
}

// Allowed reports whether a user may use the bot.
func (b *Bot) Allowed(platform, userID string) bool {
	return platform == "console" || b.allowed[PersonID(platform, userID)]
}

func (b *Bot) isStopped() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopped
}

// seen records an event that changes nothing stored and reports whether
// it was seen before. Events that store a message or a job record their
// key in the same transaction instead (see enqueue).
func (b *Bot) seen(ctx context.Context, in Incoming) (bool, error) {
	if in.EventID == "" {
		return false, nil
	}
	fresh, err := b.store.MarkEvent(ctx, in.Platform+":"+in.EventID, in.At)
	if err != nil {
		return false, fmt.Errorf("bot: dedupe event %s: %w", in.EventID, err)
	}
	if !fresh {
		b.duplicate(in)
	}
	return !fresh, nil
}

func (b *Bot) duplicate(in Incoming) {
	b.log.Info("duplicate event dropped", slog.String("platform", in.Platform), slog.String("event_id", in.EventID))
	b.cfg.Metrics.Event(in.Platform, "duplicate")
}

// Handle ingests one event: it drops duplicates, refuses unknown users,
// stores the message and queues a durable job. It returns quickly and
// never calls the model, so adapters can acknowledge the platform at once.
// An error means nothing was stored: the platform should deliver the
// event again.
func (b *Bot) Handle(ctx context.Context, in Incoming) error {
	if b.isStopped() {
		return ErrStopped
	}
	if in.At.IsZero() {
		in.At = b.cfg.Now()
	}
	if !b.allowedIn(in) {
		if dup, err := b.seen(ctx, in); err != nil || dup {
			return err
		}
		return b.refuse(ctx, in)
	}
	in = normalizeCommand(in)
	if strings.HasPrefix(in.Button, HomePrefix) {
		// The Home's settings need no Todoist: before the Connect gate.
		b.cfg.Metrics.Event(in.Platform, "button")
		return b.pressHome(ctx, in)
	}
	if handled, err := b.connectGate(ctx, in); handled || err != nil {
		return err
	}
	if in.Button != "" {
		b.cfg.Metrics.Event(in.Platform, "button")
		return b.press(ctx, in)
	}
	in, err := b.prepare(ctx, in)
	if err != nil {
		return fmt.Errorf("bot: read event: %w", err)
	}
	if in.Attachment != nil && in.Command == "" {
		if done, err := b.screenMedia(ctx, in); done || err != nil {
			return err
		}
		if in.Attachment.Kind == AttachImage && b.visionOff() {
			in.Attachment = nil // the caption alone
		}
		if in.Attachment != nil && in.Attachment.Kind == AttachImage && strings.TrimSpace(in.Text) == "" {
			in.Text = photoless
		}
	}
	c := b.command(in.Command)
	if in.Command == "" || (c != nil && c.Queued) {
		if in.Command == "" && strings.TrimSpace(in.Text) == "" && in.Attachment == nil {
			return nil
		}
		return b.enqueue(ctx, in)
	}
	if dup, err := b.seen(ctx, in); err != nil || dup {
		return err
	}
	b.cfg.Metrics.Event(in.Platform, "command")
	if c == nil {
		b.replyLater(ctx, in.Platform, reply(in, fmt.Sprintf("I don't know /%s. %s", in.Command, b.helpText(in.Platform, in.DM))))
		return nil
	}
	return c.handle(b, ctx, "", in)
}

// refuse answers a user who is not allowed and touches nothing else: in
// a direct chat once a day per person; in a shared chat once an hour per
// chat, whoever asks (300 strangers mentioning the bot in one group got
// 300 refusals posted there). The store remembers it across restarts.
// An event the platform shows as pending until answered
// (Incoming.AwaitsAnswer) is answered every time.
// Adapters hand over only what is addressed to the bot, so a stranger
// who does not address it gets nothing.
func (b *Bot) refuse(ctx context.Context, in Incoming) error {
	log := b.log.With(slog.String("platform", in.Platform), slog.String("chat_id", in.ChatID), slog.String("user_id", in.UserID))
	b.cfg.Metrics.Event(in.Platform, "refused")
	if in.Button != "" {
		b.answerButtonLater(ctx, in, "Sorry, you are not allowed to use this bot.")
		return nil
	}
	key := "refusal:" + PersonID(in.Platform, in.UserID) + ":" + in.At.UTC().Format(time.DateOnly)
	text := fmt.Sprintf("Sorry, I only work for the people my owner allowed. Your id is %s:%s; ask the owner to add it to TIDYBOT_ALLOWED_USERS.", in.Platform, in.UserID)
	if !in.DM {
		key = "refusal-chat:" + in.Platform + ":" + in.ChatID + ":" + in.At.UTC().Format("2006-01-02T15")
		text = "Sorry, I only work for the people my owner allowed (TIDYBOT_ALLOWED_USERS). Send me a direct message to learn your id."
		if !in.AwaitsAnswer {
			text += " (I say this here once an hour.)" // a pending request is answered each time
		}
	}
	first, err := b.store.MarkEvent(ctx, key, in.At)
	if err != nil {
		return fmt.Errorf("bot: remember refusal: %w", err)
	}
	if !first && !in.AwaitsAnswer {
		log.Info("refused unknown user again; not answered")
		return nil
	}
	log.Warn("refused unknown user")
	b.replyLater(ctx, in.Platform, reply(in, text))
	return nil
}

// enqueue stores the message, a durable job for it and its event key in
// one transaction: a crash or a failed write keeps all or none, so the
// platform's retry of an event that was not stored is not dropped as a
// duplicate.
func (b *Bot) enqueue(ctx context.Context, in Incoming) error {
	key := in.ThreadKey()
	var m *Message
	if a := in.Attachment; a != nil && a.Kind == AttachVoice && !in.Transcribed {
		in.Text = "" // the transcript is stored as the message once heard
	} else if in.Command == "" && in.Text != "" {
		m = &Message{ThreadKey: key, Role: RoleUser, Text: in.Text, At: in.At}
	}
	j := Job{ID: newID(), ThreadKey: key, Kind: JobIncoming, Incoming: in, Enqueued: b.cfg.Now()}
	c := Change{Thread: &Thread{Key: key, Platform: in.Platform, ChatID: in.ChatID, ThreadID: in.ThreadID}, Message: m, Job: &j}
	if in.EventID != "" {
		c.EventKey, c.EventAt = in.Platform+":"+in.EventID, in.At
	}
	if in.DM {
		// Where autopilot and the digest post to the person, recorded
		// with their message: no write of its own.
		c.Fields = conversationFields(in)
	}
	err := b.store.Commit(ctx, c)
	if errors.Is(err, ErrDuplicate) {
		b.duplicate(in)
		return nil
	}
	if err != nil {
		return fmt.Errorf("bot: store message and job for %s: %w", key, err)
	}
	switch {
	case in.Button != "":
	case in.Command != "":
		b.cfg.Metrics.Event(in.Platform, "command")
	default:
		b.cfg.Metrics.Event(in.Platform, "accepted")
	}
	b.ack(in)
	b.schedule(ctx, j)
	return nil
}

// WaitIdle blocks until no job is queued or running, no timer pass
// (RunTimers) is running and no reply is being posted (runs waiting for
// the user do not count), or ctx ends.
func (b *Bot) WaitIdle(ctx context.Context) error {
	for {
		for b.timerPasses.Load() > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("bot: wait for the timers: %w", ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
		if err := b.sched.waitIdle(ctx); err != nil {
			return err
		}
		senders := b.senders()
		for _, s := range senders {
			if err := s.WaitIdle(ctx); err != nil {
				return err
			}
		}
		if err := b.sched.waitIdle(ctx); err != nil {
			return err
		}
		quiet := true
		for _, s := range senders {
			quiet = quiet && s.Pending() == 0
		}
		if quiet {
			return nil
		}
	}
}

// Start recovers what a previous process left (runs that were working,
// queued jobs, answers and questions not yet posted) and starts the
// workers. It returns once recovery is scheduled. When ctx ends, intake
// and the handing out of jobs stop and runs are interrupted, as at Stop
// (queued jobs stay for the next start); Stop waits for them.
func (b *Bot) Start(ctx context.Context) error {
	b.prune(ctx)
	if b.feed != nil {
		return b.startShared(ctx)
	}
	runs, err := b.store.Runs(ctx, RunWorking, RunQueued)
	if err != nil {
		return fmt.Errorf("bot: list unfinished runs: %w", err)
	}
	jobs, err := b.store.Jobs(ctx)
	if err != nil {
		return fmt.Errorf("bot: list jobs: %w", err)
	}
	outbox, err := b.store.Outbox(ctx)
	if err != nil {
		return fmt.Errorf("bot: list undelivered messages: %w", err)
	}
	for _, j := range jobs {
		b.sched.add(j, false)
	}
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		b.log.Info("resuming run", slog.String("run_id", r.ID), slog.String("thread_key", r.ThreadKey))
		b.sched.add(resumeJob(r, b.cfg.Now()), true)
	}
	if err := b.startWorkers(ctx); err != nil {
		return err
	}
	if len(outbox) > 0 {
		b.log.Info("posting messages a previous process left unsent", slog.Int("count", len(outbox)))
		b.redeliver(ctx, "", outbox)
	}
	return nil
}

// startShared starts on a Shared store: what dead processes left in the
// outbox is posted, and the feeder leases conversations with work as
// jobs are committed (Listen) and at each sweep.
func (b *Bot) startShared(ctx context.Context) error {
	if err := b.startWorkers(ctx); err != nil {
		return err
	}
	b.feed.claimOutbox(ctx)
	b.feed.recover(context.WithoutCancel(ctx))
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return nil
	}
	listen, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.workLoops.Add(3)
	go b.feed.listen(listen)
	go b.feed.watchLeases()
	go func() {
		defer stop()
		b.feed.loop(context.WithoutCancel(ctx))
	}()
	b.feed.wake()
	return nil
}

// startWorkers starts the send queues, the workers and the prune loop.
func (b *Bot) startWorkers(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return ErrStopped
	}
	b.started = true
	for _, q := range b.queues {
		b.sendLoops.Add(1)
		go b.runSender(q.s)
	}
	// Jobs run on a context that ctx's end does not cancel: when ctx ends
	// (a signal), intake stops and runs are interrupted as by Stop, and a
	// job is never handed out only to fail on the cancelled context (its
	// user told something went wrong, its job deleted).
	work := context.WithoutCancel(ctx)
	for range b.cfg.Workers {
		b.workLoops.Add(1)
		go b.worker(work)
	}
	b.workLoops.Add(1)
	go func() {
		defer b.workLoops.Done()
		select {
		case <-ctx.Done():
			b.halt()
		case <-b.quit:
		}
	}()
	b.workLoops.Add(2)
	go b.pruneLoop(ctx)
	b.timerPasses.Add(1) // the start's repair and pass: timerLoop ends it
	go b.timerLoop(ctx)
	return nil
}

// halt stops intake and the handing out of jobs (queued ones stay stored
// for the next start) and interrupts the runs at their next checkpoint;
// it does not wait (Stop does).
func (b *Bot) halt() (runs []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopped {
		b.stopped = true
		close(b.quit)
		b.sched.stop()
	}
	for _, ar := range b.running {
		ar.cancel(ErrStopped)
		runs = append(runs, ar.runID)
	}
	return runs
}

// interrupt interrupts every run at its next checkpoint, with cause, and
// returns their ids.
func (b *Bot) interrupt(cause error) (runs []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ar := range b.running {
		ar.cancel(cause)
		runs = append(runs, ar.runID)
	}
	return runs
}

// Stop stops intake, interrupts runs at their next checkpoint (they stay
// resumable; a run that starts meanwhile is interrupted too), and waits
// for workers and send queues up to the grace period, logging what it
// waited for.
func (b *Bot) Stop() {
	began := time.Now()
	runs := b.halt()
	b.mu.Lock()
	sends := 0
	for _, q := range b.queues {
		sends += q.s.Pending()
	}
	b.mu.Unlock()
	running, queued := b.sched.inFlight()
	b.log.Info("shutting down: waiting for runs to reach a checkpoint and for queued sends",
		slog.Any("run_ids", runs), slog.Int("jobs_running", running), slog.Int("jobs_left_queued", queued),
		slog.Int("sends", sends), slog.Duration("grace", b.cfg.ShutdownGrace))
	grace := time.NewTimer(b.cfg.ShutdownGrace)
	defer grace.Stop()
	within := func(wg *sync.WaitGroup) bool {
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
			return true
		case <-grace.C:
			return false
		}
	}
	// Workers first: only they hand off run ends.
	workersDone := within(&b.workLoops) && within(&b.runTails)
	// The send queues stop after the workers, so that a run ending now
	// still posts its answer; what they cannot post stays in the outbox.
	b.mu.Lock()
	select {
	case <-b.sendQuit:
	default:
		close(b.sendQuit)
	}
	b.mu.Unlock()
	if workersDone && within(&b.sendLoops) {
		b.log.Info("shut down", slog.Duration("waited", time.Since(began)))
		return
	}
	b.mu.Lock()
	var left []string
	for _, ar := range b.running {
		left = append(left, ar.runID)
	}
	b.mu.Unlock()
	b.log.Warn("shutdown grace period over; runs left mid-step resume at next start, unsent answers are posted then",
		slog.Any("run_ids", left), slog.Duration("waited", time.Since(began)))
}

// prune forgets event ids older than DedupeFor, and messages, runs and
// journals older than Retention.
func (b *Bot) prune(ctx context.Context) {
	now := b.cfg.Now()
	if n, err := b.store.PruneEvents(ctx, now.Add(-b.cfg.DedupeFor)); err != nil {
		b.log.Error("prune events", slog.Any("err", err))
	} else if n > 0 {
		b.log.Info("pruned event ids", slog.Int("count", n))
	}
	n, err := b.store.Prune(ctx, now.Add(-b.cfg.Retention))
	if err != nil {
		b.log.Error("prune old data", slog.Any("err", err))
	} else if n != (Pruned{}) {
		b.log.Info("deleted data older than the retention period", slog.Duration("retention", b.cfg.Retention),
			slog.Int("messages", n.Messages), slog.Int("runs", n.Runs), slog.Int("audit_entries", n.Audit))
	}
}

func (b *Bot) pruneLoop(ctx context.Context) {
	defer b.workLoops.Done()
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.quit:
			return
		case <-t.C:
			b.prune(ctx)
		}
	}
}

func (b *Bot) worker(ctx context.Context) {
	defer b.workLoops.Done()
	for {
		j, ok := b.sched.next(ctx)
		if !ok {
			return
		}
		t := newTurn(func() { b.sched.done(j.ThreadKey) })
		t.key = j.ThreadKey
		b.process(withTurn(b.fence(ctx, j.ThreadKey), t), j)
		t.leave()
	}
}

// jobFailedText is what a person hears when their message could not be
// handled.
const jobFailedText = "Something went wrong on my side; the details are in the log. Please try again."

// process handles one job; errors are logged with the run id and the user
// hears a plain-words message.
func (b *Bot) process(ctx context.Context, j Job) {
	log := b.log.With(slog.String("job_id", j.ID), slog.String("thread_key", j.ThreadKey))
	in := j.Incoming
	var err error
	switch j.Kind {
	case JobResume:
		err = b.resumeRun(ctx, j.RunID, "", "")
	case JobAutopilot:
		err = b.autopilotRun(ctx, j)
	default:
		// A job is deleted once handled: when its turn is released, after
		// the end of the run it started is in the store; usually a save
		// of that run retired it already (Bot.commit), and nothing more
		// is written.
		deleteJob := func(id string) func() {
			return func() {
				if turnOf(ctx).isRetired(id) {
					return // with the run's save (see Bot.commit)
				}
				if err := b.store.DeleteJob(context.WithoutCancel(ctx), id); err != nil {
					log.Error("delete job", slog.Any("err", err))
				}
			}
		}
		t := turnOf(ctx)
		t.atRelease(deleteJob(j.ID))
		switch c := b.command(in.Command); {
		case c != nil && c.Queued:
			err = c.handle(b, ctx, j.ID, in)
		case in.Attachment != nil && in.Attachment.Kind == AttachVoice && !in.Transcribed:
			var next *Job
			if next, err = b.transcribe(ctx, j); next != nil {
				t.atRelease(deleteJob(next.ID))
				err = b.message(ctx, next.ID, next.Incoming)
			}
		default:
			err = b.message(ctx, j.ID, in)
		}
	}
	if err != nil && (b.fenced(err, log) || b.tryAgain(j, err, log)) {
		turnOf(ctx).fail() // the job stays stored
		return
	}
	if err == nil {
		b.forgetTries(j.ID)
	}
	if err != nil {
		log.Error("job failed", slog.Any("err", err))
		if j.Kind != JobAutopilot { // nobody asked: the log says it
			b.replyLater(ctx, in.Platform, reply(in, jobFailedText))
		}
	}
}

// jobTries is how often a process tries a job that fails before it
// gives up on it (see tryAgain).
const jobTries = 3

// tryAgain reports whether job j, whose handling failed with err (not
// fenced), stays stored to be tried again, saying nothing to the
// person yet: with a Shared store, whose failures are mostly a database
// out of reach for a moment (a cut link, a lease lost with its
// connection), until this process has tried it jobTries times; it is
// tried again here once retakeAfter has passed, or by the replica that
// leases its conversation next, sooner (this one releases the lease,
// having no other work there). A job that fails every time is given up
// as without a Shared store: logged, the person told, the job deleted
// (TestReplicasSurviveKills -replica-cut lost a message whose job had
// failed on a connection the cut closed).
func (b *Bot) tryAgain(j Job, err error, log *slog.Logger) bool {
	return b.triedAgain(j.ID, "job failed; it stays stored and runs again", err, log)
}

// forgetTries drops the failed tries of id counted by triedAgain (none
// without a Shared store).
func (b *Bot) forgetTries(id string) {
	if b.feed == nil {
		return
	}
	b.mu.Lock()
	delete(b.failures, id)
	b.mu.Unlock()
}

// triedAgain counts a failed try of id (a job, or a run's save) with a
// Shared store, logging what with err, and reports whether it is tried
// again: under jobTries tries in this process.
func (b *Bot) triedAgain(id, what string, err error, log *slog.Logger) bool {
	if b.feed == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures[id]++
	n := b.failures[id]
	if n >= jobTries {
		delete(b.failures, id)
		return false
	}
	log.Warn(what, slog.Int("tries", n), slog.Any("err", err))
	return true
}

// message handles a text message: the answer to a waiting run of this
// thread, or a new run.
func (b *Bot) message(ctx context.Context, jobID string, in Incoming) error {
	b.clipNote(ctx, in)
	// What a run's start reads is read at once (one round trip with a
	// StartReader store); only a new run with none waiting uses the rest.
	st, err := b.readStart(ctx, jobID, in)
	if err != nil {
		return err
	}
	if r := st.Waiting; r != nil {
		if r.Waiting.UserID != "" && r.Waiting.UserID != in.UserID && in.Button == "" {
			// Someone else spoke in the thread: that is a new request
			// (the waiting run, read just now, is dropped).
			return b.beginRun(ctx, jobID, in, in.Text, &st)
		}
		if a := in.Attachment; a != nil && a.Kind == AttachImage {
			// A photo is a new request: an answer is words (typed or
			// spoken), and the run asking could not see the image.
			return b.beginRun(ctx, jobID, in, in.Text, &st)
		}
		if in.Button == "" {
			// A press carries the question's own key (buttonAnswer); a
			// typed message answers only if sent after the question.
			var early bool
			if r, early, err = b.sentBefore(ctx, r, in); err != nil {
				return err
			} else if r == nil {
				// The question was dropped meanwhile (/cancel).
				return b.startRun(ctx, jobID, in, in.Text)
			} else if early {
				return b.early(ctx, r, in)
			}
		}
		answer := in.Text
		if in.Button != "" {
			// A press can come before the bot learnt the question's
			// message id (a quick tap): wait for it, so the buttons are
			// replaced by the choice.
			if r, err = b.questionPosted(ctx, r); err != nil {
				return err
			} else if r == nil {
				return nil // dropped meanwhile
			}
			if answer = buttonAnswer(r.Waiting, in.Button); answer == "" {
				return nil // a press for an earlier question
			}
		}
		if in.Button == "" && r.Waiting.Kind == "confirm" {
			answer = confirmAnswer(in.Text) // a yes only when it is one
		}
		b.clearButtons(ctx, r, answer)
		return b.resumeRun(ctx, r.ID, answer, jobID)
	}
	if in.Button != "" {
		return nil // a press for a question that is gone; already answered
	}
	return b.beginRun(ctx, jobID, in, in.Text, &st) // none waits: read above
}

func (b *Bot) waitingRun(ctx context.Context, threadKey string) (*Run, error) {
	r, err := b.store.WaitingRun(ctx, threadKey)
	if err != nil {
		return nil, fmt.Errorf("bot: find the waiting run of %s: %w", threadKey, err)
	}
	return r, nil
}

func reply(in Incoming, text string) Outgoing {
	return Outgoing{ChatID: in.ChatID, ThreadID: in.ThreadID, UserID: in.UserID, EventID: in.EventID, Text: text}
}

// replyLater queues a reply on the platform's send queue without
// waiting, so that Handle returns (and the platform is acknowledged) at
// once; a full queue drops it.
func (b *Bot) replyLater(_ context.Context, platform string, m Outgoing) {
	q := b.queue(platform)
	if q == nil {
		b.log.Error("send", slog.String("platform", platform), slog.String("err", "no such platform"))
		return
	}
	q.sendLater(m)
}

// send posts a message through the platform's send queue and waits,
// logging a failure: the chat cannot be told.
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

// help answers /help.
func (b *Bot) help(ctx context.Context, in Incoming) {
	b.replyLater(ctx, in.Platform, reply(in, b.helpText(in.Platform, in.DM)))
}

// helpText is the help, with each command of the bot's mode as it is
// typed on platform, in a direct chat (dm) or a shared one.
func (b *Bot) helpText(platform string, dm bool) string {
	c := b.namer(platform, dm)
	var sb strings.Builder
	sb.WriteString(`I manage your Todoist. Tell me what to do in plain words, for example "what's due today?" or "move everything about the birthday into one project".
Commands:`)
	for _, cmd := range Commands(b.cfg.Accounts != nil) {
		fmt.Fprintf(&sb, "\n%s: %s", c(cmd.Name), cmd.Help)
	}
	if len(b.cfg.ModelTiers) > 0 {
		fmt.Fprintf(&sb, "\nModels to choose from: %s (%s model NAME).", b.tierNames(), c("settings"))
	}
	if sc, ok := b.sharedChats(platform); ok && !dm {
		sb.WriteString("\n" + sc.SharedChatHelp())
	} else {
		sb.WriteString("\n" + `In a direct chat the word alone works too ("undo").`)
	}
	return sb.String()
}

// namer spells the bot's commands as typed on platform, in a direct
// chat (dm) or a shared one.
func (b *Bot) namer(platform string, dm bool) func(name string) string {
	if sc, ok := b.sharedChats(platform); ok && !dm {
		return sc.SharedCommandName
	}
	return func(name string) string { return b.commandName(platform, name) }
}

// sharedChats returns platform as a SharedChats, if it is one.
func (b *Bot) sharedChats(platform string) (SharedChats, bool) {
	if q := b.queue(platform); q != nil {
		sc, ok := q.p.(SharedChats)
		return sc, ok
	}
	return nil, false
}

// commandName is what a user types on platform for the bot's command
// name: the platform's own spelling (CommandNamer), else "/name".
func (b *Bot) commandName(platform, name string) string {
	if q := b.queue(platform); q != nil {
		if n, ok := q.p.(CommandNamer); ok {
			return n.CommandName(name)
		}
	}
	return "/" + name
}
