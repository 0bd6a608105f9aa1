// Package agent is tidybot's ReAct engine: it asks a model for actions,
// validates them against schemas generated from Go structs, runs them
// against a to-do service, feeds observations back, and survives bad model
// output, service errors, interrupts and restarts.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ConfirmPolicy says which writes wait for the user's yes.
type ConfirmPolicy string

// Confirmation policies.
const (
	ConfirmDestructive ConfirmPolicy = "destructive" // delete_tasks
	ConfirmWrites      ConfirmPolicy = "writes"      // every write
	ConfirmNever       ConfirmPolicy = "never"
)

// Config tunes the engine. Zero values take the defaults below.
type Config struct {
	Protocol Protocol
	// MaxSteps is the number of model calls per run (default 20).
	MaxSteps int
	// MaxTokens is the response limit of one model call (default
	// DefaultMaxTokens).
	MaxTokens int
	// TokenBudget is the prompt plus completion tokens of one run
	// (default 200,000). It is checked before each call with the
	// request's tokens plus its MaxTokens: PromptBound when that fits,
	// else the count of CountTokens.
	TokenBudget int
	// CountTokens counts the prompt tokens of a request (default: a
	// local estimate of four bytes a token). Its count must not exceed
	// PromptBound, as no byte-level tokenizer's does: the engine skips
	// the count when the bound shows that a request fits.
	CountTokens func(Request) int
	// HistoryTokens bounds the earlier messages given to the model
	// (default 6,000 tokens): the newest that fit are kept, the one that
	// crosses the bound is clipped.
	HistoryTokens int
	Temperature   float32
	// Timeout is the working time of one run (default 5m).
	Timeout time.Duration
	Confirm ConfirmPolicy
	// Strict sends OpenAI-strict schemas (default true unless NotStrict).
	NotStrict bool
	// SlowAfter is how long a model or Todoist call may take before the
	// user hears about it (default 10s).
	SlowAfter time.Duration
	// Now returns the current time (default time.Now).
	Now func() time.Time
	// Redact hides configured secrets in observations, in the
	// transcript before it is saved or sent to the model, and in the
	// outcome (nil: nothing is hidden).
	Redact *Redactor
}

func (c *Config) defaults() {
	if c.Protocol == "" {
		c.Protocol = ProtocolTools
	}
	if c.MaxSteps <= 0 {
		c.MaxSteps = 20
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.TokenBudget <= 0 {
		c.TokenBudget = 200_000
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Minute
	}
	if c.Confirm == "" {
		c.Confirm = ConfirmDestructive
	}
	if c.SlowAfter <= 0 {
		c.SlowAfter = 10 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.CountTokens == nil {
		c.CountTokens = estimateTokens
	}
	if c.HistoryTokens <= 0 {
		c.HistoryTokens = 6000
	}
}

// estimateTokens estimates a request's prompt tokens at four bytes a token
// with a few tokens of overhead per message and tool, for an engine given
// no tokenizer.
func estimateTokens(req Request) int {
	n := 3
	for _, m := range req.Messages {
		n += 4 + (len(m.Content)+3)/4
		for _, tc := range m.ToolCalls {
			n += 3 + (len(tc.Name)+len(tc.Arguments)+3)/4
		}
	}
	for _, t := range req.Tools {
		n += 8 + (len(t.Name)+len(t.Description)+len(t.Parameters)+3)/4
	}
	if req.Format != nil {
		n += (len(req.Format.Schema) + 3) / 4
	}
	return n
}

// maxRepairs is how many unusable replies in a row a step may have.
const maxRepairs = 2

// minAnswerTokens is the shortest answer limit a call is made with when
// the token budget is nearly spent.
const minAnswerTokens = 256

// writeTimeout bounds one step's writes, which a cancel does not cut
// short; it is longer than a Todoist client's retries.
const writeTimeout = 2 * time.Minute

// Engine runs agent runs. It is safe for concurrent use; each run has its
// own Transcript.
type Engine struct {
	model Model
	tasks Tasks
	cfg   Config
	// incremental says tasks' Snapshots after the first are incremental
	// (IncrementalSnapshots).
	incremental bool
}

// New returns an engine acting on tasks through model.
func New(model Model, tasks Tasks, cfg Config) *Engine {
	cfg.defaults()
	inc, ok := tasks.(IncrementalSnapshots)
	return &Engine{model: timedModel{model}, tasks: newTimedTasks(tasks), cfg: cfg, incremental: ok && inc.IncrementalSnapshots()}
}

// EventKind says what an Event reports.
type EventKind string

// Event kinds.
const (
	// EventThinking: a model call started.
	EventThinking EventKind = "thinking"
	// EventAction: an action finished; Summary says what it did.
	EventAction EventKind = "action"
	// EventNote: something the user should know (a slow service).
	EventNote EventKind = "note"
)

// Event is progress a chat can show.
type Event struct {
	Kind    EventKind
	Step    int
	Action  string
	Summary string
}

// Hooks connect a run to its caller.
type Hooks struct {
	// Save is called with the transcript after every step and before any
	// write is sent. An error ends the run.
	Save func(ctx context.Context, t *Transcript) error
	// Observe hears progress. It must not block.
	Observe func(Event)
	// Answer, when set, hears the final answer as the model writes it:
	// the whole text so far, each time it grows (the model is asked to
	// stream). A reply whose answer is then refused (next to a failed
	// write), or a call made again, starts over: a text that does not
	// extend the last one replaces it. The answer in the Outcome is
	// what counts. It must not block.
	Answer func(text string)
}

// HistoryMessage is an earlier message of the conversation.
type HistoryMessage struct {
	Role Role
	Text string
}

// Input starts a run.
type Input struct {
	Instruction string
	History     []HistoryMessage
	// Images go to the model with the instruction (a photo the user sent).
	Images []Image
	// Confirm, when set, is this run's confirmation policy (the person's
	// /settings confirm), instead of Config.Confirm; a resumed run keeps
	// it.
	Confirm ConfirmPolicy
	// TimeZone, when set, is the IANA zone the run's "today" is in (the
	// person's /settings timezone), instead of the to-do service's.
	TimeZone string
	// Language, when set, is the language the run answers in (the
	// person's /settings language): a name or tag such as "Dutch" or
	// "nl". Empty: the language the person writes in.
	Language string
	// Model, when set, is the model this run asks (the person's
	// /settings model tier), sent as Request.Model on every call; a
	// resumed run keeps it. Empty: the model's own default.
	Model string
	// Overview says the request is the inbox tidy (/tidy-inbox), which
	// certainly needs the projects and the inbox: they are read before
	// the first model call and put in the first prompt as get_overview's
	// observation, instead of spending a model call to ask for them. In
	// the tools protocol the model is then offered only TidyActions: the
	// tools it has no use for cost every call about 800 prompt tokens.
	Overview bool
	// Allow, when set, is the only actions the run may take (by name):
	// the model is offered only these tools, and a call of any other
	// action is refused without running, whatever the model was told
	// (autopilot's runs, which nobody watches, may not complete, delete
	// or comment). Empty: every action.
	Allow []string
	// Touch, when set, is the only existing tasks the run's writes may
	// change (by id): a move or update of any other task is refused
	// without running. Autopilot files the new tasks and nothing else.
	Touch []string
	// Policy is the kind of run, whose Policy every call is checked
	// against (PolicyAutopilot, …); a resumed run keeps it. Empty: Touch
	// set is autopilot, Overview a command, else a person's message.
	Policy PolicyName
}

// Outcome is how Start or Resume left the run.
type Outcome struct {
	Status Status
	// Answer is the final answer, the failure or the partial answer.
	Answer string
	// Question and Options are set while asking; Question and Label (the
	// confirming button's text) while confirming.
	Question string
	Options  []string
	Label    string
	// Transcript is the run's state, to save and to resume from.
	Transcript *Transcript
	// Err is the internal cause of a failure, for logs only.
	Err error
}

// Start begins a run.
func (e *Engine) Start(ctx context.Context, in Input, h Hooks) Outcome {
	tr := &Transcript{V: TranscriptVersion, Protocol: e.cfg.Protocol, Instruction: in.Instruction, Status: StatusInterrupted, Allow: in.Allow, Touch: in.Touch, Policy: in.Policy}
	if tr.Policy == "" {
		tr.Policy = inferPolicy(in.Touch, nil, in.Overview)
	}
	if tr.Policy == PolicyCommand && e.cfg.Protocol == ProtocolTools && len(in.Allow) == 0 {
		tr.Actions = TidyActions // the command declares them; a run with its own Allow is offered those
	}
	tr.Known.reserve(in.History) // before any alias is given
	r := &runner{e: e, tr: tr, h: h}
	ctx = withSpans(ctx, tr, e.cfg.Now)
	var pre readResult
	if in.Overview {
		// Read first: the read may also tell the user's time zone, which
		// dates the prompt without a request of its own.
		pre = r.prefetch(ctx)
	}
	// The system prompt and the tool list are the stable prefix of every
	// request; what changes (the date, the history) comes after.
	// The prompt, the date, the language, the history and the
	// instruction, then room for the model's first reply and what it
	// asks for (most runs end there).
	tr.Messages = make([]Message, 0, 3+len(in.History)+1+2)
	tr.Messages = append(tr.Messages, Message{Role: RoleSystem, Content: SystemPrompt(e.cfg.Protocol)})
	tr.Confirm, tr.TimeZone, tr.Model, tr.Language = in.Confirm, in.TimeZone, in.Model, in.Language
	tr.Messages = append(tr.Messages, Message{Role: RoleSystem, Content: TodayMessage(r.now(ctx))})
	if in.Language != "" {
		tr.Messages = append(tr.Messages, Message{Role: RoleSystem, Content: LanguageMessage(in.Language)})
	}
	tr.Messages = append(tr.Messages, e.history(in.History)...)
	tr.Messages = append(tr.Messages, Message{Role: RoleUser, Content: in.Instruction, Images: in.Images})
	if in.Overview {
		if pre.Fatal != nil {
			return *r.fail(ctx, pre.Fatal)
		}
		if !strings.HasPrefix(pre.Obs, "Error:") {
			r.seed(ActGetOverview, "I read the projects and the inbox first.", pre)
		}
	}
	return r.run(ctx)
}

// TidyActions are the actions an inbox tidy is offered (Input.Overview):
// it reads, files tasks into projects and sections (found or created),
// asks and answers; it adds, changes, completes, deletes and comments on
// nothing, so an instruction planted in a task cannot make it.
var TidyActions = []string{
	ActGetOverview, ActGetProjects, ActGetInboxTasks, ActGetTasks, ActGetSections,
	ActCreateProject, ActMoveTasks, ActCreateSection,
	ActAskUser, ActFinalAnswer, ActFailTask,
}

// offered reports whether the run offers the action name.
func (r *runner) offered(name string) bool {
	return len(r.tr.Actions) == 0 || slices.Contains(r.tr.Actions, name)
}

// prefetchID is the call id of a read made before the first model call.
const prefetchID = "prefetch_0"

// prefetch reads the overview for the first prompt, within the run's
// timeout.
func (r *runner) prefetch(ctx context.Context) readResult {
	ctx, cancel := context.WithTimeout(ctx, r.e.cfg.Timeout)
	defer cancel()
	var res readResult
	_ = r.slow(ctx, "Todoist is slow to answer; still trying…", func() error {
		res = (&GetOverviewArgs{}).read(ctx, r)
		return nil
	})
	return res
}

// seed puts a read made before the first model call into the
// conversation as if the model had asked for it: an assistant message
// calling it, then its observation.
func (r *runner) seed(name, thought string, res readResult) {
	msg := Message{Role: RoleAssistant}
	if r.tr.Protocol == ProtocolTools {
		msg.ToolCalls = []ToolCall{{ID: prefetchID, Name: name, Arguments: "{}"}}
	} else {
		b, _ := json.Marshal(map[string]any{"thought": thought, "action": map[string]string{"type": name}})
		msg.Content = string(b)
	}
	r.tr.Messages = append(r.tr.Messages, msg)
	r.readResult(prefetchID, res)
	r.observe(Event{Kind: EventAction, Action: name, Summary: res.Summary})
}

// minHistoryClip is the fewest tokens worth keeping of a clipped message.
const minHistoryClip = 100

// history turns earlier messages into model messages, keeping the newest
// that fit in cfg.HistoryTokens and clipping the one that crosses it.
func (e *Engine) history(hist []HistoryMessage) []Message {
	msgs := make([]Message, 0, len(hist))
	bound := 0
	for _, h := range hist {
		if h.Role == RoleUser || h.Role == RoleAssistant {
			m := Message{Role: h.Role, Content: h.Text}
			msgs = append(msgs, m)
			bound += PromptBound(Request{Messages: []Message{m}})
		}
	}
	left := e.cfg.HistoryTokens
	if bound <= left {
		// Even the byte bound fits (a short history, the usual case):
		// every message fits whatever its count, so none is counted and
		// the tokenizer is neither run nor loaded.
		return msgs
	}
	var out []Message
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		n := e.cfg.CountTokens(Request{Messages: []Message{m}})
		if n <= left {
			left -= n
			out = append(out, m)
			continue
		}
		if left >= minHistoryClip {
			// Clip in proportion, then shrink until it fits.
			text, size := m.Content, len(m.Content)*left/n
			for {
				m.Content = clip(text, size)
				if e.cfg.CountTokens(Request{Messages: []Message{m}}) <= left || size == 0 {
					break
				}
				size = size * 9 / 10
			}
			out = append(out, m)
		}
		break
	}
	slices.Reverse(out)
	return out
}

// Resume continues a run from its transcript. answer is the user's reply
// when the run waits for one (a confirmation takes "yes" or "no"); a run
// that was interrupted resumes with an empty answer, re-sending a write it
// was sending with the same uuids.
func (e *Engine) Resume(ctx context.Context, tr *Transcript, answer string, h Hooks) Outcome {
	r := &runner{e: e, tr: tr, h: h}
	if tr.Status.Final() {
		return *r.outcome()
	}
	if tr.Wait != nil {
		answer = strings.TrimSpace(answer)
		if answer == "" {
			return *r.outcome()
		}
		waited(tr, e.cfg.Now())
		r.answer(answer)
	}
	ctx = withSpans(ctx, tr, e.cfg.Now)
	r.redate(ctx)
	// Time has passed (a wait for the user, a restart): what the run read
	// may be out of date, so unknown ids are looked up again.
	tr.Known.stale()
	return r.run(ctx)
}

// runner is one Start or Resume of a run.
type runner struct {
	e  *Engine
	tr *Transcript
	h  Hooks
	// unsaved is set while the last reply is not saved, left to the
	// save of its first write (writesFirst): drain saves it when it
	// ends without one.
	unsaved bool
	// mu protects tr.Known while reads run concurrently.
	mu sync.Mutex
	// answering is set once a model call's reply arrives (text or a
	// call's arguments, with Hooks.Answer set), until the call is made
	// again (Delta.Reset): no "slow" note then.
	answering atomic.Bool
	// labels are the account's label names, lower-cased, once read for
	// a policy that uses existing labels only (existingLabels); r.mu
	// protects them.
	labels map[string]bool
	// redacted is what redact last redacted: the number of messages
	// (none before the first), with the Redactor's secrets of
	// generation gen.
	redacted struct {
		gen      uint64
		messages int
	}
}

var errRunTimeout = errors.New("run timed out")

func (r *runner) observe(ev Event) {
	if r.h.Observe != nil {
		r.h.Observe(ev)
	}
}

// redact redacts the transcript (Redactor.Transcript) before it is sent
// or saved. The messages it redacted last time are skipped while the
// secrets are the same: messages are only appended (the date of a resumed
// run is set before its first redaction), so each is checked once a run,
// not at each of its model calls and saves.
func (r *runner) redact() {
	red := r.e.cfg.Redact
	gen, from := red.generation(), 0
	if r.redacted.gen == gen && r.redacted.messages <= len(r.tr.Messages) {
		from = r.redacted.messages
	}
	red.transcriptFrom(r.tr, from)
	r.redacted.gen, r.redacted.messages = gen, len(r.tr.Messages)
}

func (r *runner) save(ctx context.Context) error {
	r.redact()
	if r.h.Save == nil {
		return nil
	}
	if err := r.h.Save(context.WithoutCancel(ctx), r.tr); err != nil {
		return fmt.Errorf("save transcript: %w", err)
	}
	r.unsaved = false
	return nil
}

// answer applies the user's reply to what the run waits for.
func (r *runner) answer(text string) {
	w := r.tr.Wait
	r.tr.Wait = nil
	// An answer is progress: loop detection counts from here, so
	// read → ask → read → ask → read goes on.
	r.tr.Seen = nil
	switch w.Kind {
	case "ask":
		r.result(w.CallID, "The user answered: "+text)
		r.popCall(w.CallID)
		r.skipRest(0, notRunAfter("a question"))
	case "confirm":
		if isYes(text) {
			keep := 0
			if len(r.tr.Calls) > 0 && r.tr.Calls[0].ID == w.CallID {
				r.tr.Calls[0].Confirmed = true
				keep = 1
			}
			r.skipRest(keep, notRunAfter("a confirmation"))
			return
		}
		msg := "The user said no; nothing was done. Do not retry it."
		if !isNo(text) {
			msg = "The user did not confirm; nothing was done. They said: " + text
		}
		r.result(w.CallID, msg)
		r.popCall(w.CallID)
		r.skipRest(0, notRunAfter("a confirmation"))
	}
}

// skipRest answers the queued calls after the first keep as not run: a
// reply is one plan, made before the user answered, so what it meant to
// do after a question or a confirmation is planned again with the
// answer. A final answer among them is not delivered. Transcripts saved
// with calls queued after a wait (before this rule) resume the same way.
func (r *runner) skipRest(keep int, obs string) {
	if keep > len(r.tr.Calls) {
		keep = len(r.tr.Calls)
	}
	for _, c := range r.tr.Calls[keep:] {
		r.result(c.ID, obs)
	}
	r.tr.Calls = r.tr.Calls[:keep]
}

// notRunAfter is the observation of a call skipped after a wait.
func notRunAfter(wait string) string {
	return "Not run: it came after " + wait + " in the same reply. Plan again with the user's answer."
}

func isYes(s string) bool {
	switch strings.ToLower(strings.Trim(strings.TrimSpace(s), ".!")) {
	case "yes", "y", "ok", "okay", "sure", "go", "go ahead", "do it", "confirm", "yes please", "1":
		return true
	}
	return false // "yesterday's list is fine" is not a yes
}

func isNo(s string) bool {
	switch strings.ToLower(strings.Trim(strings.TrimSpace(s), ".!")) {
	case "no", "n", "cancel", "stop", "don't", "dont", "nope", "2":
		return true
	}
	return false
}

func (r *runner) popCall(id string) {
	if len(r.tr.Calls) > 0 && r.tr.Calls[0].ID == id {
		r.tr.Calls = r.tr.Calls[1:]
	}
}

// readResult appends a read's observation to the conversation; an
// inbox listing it shows is then the one a filing plan stands for.
func (r *runner) readResult(callID string, res readResult) {
	if res.Listed != nil {
		r.tr.Known.Listed = res.Listed
	}
	r.result(callID, res.Obs)
}

// result appends an action's observation to the conversation.
func (r *runner) result(callID, obs string) {
	obs = r.tr.Known.shorten(r.e.cfg.Redact.String(obs))
	if r.tr.Protocol == ProtocolTools {
		r.tr.Messages = append(r.tr.Messages, Message{Role: RoleTool, ToolCallID: callID, Content: obs})
		return
	}
	r.tr.Messages = append(r.tr.Messages, Message{Role: RoleUser, Content: "Observation: " + obs})
}

// outcome describes the run as it stands.
func (r *runner) outcome() *Outcome {
	o := &Outcome{Status: r.tr.Status, Answer: r.tr.Answer, Transcript: r.tr}
	if w := r.tr.Wait; w != nil {
		o.Question, o.Options, o.Label = w.Question, w.Options, w.Label
	}
	return o
}

// end finishes the run, or suspends it, with a status and answer.
func (r *runner) end(ctx context.Context, st Status, answer string, cause error) *Outcome {
	k := &r.tr.Known
	r.tr.Status, r.tr.Answer = st, k.named(answer)
	if w := r.tr.Wait; w != nil {
		w.Question, w.Label = k.named(w.Question), k.named(w.Label)
		for i, o := range w.Options {
			w.Options[i] = k.named(o)
		}
	}
	// save redacts the transcript, the answer and question included, so
	// the outcome is built after it.
	err := r.save(ctx)
	o := r.outcome()
	o.Err = cause
	if err != nil && o.Err == nil {
		o.Err = err
	}
	return o
}

// stop ends the run at a limit with an honest partial answer.
func (r *runner) stop(ctx context.Context, reason string) *Outcome {
	return r.end(ctx, StatusStopped, "I stopped before finishing: "+reason+".\n"+r.tr.DoneList(), nil)
}

// fail ends the run because of err. It is the one place that turns an
// error into the user's words (see userMessage); err itself is for logs.
func (r *runner) fail(ctx context.Context, err error) *Outcome {
	return r.end(ctx, StatusFailed, "I couldn't finish: "+userMessage(err)+".\n"+r.tr.DoneList(), err)
}

// userMessage is what a person may read of err: the message of its
// *Error, written to be shown; anything else stays in the log.
func userMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	return "something went wrong on my side"
}

// errSaving is the failure to save the transcript.
func errSaving(err error) error {
	return &Error{Code: ErrServer, Message: "I could not save my progress", Err: err}
}

// interrupted ends this segment of the run because ctx ended: a timeout
// ends the run; a cancel or shutdown leaves it resumable.
func (r *runner) interrupted(ctx context.Context) *Outcome {
	if errors.Is(context.Cause(ctx), errRunTimeout) {
		return r.stop(ctx, "the run took longer than "+r.e.cfg.Timeout.String())
	}
	r.tr.Status = StatusInterrupted
	o := r.outcome()
	o.Err = ctx.Err()
	return o
}

// run drives the loop until the run ends, waits, or ctx ends.
func (r *runner) run(parent context.Context) Outcome {
	cfg := &r.e.cfg
	started := cfg.Now()
	defer func() { r.tr.Elapsed += cfg.Now().Sub(started) }()
	left := cfg.Timeout - r.tr.Elapsed
	if left <= 0 {
		return *r.stop(parent, "the run took longer than "+cfg.Timeout.String())
	}
	ctx, cancel := context.WithTimeoutCause(parent, left, errRunTimeout)
	defer cancel()
	r.tr.Status = StatusInterrupted // until it ends or waits
	return *r.loop(ctx)
}

// loop alternates draining the last reply's actions and asking the model
// for more, until an outcome.
func (r *runner) loop(ctx context.Context) *Outcome {
	cfg := &r.e.cfg
	if r.tr.Pending != nil {
		if o := r.send(ctx); o != nil {
			return o
		}
	}
	for {
		if o := r.drain(ctx); o != nil {
			return o
		}
		if ctx.Err() != nil {
			return r.interrupted(ctx)
		}
		if r.unsaved {
			// Its write was refused before it was planned (not
			// offered, not allowed): the reply is saved before the
			// next model call all the same.
			if err := r.save(ctx); err != nil {
				return r.fail(ctx, errSaving(err))
			}
		}
		if r.tr.Steps >= cfg.MaxSteps {
			return r.stop(ctx, fmt.Sprintf("I reached the limit of %d steps", cfg.MaxSteps))
		}
		if o := r.step(ctx); o != nil {
			return o
		}
		if r.writesFirst() {
			r.unsaved = true
		}
		if r.controlsOnly() || r.unsaved {
			// An answer, a question or giving up touches nothing
			// outside: the run's end saves the transcript with the
			// run's state in one transaction, and drain saves after a
			// control that does not end the run (a refused answer). A
			// reply that begins with a write is saved with that
			// write pending, before it is sent (drain's write), or
			// with the run's end when it waits for a yes: nothing
			// leaves before then but reads. A crash before that costs
			// the model call again, as one during the call does. (A
			// run that answers at once is one write, not two; one
			// that writes, one less.)
			continue
		}
		if err := r.save(ctx); err != nil {
			return r.fail(ctx, errSaving(err))
		}
	}
}

// writesFirst reports whether the last reply's first queued call is a
// write: drain saves the run with it pending before anything is sent
// (see write), so a save of the reply before it would be a second one
// with nothing done outside in between.
func (r *runner) writesFirst() bool {
	if len(r.tr.Calls) == 0 {
		return false
	}
	a, ok := decode(r.tr.Calls[0])
	if !ok {
		return false
	}
	_, w := a.(writer)
	return w
}

// controlsOnly reports whether the last reply queued controls only
// (final_answer, fail_task, ask_user) and at least one.
func (r *runner) controlsOnly() bool {
	for _, c := range r.tr.Calls {
		d, ok := actionByName(c.Name) // by type, as ends: no arguments decoded
		if !ok {
			return false
		}
		if _, ctl := d.New().(controller); !ctl {
			return false
		}
	}
	return len(r.tr.Calls) > 0
}

// request is the next model call.
func (r *runner) request() Request {
	cfg := &r.e.cfg
	r.redact() // the instruction and history too
	req := Request{Model: r.tr.Model, Messages: r.tr.Messages, MaxTokens: cfg.MaxTokens, Temperature: cfg.Temperature}
	strict := !cfg.NotStrict
	if r.tr.Protocol == ProtocolTools {
		req.Tools = r.allowedTools(tools(strict, r.tr.Actions))
		req.ToolChoice = "required"
		req.ParallelToolCalls = true
	} else {
		req.Format = &ResponseFormat{Kind: FormatJSONSchema, Name: "react_step", Schema: EnvelopeSchema(), Strict: strict}
	}
	return req
}

// step makes one model call and queues the actions it asks for. It
// returns nil to go on.
func (r *runner) step(ctx context.Context) *Outcome {
	cfg := &r.e.cfg
	req := r.request()
	// The budget is checked before the call: the prompt as counted plus
	// the longest answer allowed must fit in what is left. The answer may
	// be shortened to fit, but not below a useful length.
	left := cfg.TokenBudget - r.tr.Usage.Total() - PromptBound(req)
	if left < req.MaxTokens {
		// Counting tokens costs more CPU than the rest of a step (a
		// tokenizer over the whole prompt); the bound, never below the
		// count, settles most calls, which fit with room to spare.
		// Only a call near the budget, whose answer may have to be
		// shortened, needs the count.
		left = cfg.TokenBudget - r.tr.Usage.Total() - cfg.CountTokens(req)
	}
	if left < min(req.MaxTokens, minAnswerTokens) {
		return r.stop(ctx, fmt.Sprintf("the next step would have gone over this run's budget of %d tokens", cfg.TokenBudget))
	}
	req.MaxTokens = min(req.MaxTokens, left)
	var as *answerStream
	if r.h.Answer != nil {
		sn := &streamNamer{k: &r.tr.Known}
		as = newAnswerStream(r.tr.Protocol == ProtocolTools, func(text string) {
			r.h.Answer(sn.name(text)) // as end shows it (known.named)
		})
		req.Stream = func(d Delta) {
			// A reply arriving is no silence, even where its answer is
			// held until the reply is whole (a tools reply).
			switch {
			case d.Reset: // the call is made again: silent until it replies
				r.answering.Store(false)
			case d.Content != "" || d.Arguments != "":
				r.answering.Store(true)
			}
			as.add(d)
		}
		defer r.answering.Store(false)
	}
	r.observe(Event{Kind: EventThinking, Step: r.tr.Steps + 1, Summary: "🤔 Thinking…"})
	var resp Response
	err := r.slow(ctx, "The model is slow to answer; still waiting…", func() error {
		var err error
		resp, err = r.e.model.Complete(ctx, req)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return r.interrupted(ctx)
		}
		return r.fail(ctx, modelError(err))
	}
	if as != nil {
		as.end(resp.ToolCalls)
	}
	r.tr.Steps++
	u := resp.Usage
	u.Calls = 1
	r.tr.Usage.Add(u)

	problems := r.queue(resp)
	// A call that could not be used counts as failed, so a final answer
	// in the same reply is not accepted: it would claim what was not done.
	r.tr.Failures = len(problems)
	if len(problems) > 0 && len(r.tr.Calls) == 0 {
		r.tr.Repairs++
		if r.tr.Repairs > maxRepairs {
			return r.fail(ctx, &Error{Code: ErrInvalid,
				Message: "the model kept replying in a form I could not use (" + clip(problems[0].Problem, 200) + ")",
				Err:     fmt.Errorf("unusable model reply: %s", problems[0].Problem)})
		}
		return nil
	}
	r.tr.Repairs = 0
	return nil
}

// modelError words a failed model call for the user.
func modelError(err error) error {
	msg := "the model service is not answering"
	switch ErrorCodeOf(err) {
	case "":
	case ErrUnreachable: // its message names the service and the setting
		msg = ErrorMessageOf(err)
	default:
		msg = "the model service said: " + ErrorMessageOf(err)
	}
	return &Error{Code: ErrorCodeOf(err), Message: msg, Err: fmt.Errorf("model call: %w", err)}
}
