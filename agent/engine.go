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
	"strings"
	"sync"
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
	// (default 200,000).
	TokenBudget int
	Temperature float32
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
}

// maxRepairs is how many unusable replies in a row a step may have.
const maxRepairs = 2

// Engine runs agent runs. It is safe for concurrent use; each run has its
// own Transcript.
type Engine struct {
	model Model
	tasks Tasks
	cfg   Config
}

// New returns an engine acting on tasks through model.
func New(model Model, tasks Tasks, cfg Config) *Engine {
	cfg.defaults()
	return &Engine{model: model, tasks: tasks, cfg: cfg}
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
	tr := &Transcript{V: TranscriptVersion, Protocol: e.cfg.Protocol, Instruction: in.Instruction, Status: StatusInterrupted}
	tr.Messages = append(tr.Messages, Message{Role: RoleSystem, Content: SystemPrompt(e.cfg.Protocol, e.now(ctx))})
	for _, m := range in.History {
		if m.Role == RoleUser || m.Role == RoleAssistant {
			tr.Messages = append(tr.Messages, Message{Role: m.Role, Content: m.Text})
		}
	}
	tr.Messages = append(tr.Messages, Message{Role: RoleUser, Content: in.Instruction})
	r := &runner{e: e, tr: tr, h: h}
	return r.run(ctx)
}

// Resume continues a run from its transcript. answer is the user's reply
// when the run waits for one (a confirmation takes "yes" or "no"); a run
// that was interrupted resumes with an empty answer, re-sending a write it
// was sending with the same uuids.
func (e *Engine) Resume(ctx context.Context, tr *Transcript, answer string, h Hooks) Outcome {
	r := &runner{e: e, tr: tr, h: h}
	if tr.Status.Final() {
		return r.outcome()
	}
	if tr.Wait != nil {
		answer = strings.TrimSpace(answer)
		if answer == "" {
			return r.outcome()
		}
		r.answer(answer)
	}
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
	// mu protects tr.Known while reads run concurrently.
	mu sync.Mutex
}

var errRunTimeout = errors.New("run timed out")

func (r *runner) observe(ev Event) {
	if r.h.Observe != nil {
		r.h.Observe(ev)
	}
}

func (r *runner) save(ctx context.Context) error {
	r.e.cfg.Redact.Transcript(r.tr)
	if r.h.Save == nil {
		return nil
	}
	if err := r.h.Save(context.WithoutCancel(ctx), r.tr); err != nil {
		return fmt.Errorf("save transcript: %w", err)
	}
	return nil
}

// answer applies the user's reply to what the run waits for.
func (r *runner) answer(text string) {
	w := r.tr.Wait
	r.tr.Wait = nil
	switch w.Kind {
	case "ask":
		r.result(w.CallID, "The user answered: "+text)
		r.popCall(w.CallID)
	case "confirm":
		if isYes(text) {
			if len(r.tr.Calls) > 0 && r.tr.Calls[0].ID == w.CallID {
				r.tr.Calls[0].Confirmed = true
			}
			return
		}
		msg := "The user said no; nothing was done. Do not retry it."
		if !isNo(text) {
			msg = "The user did not confirm; nothing was done. They said: " + text
		}
		r.result(w.CallID, msg)
		r.popCall(w.CallID)
	}
}

func isYes(s string) bool {
	switch strings.ToLower(strings.Trim(strings.TrimSpace(s), ".!")) {
	case "yes", "y", "ok", "okay", "sure", "go", "go ahead", "do it", "confirm", "yes please", "1":
		return true
	}
	return strings.HasPrefix(strings.ToLower(s), "yes")
}

func isNo(s string) bool {
	switch strings.ToLower(strings.Trim(strings.TrimSpace(s), ".!")) {
	case "no", "n", "cancel", "stop", "don't", "dont", "nope", "2":
		return true
	}
	return strings.HasPrefix(strings.ToLower(s), "no")
}

func (r *runner) popCall(id string) {
	if len(r.tr.Calls) > 0 && r.tr.Calls[0].ID == id {
		r.tr.Calls = r.tr.Calls[1:]
	}
}

// result appends an action's observation to the conversation.
func (r *runner) result(callID, obs string) {
	obs = r.e.cfg.Redact.String(obs)
	if r.tr.Protocol == ProtocolTools {
		r.tr.Messages = append(r.tr.Messages, Message{Role: RoleTool, ToolCallID: callID, Content: obs})
		return
	}
	r.tr.Messages = append(r.tr.Messages, Message{Role: RoleUser, Content: "Observation: " + obs})
}

// outcome describes the run as it stands.
func (r *runner) outcome() Outcome {
	o := Outcome{Status: r.tr.Status, Answer: r.tr.Answer, Transcript: r.tr}
	if w := r.tr.Wait; w != nil {
		o.Question, o.Options, o.Label = w.Question, w.Options, w.Label
	}
	return o
}

// end finishes the run with a status and answer.
func (r *runner) end(ctx context.Context, st Status, answer string, cause error) Outcome {
	r.tr.Status, r.tr.Answer = st, answer
	r.e.cfg.Redact.Transcript(r.tr)
	o := r.outcome()
	o.Err = cause
	if err := r.save(ctx); err != nil && o.Err == nil {
		o.Err = err
	}
	return o
}

// partial is an honest answer for a run a limit ended.
func (r *runner) partial(reason string) string {
	return "I stopped before finishing: " + reason + ".\n" + r.doneList()
}

func (r *runner) doneList() string {
	if len(r.tr.Journal) == 0 {
		return "Nothing was changed."
	}
	var b strings.Builder
	b.WriteString("Done so far:")
	for i, a := range r.tr.Journal {
		if i == 15 {
			fmt.Fprintf(&b, "\n• … and %d more changes", len(r.tr.Journal)-15)
			break
		}
		b.WriteString("\n• " + a.Summary)
	}
	return b.String()
}

// interrupted ends this segment of the run because ctx ended: a timeout
// ends the run; a cancel or shutdown leaves it resumable.
func (r *runner) interrupted(ctx context.Context) Outcome {
	if errors.Is(context.Cause(ctx), errRunTimeout) {
		return r.end(ctx, StatusStopped, r.partial("the run took longer than "+r.e.cfg.Timeout.String()), nil)
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
		return r.end(parent, StatusStopped, r.partial("the run took longer than "+cfg.Timeout.String()), nil)
	}
	ctx, cancel := context.WithTimeoutCause(parent, left, errRunTimeout)
	defer cancel()
	r.tr.Status = StatusInterrupted // until it ends or waits

	if r.tr.Pending != nil {
		if o, stop := r.send(ctx); stop {
			return o
		}
	}
	for {
		if o, stop := r.drain(ctx); stop {
			return o
		}
		if ctx.Err() != nil {
			return r.interrupted(ctx)
		}
		if r.tr.Steps >= cfg.MaxSteps {
			return r.end(ctx, StatusStopped, r.partial(fmt.Sprintf("I reached the limit of %d steps", cfg.MaxSteps)), nil)
		}
		if r.tr.Usage.Total() >= cfg.TokenBudget {
			return r.end(ctx, StatusStopped, r.partial(fmt.Sprintf("I used up this run's budget of %d tokens", cfg.TokenBudget)), nil)
		}
		if o, stop := r.step(ctx); stop {
			return o
		}
		if err := r.save(ctx); err != nil {
			return r.end(ctx, StatusFailed, "I could not save my progress, so I stopped. "+r.doneList(), err)
		}
	}
}

// step makes one model call and queues the actions it asks for.
func (r *runner) step(ctx context.Context) (Outcome, bool) {
	cfg := &r.e.cfg
	cfg.Redact.Transcript(r.tr) // the instruction and history too
	req := Request{Messages: r.tr.Messages, MaxTokens: cfg.MaxTokens, Temperature: cfg.Temperature}
	strict := !cfg.NotStrict
	if r.tr.Protocol == ProtocolTools {
		req.Tools = tools(strict)
		req.ToolChoice = "required"
		req.ParallelToolCalls = true
	} else {
		req.Format = &ResponseFormat{Kind: FormatJSONSchema, Name: "react_step", Schema: EnvelopeSchema(), Strict: strict}
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
			return r.interrupted(ctx), true
		}
		msg := "the model service is not answering"
		if ErrorCodeOf(err) != "" {
			msg = "the model service said: " + ErrorMessageOf(err)
		}
		return r.end(ctx, StatusFailed, "I couldn't finish: "+msg+".\n"+r.doneList(), fmt.Errorf("model call: %w", err)), true
	}
	r.tr.Steps++
	u := resp.Usage
	u.Calls = 1
	r.tr.Usage.Add(u)
	r.tr.Failures = 0

	var problems []*replyError
	if r.tr.Protocol == ProtocolTools && len(resp.ToolCalls) > 0 {
		msg := Message{Role: RoleAssistant, Content: resp.Content, State: resp.State}
		var calls []call
		var bad []ToolCall
		for i, tc := range resp.ToolCalls {
			if tc.ID == "" {
				tc.ID = fmt.Sprintf("call_%d_%d", r.tr.Steps, i)
			}
			msg.ToolCalls = append(msg.ToolCalls, tc)
			c, err := parseToolCall(tc)
			if err != nil {
				re := asReplyError(err, tc.Arguments)
				problems = append(problems, re)
				bad = append(bad, tc)
				continue
			}
			calls = append(calls, c)
		}
		r.tr.Messages = append(r.tr.Messages, msg)
		for i, tc := range bad {
			r.result(tc.ID, repairText(problems[i], r.tr.Protocol))
		}
		r.tr.Calls = calls
	} else {
		// The json protocol, or a tools reply that came as text: the
		// envelope is parsed locally first.
		r.tr.Messages = append(r.tr.Messages, Message{Role: RoleAssistant, Content: resp.Content, State: resp.State})
		_, c, err := parseEnvelope(resp.Content)
		if err != nil {
			re := asReplyError(err, resp.Content)
			problems = append(problems, re)
			r.tr.Messages = append(r.tr.Messages, Message{Role: RoleUser, Content: repairText(re, r.tr.Protocol)})
		} else {
			c.ID = fmt.Sprintf("step_%d", r.tr.Steps)
			if r.tr.Protocol == ProtocolTools {
				// Answer it as a tool call so the conversation stays valid.
				r.tr.Messages[len(r.tr.Messages)-1].ToolCalls = []ToolCall{{ID: c.ID, Name: c.Name, Arguments: string(c.Args)}}
			}
			r.tr.Calls = []call{c}
		}
	}
	if len(problems) > 0 && len(r.tr.Calls) == 0 {
		r.tr.Repairs++
		if r.tr.Repairs > maxRepairs {
			return r.end(ctx, StatusFailed, "I couldn't finish: the model kept replying in a form I could not use ("+clip(problems[0].Problem, 200)+").\n"+r.doneList(),
				fmt.Errorf("unusable model reply: %s", problems[0].Problem)), true
		}
		return Outcome{}, false
	}
	r.tr.Repairs = 0
	return Outcome{}, false
}

func asReplyError(err error, value string) *replyError {
	var re *replyError
	if errors.As(err, &re) {
		return re
	}
	return &replyError{Problem: err.Error(), Value: value}
}

// repairText asks the model to fix an unusable reply, quoting the error,
// the offending value and the valid action names.
func repairText(re *replyError, p Protocol) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Error: your reply could not be used: %s.\nYou sent: %s\nValid actions: %s.\n", re.Problem, clip(re.Value, 300), strings.Join(ActionNames(), ", "))
	if p == ProtocolJSON {
		b.WriteString(`Reply again with exactly one JSON object: {"thought": "...", "action": {"type": "<valid action>", ...arguments}}.`)
	} else {
		b.WriteString("Call a valid action again with corrected arguments.")
	}
	return b.String()
}

// slow runs fn, telling the user once if it takes long.
func (r *runner) slow(ctx context.Context, note string, fn func() error) error {
	t := time.AfterFunc(r.e.cfg.SlowAfter, func() { r.observe(Event{Kind: EventNote, Step: r.tr.Steps, Summary: "⏳ " + note}) })
	defer t.Stop()
	return fn()
}

// fingerprint identifies an action with its arguments for loop detection.
func fingerprint(c call) string {
	var v any
	_ = json.Unmarshal(c.Args, &v)
	b, _ := json.Marshal(v) // map keys sorted: a canonical form
	return c.Name + " " + string(b)
}

// loops counts c and reports whether it has now been asked for three times.
func (r *runner) loops(c call) bool {
	if r.tr.Seen == nil {
		r.tr.Seen = map[string]int{}
	}
	fp := fingerprint(c)
	r.tr.Seen[fp]++
	return r.tr.Seen[fp] >= 3
}

func (r *runner) gated(c call) bool {
	spec, _ := specByName(c.Name)
	switch r.e.cfg.Confirm {
	case ConfirmWrites:
		return spec.Kind == kindWrite
	case ConfirmNever:
		return false
	}
	return spec.Destructive
}

// drain runs the queued actions of the last reply, in order; consecutive
// reads run concurrently. It stops when the run ends or waits.
func (r *runner) drain(ctx context.Context) (Outcome, bool) {
	for len(r.tr.Calls) > 0 {
		if ctx.Err() != nil {
			return r.interrupted(ctx), true
		}
		c := r.tr.Calls[0]
		spec, _ := specByName(c.Name)
		if spec.Kind != kindControl && !c.Confirmed && r.loops(c) {
			return r.end(ctx, StatusStopped, r.partial("I was repeating the same action ("+c.Name+") without progress"), nil), true
		}
		switch spec.Kind {
		case kindRead:
			n := 1
			for n < len(r.tr.Calls) {
				if next, _ := specByName(r.tr.Calls[n].Name); next.Kind != kindRead {
					break
				}
				if r.loops(r.tr.Calls[n]) {
					return r.end(ctx, StatusStopped, r.partial("I was repeating the same action ("+r.tr.Calls[n].Name+") without progress"), nil), true
				}
				n++
			}
			batch := r.tr.Calls[:n]
			results := make([]readResult, n)
			var wg sync.WaitGroup
			for i, bc := range batch {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_ = r.slow(ctx, "Todoist is slow to answer; still trying…", func() error {
						results[i] = r.read(ctx, bc)
						return nil
					})
				}()
			}
			wg.Wait()
			if ctx.Err() != nil {
				return r.interrupted(ctx), true
			}
			for i, bc := range batch {
				if res := results[i]; res.Fatal != nil {
					return r.end(ctx, StatusFailed, "I couldn't finish: "+ErrorMessageOf(res.Fatal)+".\n"+r.doneList(), res.Fatal), true
				}
				if strings.HasPrefix(results[i].Obs, "Error:") {
					r.tr.Failures++
				}
				r.result(bc.ID, results[i].Obs)
				r.observe(Event{Kind: EventAction, Step: r.tr.Steps, Action: bc.Name, Summary: results[i].Summary})
			}
			r.tr.Calls = r.tr.Calls[n:]

		case kindControl:
			switch c.Name {
			case ActFinalAnswer, ActFailTask:
				if r.tr.Failures > 0 {
					r.result(c.ID, "Not accepted: an earlier action in this reply failed. Read its observation, fix it, then answer.")
					r.popCall(c.ID)
					continue
				}
				if c.Name == ActFinalAnswer {
					var a FinalAnswerArgs
					_ = json.Unmarshal(c.Args, &a)
					r.result(c.ID, "Done.")
					r.popCall(c.ID)
					return r.end(ctx, StatusDone, strings.TrimSpace(a.Answer), nil), true
				}
				var a FailTaskArgs
				_ = json.Unmarshal(c.Args, &a)
				r.result(c.ID, "Stopped.")
				r.popCall(c.ID)
				answer := "I couldn't do that: " + strings.TrimSpace(a.Reason)
				if len(r.tr.Journal) > 0 {
					answer += "\n" + r.doneList()
				}
				return r.end(ctx, StatusFailed, answer, nil), true
			case ActAskUser:
				var a AskUserArgs
				_ = json.Unmarshal(c.Args, &a)
				r.tr.Wait = &wait{Kind: "ask", CallID: c.ID, Question: strings.TrimSpace(a.Question), Options: a.Options}
				return r.end(ctx, StatusAsking, "", nil), true
			}

		case kindWrite:
			if r.gated(c) && !c.Confirmed {
				label, q := r.gate(ctx, c)
				r.tr.Wait = &wait{Kind: "confirm", CallID: c.ID, Question: q, Label: label}
				return r.end(ctx, StatusConfirming, "", nil), true
			}
			p, ws, err := r.planWrite(ctx, c)
			if err != nil {
				if ctx.Err() != nil {
					return r.interrupted(ctx), true
				}
				if fatalCode(err) {
					return r.end(ctx, StatusFailed, "I couldn't finish: "+ErrorMessageOf(err)+".\n"+r.doneList(), err), true
				}
				r.tr.Failures++
				r.result(c.ID, "Error: "+ErrorMessageOf(err)+". Nothing was changed.")
				r.popCall(c.ID)
				continue
			}
			if len(ws) == 0 {
				obs := strings.Join(p.Notes, "\n")
				if p.Rejected > 0 {
					r.tr.Failures++
					obs += "\nNothing was changed."
				}
				r.result(c.ID, obs)
				r.popCall(c.ID)
				r.observe(Event{Kind: EventAction, Step: r.tr.Steps, Action: c.Name, Summary: progressSummary(c.Name, nil, 0, nil, p.Rejected)})
				continue
			}
			r.tr.Pending = &pendingWrite{Call: c, Writes: ws, Plan: p}
			if err := r.save(ctx); err != nil {
				return r.end(ctx, StatusFailed, "I could not save my progress, so I made no change. "+r.doneList(), err), true
			}
			if o, stop := r.send(ctx); stop {
				return o, true
			}
		}
		if err := r.save(ctx); err != nil {
			return r.end(ctx, StatusFailed, "I could not save my progress, so I stopped. "+r.doneList(), err), true
		}
	}
	return Outcome{}, false
}

// send applies the pending writes (with their saved uuids) and records
// the results.
func (r *runner) send(ctx context.Context) (Outcome, bool) {
	p := r.tr.Pending
	var results []WriteResult
	err := r.slow(ctx, "Todoist is slow to answer; still trying…", func() error {
		var err error
		results, err = r.e.tasks.Apply(ctx, p.Writes)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			// The writes stay pending: a resumed run re-sends them.
			return r.interrupted(ctx), true
		}
		if fatalCode(err) {
			return r.end(ctx, StatusFailed, "I couldn't finish: "+ErrorMessageOf(err)+".\n"+r.doneList(), err), true
		}
		r.tr.Pending = nil
		r.tr.Failures++
		obs := "Error: the change failed: " + ErrorMessageOf(err) + ". Some of it may have been applied; read the current state before retrying."
		if ErrorCodeOf(err) == ErrInvalid {
			obs = "Error: " + ErrorMessageOf(err) + ". Nothing was changed; fix it and retry."
		}
		r.result(p.Call.ID, obs)
		r.popCall(p.Call.ID)
		return Outcome{}, false
	}
	obs, summary := r.applyResults(p.Plan, p.Writes, results)
	if strings.Contains(obs, "✗") {
		r.tr.Failures++
	}
	r.tr.Pending = nil
	r.result(p.Call.ID, obs)
	r.popCall(p.Call.ID)
	r.observe(Event{Kind: EventAction, Step: r.tr.Steps, Action: p.Call.Name, Summary: summary})
	return Outcome{}, false
}
