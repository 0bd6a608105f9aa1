package agent_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// clock is a settable clock shared by the fake Todoist, the client and
// the engine.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newDatedE2E is newE2E with a clock and the user's time zone.
func newDatedE2E(t *testing.T, clk *clock, zone string, script func(agent.Request) agent.Response) *e2e {
	t.Helper()
	todo := todoisttest.New(t, todoisttest.WithClock(clk.Now), todoisttest.WithTimezone(zone))
	tasks := todoist.New(todo.Token, todo.URL, todo.Client(), todoist.WithBackoff(1e6, 1e7), todoist.WithClock(clk.Now))
	return &e2e{todo: todo, tasks: tasks, model: &recorder{next: newModel(t, script)}}
}

func (r *recorder) system(call int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, m := range r.reqs[call].Messages {
		if m.Role == agent.RoleSystem {
			b.WriteString(m.Content)
		}
	}
	return b.String()
}

// The server runs in UTC; the user lives in UTC+14, where it is already
// tomorrow. The prompt and what "today" selects are the user's day, and a
// run that resumes a day later says the new day.
func TestTodayIsTheUsersDay(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)} // Tue 24 Nov, 12:00 UTC = Wed 25 Nov, 02:00 in Kiritimati
	e := newDatedE2E(t, clk, "Pacific/Kiritimati", nil)
	usersToday := e.todo.AddTask(todoisttest.Task{Content: "Call the plumber", Due: &todoisttest.Due{Date: "2026-11-25"}})
	e.todo.AddTask(todoisttest.Task{Content: "Water the plants", Due: &todoisttest.Due{Date: "2026-11-24"}})
	e.model.next = newModel(t, replies(
		toolReply(tc(agent.ActGetTasks, `{"filter":"today"}`)),
		toolReply(tc(agent.ActAskUser, `{"question":"Shall I move it?"}`)),
		toolReply(tc(agent.ActFinalAnswer, `{"answer":"ok"}`)),
	))
	eng := agent.New(e.model, e.tasks, agent.Config{Now: clk.Now})
	out := eng.Start(t.Context(), agent.Input{Instruction: "what's due today?"}, agent.Hooks{})
	if out.Status != agent.StatusAsking {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if sys := e.model.system(0); !strings.Contains(sys, "Today is Wednesday, 25 November 2026.") {
		t.Errorf("system prompt does not say the user's day:\n%s", sys)
	}
	obs := e.model.lastMessage(1)
	if !strings.Contains(obs, shown(out.Transcript, usersToday.ID)) || strings.Contains(obs, "Water the plants") {
		t.Errorf("today's tasks are not the user's today's:\n%s", obs)
	}

	clk.Add(24 * time.Hour)
	out = eng.Resume(t.Context(), out.Transcript, "no", agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if sys := e.model.system(2); !strings.Contains(sys, "Today is Thursday, 26 November 2026.") || strings.Contains(sys, "Wednesday") {
		t.Errorf("resumed run's system prompt is not dated the user's new day:\n%s", sys)
	}
}

// Undo puts back the due date Todoist stored, not the words it was set
// with: a week later, "tomorrow" would be another day, "every mon" another
// Monday, and a time fixed in Berlin would lose its zone.
func TestUndoRestoresDueDates(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)} // Tuesday
	e := newDatedE2E(t, clk, "Europe/Berlin", nil)
	tomorrow := e.todo.AddTask(todoisttest.Task{Content: "Buy stamps", Due: &todoisttest.Due{String: "tomorrow"}})
	fixed := e.todo.AddTask(todoisttest.Task{Content: "Dentist", Due: &todoisttest.Due{Date: "2026-12-03T09:30:00Z", Timezone: "Europe/Berlin", String: "3 Dec 10:30"}})
	floating := e.todo.AddTask(todoisttest.Task{Content: "Standup", Due: &todoisttest.Due{String: "tomorrow at 9:15"}})
	weekly := e.todo.AddTask(todoisttest.Task{Content: "Take out the bins", Due: &todoisttest.Due{String: "every mon"}})
	if tomorrow.Due.Date != "2026-11-25" || weekly.Due.Date != "2026-11-30" || floating.Due.Date != "2026-11-25T09:15:00" {
		t.Fatalf("seeded due dates %+v %+v %+v", tomorrow.Due, weekly.Due, floating.Due)
	}
	e.model.next = newModel(t, replies(
		toolReply(tc(agent.ActUpdateTasks, fmt.Sprintf(`{"updates":[{"task_id":%q,"due_string":"next friday"},{"task_id":%q,"due_string":"tomorrow"},{"task_id":%q,"due_string":"no date"}]}`,
			tomorrow.ID, fixed.ID, floating.ID))),
		toolReply(tc(agent.ActCompleteTasks, fmt.Sprintf(`{"task_ids":[%q]}`, weekly.ID))),
		toolReply(tc(agent.ActFinalAnswer, `{"answer":"done"}`)),
	))
	eng := agent.New(e.model, e.tasks, agent.Config{Now: clk.Now, Confirm: agent.ConfirmNever})
	out := eng.Start(t.Context(), agent.Input{Instruction: "reschedule the stamps, the dentist, the standup; the bins are out"}, agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if got, _ := e.todo.Task(weekly.ID); got.Due.Date != "2026-12-07" {
		t.Fatalf("completing the weekly task moved it to %s, want 2026-12-07", got.Due.Date)
	}

	clk.Add(7 * 24 * time.Hour)
	rep, err := eng.Undo(t.Context(), out.Transcript.Journal)
	if err != nil || len(rep.NotUndone) > 0 {
		t.Fatalf("undo: %v, not undone %v", err, rep.NotUndone)
	}
	for _, c := range []struct {
		seeded todoisttest.Task
		want   todoisttest.Due
	}{
		{tomorrow, todoisttest.Due{Date: "2026-11-25"}},
		{fixed, todoisttest.Due{Date: "2026-12-03T09:30:00Z", Timezone: "Europe/Berlin"}},
		{floating, todoisttest.Due{Date: "2026-11-25T09:15:00"}},
		{weekly, todoisttest.Due{Date: "2026-11-30", String: "every mon", IsRecurring: true}},
	} {
		got, ok := e.todo.Task(c.seeded.ID)
		if !ok || got.Checked || got.Due == nil {
			t.Errorf("%q after undo: %+v", c.seeded.Content, got)
			continue
		}
		if got.Due.Date != c.want.Date || got.Due.Timezone != c.want.Timezone || got.Due.IsRecurring != c.want.IsRecurring ||
			(c.want.String != "" && got.Due.String != c.want.String) {
			t.Errorf("%q due after undo = %+v, want %+v", c.seeded.Content, *got.Due, c.want)
		}
	}
}

// Undo gives a recurrence back in the language Todoist stored it in: the
// lang of a due object is the one its string is read in
// (developer.todoist.com/api/v1 #tag/Due-dates), and without it Todoist
// would read "every mon" in the user's language (issue 20 item 12). The
// fake reads English strings only; the lang it stores is what is checked.
func TestUndoKeepsTheRecurrenceLanguage(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)} // Tuesday
	e := newDatedE2E(t, clk, "Europe/Berlin", nil)
	completed := e.todo.AddTask(todoisttest.Task{Content: "Müll rausbringen", Due: &todoisttest.Due{String: "every mon", Lang: "de"}})
	updated := e.todo.AddTask(todoisttest.Task{Content: "Blumen gießen", Due: &todoisttest.Due{String: "every fri", Lang: "de"}})
	e.model.next = newModel(t, replies(
		toolReply(tc(agent.ActCompleteTasks, fmt.Sprintf(`{"task_ids":[%q]}`, completed.ID)),
			tc(agent.ActUpdateTasks, fmt.Sprintf(`{"updates":[{"task_id":%q,"due_string":"tomorrow"}]}`, updated.ID))),
		toolReply(tc(agent.ActFinalAnswer, `{"answer":"done"}`)),
	))
	eng := agent.New(e.model, e.tasks, agent.Config{Now: clk.Now, Confirm: agent.ConfirmNever})
	out := eng.Start(t.Context(), agent.Input{Instruction: "Müll ist draußen, Blumen morgen"}, agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if rep, err := eng.Undo(t.Context(), out.Transcript.Journal); err != nil || len(rep.NotUndone) > 0 {
		t.Fatalf("undo: %v, not undone %v", err, rep.NotUndone)
	}
	for _, seeded := range []todoisttest.Task{completed, updated} {
		got, ok := e.todo.Task(seeded.ID)
		if !ok || got.Due == nil || !got.Due.IsRecurring || got.Due.String != seeded.Due.String || got.Due.Lang != "de" {
			t.Errorf("%q due after undo = %+v, want %q in de", seeded.Content, got.Due, seeded.Due.String)
		}
	}
}
