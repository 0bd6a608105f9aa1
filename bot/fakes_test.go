package bot

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// memStore is an in-memory Store for the bot's unit tests.
type memStore struct {
	mu       sync.Mutex
	events   map[string]time.Time
	threads  map[string]Thread
	messages []Message
	runs     map[string]*Run
	jobs     []Job
	audit    []AuditEntry
	settings map[string]string

	outbox []Outbound
	// saves counts SaveRun calls.
	saves int
	// failJobs fails that many job writes (Commit with a job).
	failJobs int
	// onCommit, when set, sees every Commit before it is applied.
	onCommit func(Change)
	// commitErr, when set, fails the Commits it returns an error for
	// (nothing applied).
	commitErr func(Change) error
	// onMarkEvent, when set, runs as MarkEvent begins.
	onMarkEvent func()
	// onThread, when set, runs as Thread begins (a run about to start
	// reads its thread).
	onThread func()
}

var _ Store = (*memStore)(nil)

func newMemStore() *memStore {
	return &memStore{events: map[string]time.Time{}, threads: map[string]Thread{}, runs: map[string]*Run{}, settings: map[string]string{}}
}

func (s *memStore) MarkEvent(_ context.Context, key string, at time.Time) (bool, error) {
	if s.onMarkEvent != nil {
		s.onMarkEvent()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.events[key]; ok {
		return false, nil
	}
	s.events[key] = at
	return true, nil
}

func (s *memStore) PruneEvents(_ context.Context, before time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, at := range s.events {
		if at.Before(before) {
			delete(s.events, k)
			n++
		}
	}
	return n, nil
}

func (s *memStore) Thread(_ context.Context, key string) (Thread, error) {
	if s.onThread != nil {
		s.onThread()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.threads[key]
	if !ok {
		return Thread{}, ErrNotFound
	}
	return t, nil
}

func (s *memStore) SaveThread(_ context.Context, t Thread) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.threads[t.Key] = t
	return nil
}

func (s *memStore) AppendMessage(_ context.Context, m Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages = append(s.messages, m)
	return nil
}

func (s *memStore) RecentMessages(_ context.Context, key string, since time.Time, n int) ([]Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.messages {
		if m.ThreadKey == key && !m.At.Before(since) {
			out = append(out, m)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out, nil
}

func clone(r *Run) *Run { return cloneRun(r) }

// listed is r as the store's lists return it: without its transcript,
// so that a caller that needs one and does not call Run fails its tests.
func listed(r *Run) *Run {
	c := cloneRun(r)
	c.Transcript = nil
	return c
}

func (s *memStore) SaveRun(_ context.Context, r *Run) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saves++
	s.putRun(r)
	return nil
}

// putRun stores a copy of r; a run without a transcript keeps the
// stored one (see Store.SaveRun). mu must be held.
func (s *memStore) putRun(r *Run) {
	c := clone(r)
	if len(c.Transcript) == 0 {
		if old := s.runs[r.ID]; old != nil {
			c.Transcript = old.Transcript
		}
	}
	s.runs[r.ID] = c
}

func (s *memStore) Run(_ context.Context, id string) (*Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return nil, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	return clone(r), nil
}

func (s *memStore) sorted(keep func(*Run) bool) []*Run {
	var out []*Run
	for _, r := range s.runs {
		if keep(r) {
			out = append(out, listed(r))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func (s *memStore) Runs(_ context.Context, statuses ...RunStatus) ([]*Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sorted(func(r *Run) bool {
		if len(statuses) == 0 {
			return true
		}
		for _, st := range statuses {
			if r.Status == st {
				return true
			}
		}
		return false
	}), nil
}

func (s *memStore) ThreadRuns(_ context.Context, key string) ([]*Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sorted(func(r *Run) bool { return r.ThreadKey == key }), nil
}

func (s *memStore) WaitingRun(_ context.Context, key string) (*Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	runs := s.sorted(func(r *Run) bool { return r.ThreadKey == key && r.Status == RunWaiting && r.Waiting != nil })
	if len(runs) == 0 {
		return nil, nil
	}
	return runs[len(runs)-1], nil
}

func (s *memStore) WaitingRunByKey(_ context.Context, key string) (*Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.runs {
		if r.Status == RunWaiting && r.Waiting != nil && key != "" && r.Waiting.Key == key {
			return listed(r), nil
		}
	}
	return nil, nil
}

func (s *memStore) DeleteJob(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, j := range s.jobs {
		if j.ID == id {
			s.jobs = append(s.jobs[:i], s.jobs[i+1:]...)
			break
		}
	}
	return nil
}

func (s *memStore) Jobs(context.Context) ([]Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Job(nil), s.jobs...), nil
}

func (s *memStore) RunAudit(_ context.Context, runID string) ([]AuditEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []AuditEntry
	for _, e := range s.audit {
		if e.RunID == runID {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *memStore) Setting(_ context.Context, key string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.settings[key]
	if !ok {
		return "", ErrNotFound
	}
	return v, nil
}

func (s *memStore) SetSetting(_ context.Context, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settings[key] = value
	return nil
}

var _ SettingLister = (*memStore)(nil)

func (s *memStore) SettingsWithPrefix(_ context.Context, prefix string) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for k, v := range s.settings {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out, nil
}

// fakePlatform records what the bot posts; it can edit.
type fakePlatform struct {
	name     string
	interval time.Duration
	mu       sync.Mutex
	sent     []Outgoing
	edits    []string
	answered []string
	// onSend, when set, runs before a message is recorded; an error
	// fails the send (nothing recorded).
	onSend func(Outgoing) error
	// onEdit, when set, runs before an edit is recorded; an error fails
	// the edit (nothing recorded).
	onEdit func(id string, m Outgoing) error
	// download, when set, serves Download; downloads counts the calls.
	download  func(Attachment, int64) ([]byte, error)
	downloads int
	// commandName, when set, serves CommandName ("/"+name when nil).
	commandName func(string) string
}

func (p *fakePlatform) CommandName(name string) string {
	if p.commandName == nil {
		return "/" + name
	}
	return p.commandName(name)
}

func (p *fakePlatform) Download(_ context.Context, a Attachment, max int64) ([]byte, error) {
	p.mu.Lock()
	p.downloads++
	f := p.download
	p.mu.Unlock()
	if f == nil {
		return nil, fmt.Errorf("fake: no file %s", a.Ref)
	}
	return f(a, max)
}

func (p *fakePlatform) Name() string { return p.name }

func (p *fakePlatform) Send(_ context.Context, m Outgoing) (string, error) {
	if p.onSend != nil {
		if err := p.onSend(m); err != nil {
			return "", err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent = append(p.sent, m)
	return fmt.Sprintf("m%d", len(p.sent)), nil
}

func (p *fakePlatform) Edit(_ context.Context, id string, m Outgoing) error {
	if p.onEdit != nil {
		if err := p.onEdit(id, m); err != nil {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.edits = append(p.edits, id+": "+m.Text)
	return nil
}

func (p *fakePlatform) EditInterval() time.Duration { return p.interval }

func (p *fakePlatform) AnswerButton(_ context.Context, ref, text string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answered = append(p.answered, ref+": "+text)
	return nil
}

func (p *fakePlatform) texts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.sent {
		out = append(out, m.Text)
	}
	return out
}

func (p *fakePlatform) last() Outgoing {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.sent) == 0 {
		return Outgoing{}
	}
	return p.sent[len(p.sent)-1]
}

// mockAgent is an Agent with one function field per method
// (benbjohnson/wtf's mock package): a test sets the behaviour it needs.
// A nil field is a plain agent: Start answers "did: <instruction>",
// Resume "answered: <answer>", Undo reverts nothing. Every call is
// recorded before its function runs.
type mockAgent struct {
	StartFn  func(ctx context.Context, in agent.Input, h agent.Hooks) agent.Outcome
	ResumeFn func(ctx context.Context, tr *agent.Transcript, answer string, h agent.Hooks) agent.Outcome
	UndoFn   func(ctx context.Context, journal []agent.Applied) (agent.UndoReport, error)

	// mu protects the fields below, and the function fields once the
	// bot runs (set them under mu then).
	mu sync.Mutex
	// started and images are each Start's instruction and images;
	// resumed each Resume's answer.
	started []string
	images  [][]agent.Image
	resumed []string
}

var _ Agent = (*mockAgent)(nil)

// Start implements Agent.
func (a *mockAgent) Start(ctx context.Context, in agent.Input, h agent.Hooks) agent.Outcome {
	a.mu.Lock()
	a.started = append(a.started, in.Instruction)
	a.images = append(a.images, in.Images)
	fn := a.StartFn
	a.mu.Unlock()
	if fn == nil {
		return done(newTranscript(in), "did: "+in.Instruction)
	}
	return fn(ctx, in, h)
}

// Resume implements Agent.
func (a *mockAgent) Resume(ctx context.Context, tr *agent.Transcript, answer string, h agent.Hooks) agent.Outcome {
	a.mu.Lock()
	a.resumed = append(a.resumed, answer)
	fn := a.ResumeFn
	a.mu.Unlock()
	if fn == nil {
		return done(tr, "answered: "+answer)
	}
	return fn(ctx, tr, answer, h)
}

// Undo implements Agent.
func (a *mockAgent) Undo(ctx context.Context, journal []agent.Applied) (agent.UndoReport, error) {
	a.mu.Lock()
	fn := a.UndoFn
	a.mu.Unlock()
	if fn == nil {
		return agent.UndoReport{}, nil
	}
	return fn(ctx, journal)
}

func newTranscript(in agent.Input) *agent.Transcript {
	return &agent.Transcript{V: agent.TranscriptVersion, Instruction: in.Instruction}
}

// done ends tr's run with answer.
func done(tr *agent.Transcript, answer string) agent.Outcome {
	tr.Status = agent.StatusDone
	return agent.Outcome{Status: agent.StatusDone, Answer: answer, Transcript: tr}
}

// asking is a StartFn whose runs ask "Which one?" with options.
func asking(options ...string) func(context.Context, agent.Input, agent.Hooks) agent.Outcome {
	return func(_ context.Context, in agent.Input, _ agent.Hooks) agent.Outcome {
		tr := newTranscript(in)
		tr.Status = agent.StatusAsking
		return agent.Outcome{Status: agent.StatusAsking, Question: "Which one?", Options: options, Transcript: tr}
	}
}

// blocking is a StartFn whose runs wait until block is closed, then
// answer; a run stopped first ends interrupted with applied as its
// journal.
func blocking(block <-chan struct{}, applied []agent.Applied) func(context.Context, agent.Input, agent.Hooks) agent.Outcome {
	return func(ctx context.Context, in agent.Input, _ agent.Hooks) agent.Outcome {
		tr := newTranscript(in)
		select {
		case <-block:
			return done(tr, "did: "+in.Instruction)
		case <-ctx.Done():
			tr.Journal = applied
			return agent.Outcome{Status: agent.StatusInterrupted, Transcript: tr}
		}
	}
}

// scripted is a StartFn whose runs call script, then answer.
func scripted(script func(ctx context.Context, h agent.Hooks)) func(context.Context, agent.Input, agent.Hooks) agent.Outcome {
	return func(ctx context.Context, in agent.Input, h agent.Hooks) agent.Outcome {
		script(ctx, h)
		return done(newTranscript(in), "did: "+in.Instruction)
	}
}

// observing is a StartFn whose runs report events, then answer.
func observing(events []agent.Event) func(context.Context, agent.Input, agent.Hooks) agent.Outcome {
	return scripted(func(_ context.Context, h agent.Hooks) {
		for _, ev := range events {
			h.Observe(ev)
		}
	})
}

// blind is a StartFn whose runs with images fail with err (a model
// that takes no images); others answer.
func blind(err error) func(context.Context, agent.Input, agent.Hooks) agent.Outcome {
	return func(_ context.Context, in agent.Input, _ agent.Hooks) agent.Outcome {
		tr := newTranscript(in)
		if len(in.Images) > 0 {
			tr.Status = agent.StatusFailed
			return agent.Outcome{Status: agent.StatusFailed, Answer: "I couldn't finish: " + err.Error(), Transcript: tr, Err: err}
		}
		return done(tr, "did: "+in.Instruction)
	}
}

func (a *mockAgent) startedList() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.started...)
}

func joined(ss []string) string { return strings.Join(ss, " | ") }
