package agent

import (
	"context"
	"sync"
	"time"
)

// SpanKind says what a Span timed.
type SpanKind string

// Span kinds.
const (
	// SpanModel is one model call (Model.Complete).
	SpanModel SpanKind = "model"
	// SpanTasks is one request to the to-do service (a Tasks method).
	SpanTasks SpanKind = "todoist"
	// SpanWait is the time a suspended run waited for the user's answer.
	SpanWait SpanKind = "wait"
)

// Span is one timed part of a run, kept in its transcript so that the run
// inspector can show where the time and tokens went.
type Span struct {
	// Step is the model call the span belongs to (1 for the first); a
	// model call's own span has the number it gets.
	Step int      `json:"step"`
	Kind SpanKind `json:"kind"`
	// Op names the request: "complete", "projects", "tasks", "apply"…
	Op    string        `json:"op,omitempty"`
	Start time.Time     `json:"start"`
	Dur   time.Duration `json:"dur"`
	// Usage is a model call's tokens.
	Usage *Usage `json:"usage,omitempty"`
	// Failed is set when the call returned an error.
	Failed bool `json:"failed,omitempty"`
}

// End is when the span ended.
func (s Span) End() time.Time { return s.Start.Add(s.Dur) }

// spanKey is the context key of a run's span recorder.
type spanKey struct{}

// spanRec appends spans to one run's transcript.
type spanRec struct {
	now func() time.Time
	// mu protects tr.Spans: reads of one reply run concurrently.
	mu sync.Mutex
	tr *Transcript
}

// withSpans returns ctx carrying a recorder of tr's spans; the engine's
// model and tasks record into it.
func withSpans(ctx context.Context, tr *Transcript, now func() time.Time) context.Context {
	return context.WithValue(ctx, spanKey{}, &spanRec{now: now, tr: tr})
}

// timed runs fn and records it as a span of ctx's run, if any.
func timed(ctx context.Context, kind SpanKind, op string, fn func() (*Usage, error)) error {
	rec, _ := ctx.Value(spanKey{}).(*spanRec)
	if rec == nil {
		_, err := fn()
		return err
	}
	start := rec.now()
	u, err := fn()
	s := Span{Kind: kind, Op: op, Start: start, Dur: rec.now().Sub(start), Usage: u, Failed: err != nil}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	s.Step = rec.tr.Steps
	if kind == SpanModel {
		s.Step++ // counted once the call returns
	}
	rec.tr.Spans = append(rec.tr.Spans, s)
	return err
}

// waited records the time since the run's last span as a wait for the
// user: a run suspends right after its last call (the model's question,
// or the reads that built a confirmation).
func waited(tr *Transcript, now time.Time) {
	if len(tr.Spans) == 0 {
		return
	}
	last := tr.Spans[len(tr.Spans)-1].End()
	if d := now.Sub(last); d > 0 {
		tr.Spans = append(tr.Spans, Span{Step: tr.Steps, Kind: SpanWait, Op: "answer", Start: last, Dur: d})
	}
}

// timedModel times each model call.
type timedModel struct{ Model }

// Complete implements Model.
func (m timedModel) Complete(ctx context.Context, req Request) (resp Response, err error) {
	err = timed(ctx, SpanModel, "complete", func() (*Usage, error) {
		var err error
		resp, err = m.Model.Complete(ctx, req)
		u := resp.Usage
		return &u, err
	})
	return resp, err
}

// timedTasks times each request to the to-do service. Methods added to
// Tasks later pass through untimed (embedded).
type timedTasks struct{ innerTasks }

// innerTasks names the embedded Tasks apart from the Tasks method.
type innerTasks = Tasks

func newTimedTasks(t Tasks) Tasks {
	if tz, ok := t.(TimeZoner); ok {
		return timedZoneTasks{timedTasks{t}, tz}
	}
	return timedTasks{t}
}

// timedZoneTasks keeps the TimeZoner of the tasks it wraps.
type timedZoneTasks struct {
	timedTasks
	TimeZoner
}

// Projects implements Tasks.
func (t timedTasks) Projects(ctx context.Context) (ps []Project, err error) {
	err = timed(ctx, SpanTasks, "projects", func() (*Usage, error) { ps, err = t.innerTasks.Projects(ctx); return nil, err })
	return ps, err
}

// Tasks implements Tasks.
func (t timedTasks) Tasks(ctx context.Context, q TaskQuery) (ts []Task, err error) {
	err = timed(ctx, SpanTasks, "tasks", func() (*Usage, error) { ts, err = t.innerTasks.Tasks(ctx, q); return nil, err })
	return ts, err
}

// Sections implements Tasks.
func (t timedTasks) Sections(ctx context.Context, projectID string) (ss []Section, err error) {
	err = timed(ctx, SpanTasks, "sections", func() (*Usage, error) { ss, err = t.innerTasks.Sections(ctx, projectID); return nil, err })
	return ss, err
}

// Labels implements Tasks.
func (t timedTasks) Labels(ctx context.Context) (ls []Label, err error) {
	err = timed(ctx, SpanTasks, "labels", func() (*Usage, error) { ls, err = t.innerTasks.Labels(ctx); return nil, err })
	return ls, err
}

// Snapshot implements Tasks.
func (t timedTasks) Snapshot(ctx context.Context) (s Snapshot, err error) {
	err = timed(ctx, SpanTasks, "snapshot", func() (*Usage, error) { s, err = t.innerTasks.Snapshot(ctx); return nil, err })
	return s, err
}

// Apply implements Tasks.
func (t timedTasks) Apply(ctx context.Context, writes []Write) (rs []WriteResult, err error) {
	err = timed(ctx, SpanTasks, "apply", func() (*Usage, error) { rs, err = t.innerTasks.Apply(ctx, writes); return nil, err })
	return rs, err
}
