package eval

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
	"github.com/tidybot/tidybot/bot"
)

// Options configure a run of the suite.
type Options struct {
	// Model is the model under test.
	Model agent.Model
	// Engine is the agent's configuration, as chat and serve use it;
	// its clock (Now) is set per task.
	Engine agent.Config
	// K is the number of attempts per task (default 1).
	K int
	// Run, if set, selects the tasks whose name it matches.
	Run *regexp.Regexp
	// Parallel is how many attempts run at once (default 1).
	Parallel int
	// Progress, if set, hears of every finished attempt, one at a time.
	Progress func(Progress)
}

// Progress reports a finished attempt.
type Progress struct {
	Done, Total, Passed int
	Task                string
	Attempt             int
	Pass                bool
}

// maxQuestions bounds the questions one turn may ask the simulated user.
const maxQuestions = 6

// Select returns the tasks of suite whose name re matches (all when nil).
func Select(suite []Task, re *regexp.Regexp) []Task {
	var out []Task
	for _, t := range suite {
		if re == nil || re.MatchString(t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// Run runs every selected task K times and scores each attempt.
func Run(ctx context.Context, suite []Task, opt Options) Report {
	opt.K = max(opt.K, 1)
	opt.Parallel = max(opt.Parallel, 1)
	tasks := Select(suite, opt.Run)
	rep := Report{K: opt.K, Tasks: make([]TaskResult, len(tasks))}
	type job struct{ task, attempt int }
	jobs := make(chan job)
	var mu sync.Mutex // protects rep and done below
	done, passed := 0, 0
	for i, t := range tasks {
		rep.Tasks[i] = TaskResult{Name: t.Name, About: t.About, Attempts: make([]Attempt, opt.K)}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range opt.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				mu.Lock()
				stop := rep.Err != nil
				mu.Unlock()
				if stop {
					continue
				}
				a := runAttempt(ctx, tasks[j.task], opt)
				mu.Lock()
				if a.noModel != "" && rep.Err == nil {
					rep.Err = fmt.Errorf("the model never answered (%s)", a.noModel)
				}
				rep.Tasks[j.task].Attempts[j.attempt] = a
				done++
				if a.Pass {
					passed++
				}
				if opt.Progress != nil {
					opt.Progress(Progress{Done: done, Total: len(tasks) * opt.K, Passed: passed, Task: tasks[j.task].Name, Attempt: j.attempt + 1, Pass: a.Pass})
				}
				mu.Unlock()
			}
		}()
	}
	for a := range opt.K {
		for i := range tasks {
			jobs <- job{i, a}
		}
	}
	close(jobs)
	wg.Wait()
	rep.score(time.Since(start))
	return rep
}

// runAttempt plays a task once against a fresh fake account.
func runAttempt(ctx context.Context, t Task, opt Options) Attempt {
	begin := time.Now()
	clock := t.Seed.clock()
	srv := todoisttest.New(nil, todoisttest.WithClock(func() time.Time { return clock }), todoisttest.WithTimezone(t.Seed.timezone()))
	defer srv.Close()
	t.Seed.plant(srv)
	w := &World{Start: srv.Snapshot(), Now: clock}
	w.Loc, _ = time.LoadLocation(t.Seed.timezone())

	rec := &recorder{Client: todoist.New(srv.Token, srv.URL, srv.DirectClient()), srv: srv}
	cfg := opt.Engine
	cfg.Now = func() time.Time { return clock }
	eng := agent.New(opt.Model, rec, cfg)

	var (
		a       Attempt
		usage   agent.Usage
		history []agent.HistoryMessage
		answers []string
		ended   []string // turns that did not end done
		asked   int
	)
	for n, turn := range t.Turns {
		// /tidy-inbox runs as the bot runs it: the overview read first,
		// the tidy's actions only.
		in := agent.Input{Instruction: turn.Message, History: history, Overview: turn.Message == bot.TidyInboxInstruction}
		if len(t.Autopilot) > 0 {
			in = bot.AutopilotInput(w.newTasks(t.Autopilot), "", "")
		}
		out := eng.Start(ctx, in, agent.Hooks{})
		next := 0
		for q := 0; out.Status.Waiting() && q < maxQuestions; q++ {
			reply := "yes" // a confirmation: let the write happen, and score it
			if t.Refuses {
				reply = "no"
			}
			if out.Status == agent.StatusAsking {
				asked++
				reply = NoMoreAnswers
				if next < len(turn.Answers) {
					reply = turn.Answers[next]
					next++
				}
			}
			out = eng.Resume(ctx, out.Transcript, reply, agent.Hooks{})
		}
		if out.Transcript != nil {
			usage.Add(out.Transcript.Usage)
		}
		if out.Status != agent.StatusDone {
			why := firstLine(out.Answer)
			if out.Status.Waiting() {
				why = fmt.Sprintf("still asking after %d questions", maxQuestions)
			}
			if why == "" && out.Err != nil {
				why = firstLine(cfg.Redact.String(out.Err.Error()))
			}
			if usage.Calls == 0 && out.Transcript != nil && out.Transcript.Usage.Calls == 0 && out.Status == agent.StatusFailed {
				a.noModel = why // the model never answered: no use going on
			}
			ended = append(ended, fmt.Sprintf("turn %d ended %s: %s", n+1, out.Status, why))
		}
		answers = append(answers, out.Answer)
		history = append(history, agent.HistoryMessage{Role: agent.RoleUser, Text: turn.Message}, agent.HistoryMessage{Role: agent.RoleAssistant, Text: out.Answer})
		if ctx.Err() != nil {
			break
		}
	}
	w.Final = srv.Snapshot()
	w.Answer = strings.Join(answers, "\n")
	a.Calls, a.PromptTokens, a.CompletionTokens = usage.Calls, usage.PromptTokens, usage.CompletionTokens
	a.Reason = t.judge(w, rec.writes(), asked, ended)
	a.Pass = a.Reason == ""
	a.Wall = time.Since(begin)
	return a
}

// judge returns why the attempt failed, in one line, or "" when it passed.
func (t Task) judge(w *World, writes []written, asked int, ended []string) string {
	for _, wr := range writes {
		if len(t.Autopilot) > 0 && (wr.kind == agent.CloseTask || wr.kind == agent.DeleteTask || wr.kind == agent.AddComment ||
			wr.kind == agent.AddProject || wr.kind == agent.AddSection || wr.kind == agent.AddTask || len(wr.fields) > 0) {
			return "forbidden in autopilot: " + wr.what + strings.Join(wr.fields, "")
		}
		if wr.kind == agent.DeleteProject {
			return "forbidden: " + wr.what
		}
		if wr.kind == agent.DeleteTask && !slices.ContainsFunc(t.MayDelete, func(s string) bool { return wr.content != "" && like(wr.content, s) }) {
			return "forbidden: " + wr.what
		}
	}
	if t.ReadOnly && len(writes) > 0 {
		return "forbidden: wrote in a read-only task (" + writes[0].what + ")"
	}
	var diffs []string
	for _, p := range t.Goal {
		if err := p.Check(w); err != nil {
			diffs = append(diffs, err.Error())
		}
	}
	if t.MustAsk && asked == 0 {
		diffs = append([]string{"never asked the user, though the request is ambiguous"}, diffs...)
	}
	if len(diffs) == 0 {
		if len(ended) > 0 {
			return ended[0]
		}
		return ""
	}
	reason := diffs[0]
	if len(diffs) > 1 {
		reason += fmt.Sprintf(" (+%d more)", len(diffs)-1)
	}
	if len(ended) > 0 {
		reason = ended[0] + "; " + reason
	}
	return reason
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if r := []rune(s); len(r) > 160 {
		s = string(r[:160]) + "…"
	}
	return s
}

// recorder is the Todoist client with a record of every write the agent
// sent, to catch forbidden actions even when a later write hides them.
type recorder struct {
	*todoist.Client
	srv *todoisttest.Server

	mu  sync.Mutex // protects log
	log []written
}

type written struct {
	kind    agent.WriteKind
	content string // the task's content, when the write names a task
	what    string // `deleted "Buy milk"`
	// fields are what an update of a task changes besides its place,
	// due date and labels (" content", " description", " priority").
	fields []string
}

// Apply implements agent.Tasks.
func (r *recorder) Apply(ctx context.Context, writes []agent.Write) ([]agent.WriteResult, error) {
	r.mu.Lock()
	for _, wr := range writes {
		x := written{kind: wr.Kind}
		if wr.Kind == agent.UpdateTask {
			for f, set := range map[string]bool{" content": wr.Content != nil, " description": wr.Description != nil, " priority": wr.Priority != ""} {
				if set {
					x.fields = append(x.fields, f)
				}
			}
			slices.Sort(x.fields)
		}
		verb := todoist.Verb(wr.Kind)
		switch {
		case wr.Kind == agent.DeleteProject:
			name := wr.ID
			if p, ok := r.srv.Project(wr.ID); ok {
				name = p.Name
			}
			x.what = fmt.Sprintf("%s %q", verb, name)
		case wr.Name != "":
			x.what = fmt.Sprintf("%s %q", verb, wr.Name)
		case wr.Content != nil && wr.ID == "":
			x.content = *wr.Content
			x.what = fmt.Sprintf("%s %q", verb, x.content)
		default:
			x.content = wr.ID
			if t, ok := r.srv.Task(wr.ID); ok {
				x.content = t.Content
			}
			x.what = fmt.Sprintf("%s %q", verb, x.content)
		}
		r.log = append(r.log, x)
	}
	r.mu.Unlock()
	return r.Client.Apply(ctx, writes)
}

func (r *recorder) writes() []written {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

var _ agent.Tasks = (*recorder)(nil)
var _ agent.TimeZoner = (*recorder)(nil)

// newTasks are the open inbox tasks at the start like any of sels (the
// autopilot's new tasks), as the agent sees tasks.
func (w *World) newTasks(sels []string) []agent.Task {
	inbox := ""
	for _, p := range w.Start.Projects {
		if p.IsInbox {
			inbox = p.ID
		}
	}
	var out []agent.Task
	for _, t := range w.Start.Tasks {
		if t.ProjectID != inbox || t.Checked {
			continue
		}
		if slices.ContainsFunc(sels, func(s string) bool { return like(t.Content, s) }) {
			out = append(out, agent.Task{ID: t.ID, Content: t.Content, ProjectID: t.ProjectID})
		}
	}
	return out
}
