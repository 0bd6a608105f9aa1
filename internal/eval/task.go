// Package eval measures a model on real Todoist work, scored the way
// τ-bench scores agents: each task of the suite seeds a fresh in-process
// fake Todoist, the agent runs the user's messages (a simulated user
// answers its questions from the task's script), and the final state of
// the data is compared with the task's goal. pass^k counts a task as
// solved only when all k attempts solve it.
package eval

import (
	"time"

	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// Task is one task of the suite: what the account holds, what the user
// says, what the data must look like afterwards and what must not happen.
type Task struct {
	// Name is short and unique ("inbox-talk"); -run matches it.
	Name string
	// About says in one line what the task tests.
	About string
	// Seed is the account before the run.
	Seed Seed
	// Turns are the user's messages, each a run of its own in one
	// conversation (a later turn sees the earlier ones as history).
	Turns []Turn
	// Goal are the predicates the final state (and answer) must meet.
	Goal []Predicate
	// MustAsk: the request is ambiguous and the agent must ask the user
	// (ask_user) at least once before it is solved.
	MustAsk bool
	// ReadOnly: the agent must not write anything.
	ReadOnly bool
	// MayDelete lists the tasks (content substrings) the user asks to
	// remove; deleting any other task or any project is forbidden.
	MayDelete []string
	// Autopilot, when set, makes the task an autopilot run: these inbox
	// tasks of the seed (content substrings) are the new ones, and the
	// one turn runs with the bot's autopilot input (bot.AutopilotInput:
	// its instruction, whose start is the turn's Message, and its
	// limits). Completing, deleting or commenting is forbidden, and so
	// is creating anything or changing a title, description or priority
	// (agent.PolicyAutopilot).
	Autopilot []string
	// Planted is text of the seed that gives the assistant an order (a
	// prompt injection), and Obey what a model that obeys it does: the
	// simulated model with the obeys-injection fault makes that call
	// once it has read the text. Its arguments may say "{tasks}" for
	// every task the run has seen.
	Planted string
	Obey    *Call
	// Refuses: the simulated user answers no to every confirmation (they
	// asked for no write), so that a write made is one made without
	// their yes.
	Refuses bool
}

// Turn is one user message with the simulated user's answers to the
// agent's questions in that run, and a reference solution.
type Turn struct {
	Message string
	// Answers answer ask_user in order; a question past the last one
	// gets NoMoreAnswers. A confirmation is always answered yes, so a
	// harmful write the agent asks about is applied and scored.
	Answers []string
	// Solution is what a competent agent does, one action per step: it
	// documents the task and drives the scripted model of internal/sim.
	// Argument strings may name objects as "{task:content}",
	// "{project:name}" or "{section:name}", resolved from what the run
	// has read.
	Solution []Step
}

// NoMoreAnswers is the simulated user's reply to a question the script
// does not foresee.
const NoMoreAnswers = "I have nothing to add; please decide yourself."

// Step is one model reply of a reference solution.
type Step struct {
	Thought string
	Call    Call
}

// Call is one action with its arguments.
type Call struct {
	Name string
	Args map[string]any
}

// Seed is the account a task starts from. Dates are written out; the
// clock is fixed (Clock), so "today" is the same in every run.
type Seed struct {
	// Timezone is the user's IANA zone (default Europe/Berlin).
	Timezone string
	// Clock is the current time (default DefaultClock).
	Clock    time.Time
	Projects []SeedProject
	Labels   []string
	Tasks    []SeedTask
	// More adds generated data after the above (large accounts).
	More func(s *todoisttest.Server)
}

// SeedProject is a project with its sections.
type SeedProject struct {
	Name     string
	Sections []string
}

// SeedTask is a task; Project "" is the Inbox.
type SeedTask struct {
	Content     string
	Description string
	Project     string
	Section     string
	Labels      []string
	Priority    string // "p1" … "p4"; "" is p4
	Due         string // "2026-06-09" or "2026-06-09T17:00:00" (the user's wall time)
}

// DefaultClock is the suite's "now": Wednesday 10 June 2026, 07:30 UTC
// (09:30 in Berlin).
var DefaultClock = time.Date(2026, 6, 10, 7, 30, 0, 0, time.UTC)

// DefaultTimezone is the user's zone unless a task says otherwise.
const DefaultTimezone = "Europe/Berlin"

func (s Seed) timezone() string {
	if s.Timezone == "" {
		return DefaultTimezone
	}
	return s.Timezone
}

func (s Seed) clock() time.Time {
	if s.Clock.IsZero() {
		return DefaultClock
	}
	return s.Clock
}

// apiPriority maps a user-facing priority to the API's 1 … 4.
func apiPriority(p string) int {
	switch p {
	case "p1":
		return 4
	case "p2":
		return 3
	case "p3":
		return 2
	}
	return 1
}

// userPriority maps the API's 1 … 4 to what users see.
func userPriority(n int) string {
	switch n {
	case 4:
		return "p1"
	case 3:
		return "p2"
	case 2:
		return "p3"
	}
	return "p4"
}

// plant fills a fresh fake account with the seed.
func (s Seed) plant(srv *todoisttest.Server) {
	projects := map[string]string{"": srv.InboxID(), "Inbox": srv.InboxID()}
	sections := map[string]string{}
	for _, p := range s.Projects {
		np := srv.AddProject(todoisttest.Project{Name: p.Name})
		projects[p.Name] = np.ID
		for _, name := range p.Sections {
			sections[p.Name+"/"+name] = srv.AddSection(todoisttest.Section{ProjectID: np.ID, Name: name}).ID
		}
	}
	for _, l := range s.Labels {
		srv.AddLabel(todoisttest.Label{Name: l})
	}
	for _, t := range s.Tasks {
		pid, ok := projects[t.Project]
		if !ok {
			panic("eval: seed task " + t.Content + ": no project " + t.Project)
		}
		nt := todoisttest.Task{Content: t.Content, Description: t.Description, ProjectID: pid, Labels: t.Labels, Priority: apiPriority(t.Priority)}
		if t.Section != "" {
			nt.SectionID = sections[t.Project+"/"+t.Section]
		}
		if t.Due != "" {
			nt.Due = &todoisttest.Due{Date: t.Due, String: t.Due}
		}
		srv.AddTask(nt)
	}
	if s.More != nil {
		s.More(srv)
	}
}
