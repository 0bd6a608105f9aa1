package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
	"github.com/tidybot/tidybot/internal/sim"
)

// e2e is one end-to-end setup: the real Todoist client against the fake
// Todoist, and a model.
type e2e struct {
	todo  *todoisttest.Server
	tasks *todoist.Client
	model *recorder
}

// recorder counts model calls; it wraps the model under test.
type recorder struct {
	mu    sync.Mutex
	calls int
	next  agent.Model
	reqs  []agent.Request
}

func (r *recorder) Complete(ctx context.Context, req agent.Request) (agent.Response, error) {
	r.mu.Lock()
	r.calls++
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.next.Complete(ctx, req)
}

func (r *recorder) lastMessage(call int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := r.reqs[call].Messages
	return ms[len(ms)-1].Content
}

func newE2E(t *testing.T, script func(agent.Request) agent.Response) *e2e {
	t.Helper()
	todo := todoisttest.New(t)
	tasks := todoist.New(todo.Token, todo.URL, todo.Client(), todoist.WithBackoff(1e6, 1e7))
	return &e2e{todo: todo, tasks: tasks, model: &recorder{next: newModel(t, script)}}
}

// inbox and projects render the fake's state for comparisons.
func (e *e2e) where() map[string][]string {
	names := map[string]string{}
	for _, p := range e.todo.Projects() {
		names[p.ID] = p.Name
	}
	out := map[string][]string{}
	for _, task := range e.todo.Tasks() {
		out[names[task.ProjectID]] = append(out[names[task.ProjectID]], task.Content)
	}
	return out
}

func toolReply(calls ...agent.ToolCall) agent.Response {
	for i := range calls {
		calls[i].ID = fmt.Sprintf("call_%d", i)
	}
	return agent.Response{ToolCalls: calls}
}

func tc(name, args string) agent.ToolCall { return agent.ToolCall{Name: name, Arguments: args} }

// restarted returns tr as a restart reads it: encoded and decoded.
func restarted(t *testing.T, tr *agent.Transcript) *agent.Transcript {
	t.Helper()
	b, err := agent.MarshalTranscript(tr)
	if err != nil {
		t.Fatal(err)
	}
	back, err := agent.UnmarshalTranscript(b)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// steps returns a script answering the n-th model call (from 1) with
// reply(n, req), one call at a time.
func steps(reply func(n int, req agent.Request) agent.Response) func(agent.Request) agent.Response {
	var mu sync.Mutex
	n := 0
	return func(req agent.Request) agent.Response {
		mu.Lock()
		defer mu.Unlock()
		n++
		return reply(n, req)
	}
}

// replies returns a script answering from a list, one per call.
func replies(rs ...agent.Response) func(agent.Request) agent.Response {
	var mu sync.Mutex
	i := 0
	return func(agent.Request) agent.Response {
		mu.Lock()
		defer mu.Unlock()
		if i >= len(rs) {
			return agent.Response{Content: `{"thought":"out of script","action":{"type":"fail_task","reason":"script exhausted"}}`}
		}
		i++
		return rs[i-1]
	}
}

func TestTidyTheTalksInbox(t *testing.T) {
	for _, tc := range []struct {
		proto              agent.Protocol
		overview           bool
		wantCalls, wantReq int
	}{
		// One GET /user for the user's time zone, the overview, the
		// moves; the final answer comes with the moves.
		{agent.ProtocolTools, false, 2, 3},
		// One action a reply: the answer needs a call of its own.
		{agent.ProtocolJSON, false, 3, 3},
		// Prefetched: the overview's /sync tells the time zone too, and
		// the first reply moves and answers.
		{agent.ProtocolTools, true, 1, 2},
		{agent.ProtocolJSON, true, 2, 2},
	} {
		proto := tc.proto
		name := string(proto)
		if tc.overview {
			name += "/prefetched"
		}
		t.Run(name, func(t *testing.T) {
			tidier := &sim.Tidier{Groups: sim.TalkGroups}
			e := newE2E(t, tidier.Reply)
			e.todo.SeedTalkInbox()
			var events []string
			out := agent.New(e.model, e.tasks, agent.Config{Protocol: proto}).Start(t.Context(),
				agent.Input{Instruction: "Tidy my inbox", Overview: tc.overview, Policy: agent.PolicyCommand}, agent.Hooks{Observe: func(ev agent.Event) {
					if ev.Kind == agent.EventAction {
						events = append(events, ev.Summary)
					}
				}})
			if out.Status != agent.StatusDone {
				t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
			}
			got := e.where()
			if len(got["Inbox"]) != 0 || len(got["PyData Talk"]) != 3 || len(got["Birthday Celebration"]) != 3 || len(got["Personal Website"]) != 3 {
				t.Errorf("state after tidy: %v", got)
			}
			wantCalls, wantReqs := tc.wantCalls, tc.wantReq
			if e.model.calls != wantCalls || e.todo.TotalRequests() != wantReqs {
				t.Errorf("model calls %d, Todoist requests %d; want %d and %d", e.model.calls, e.todo.TotalRequests(), wantCalls, wantReqs)
			}
			if j := strings.Join(events, " | "); !strings.Contains(j, "➡️ Moved 9 tasks into 3 projects") {
				t.Errorf("progress: %s", j)
			}
		})
	}
}

func TestFaultsAreRecovered(t *testing.T) {
	t.Run("apology around fenced JSON costs no model call", func(t *testing.T) {
		e := newE2E(t, replies(
			agent.Response{Content: "My apologies for the confusion. Here is the correct response:\n```json\n{\"thought\": \"read\", \"action\": {\"type\": \"get_inbox_tasks\"},}\n```"},
			agent.Response{Content: `{"thought":"ok","action":{"type":"final_answer","answer":"Your inbox has 9 tasks."}}`},
		))
		e.todo.SeedTalkInbox()
		out := agent.New(e.model, e.tasks, agent.Config{Protocol: agent.ProtocolJSON}).Start(t.Context(), agent.Input{Instruction: "what's in my inbox?"}, agent.Hooks{})
		if out.Status != agent.StatusDone || e.model.calls != 2 {
			t.Fatalf("outcome %s %q after %d calls", out.Status, out.Answer, e.model.calls)
		}
	})
	t.Run("invented action, wrong field and missing field get repair prompts", func(t *testing.T) {
		e := newE2E(t, replies(
			agent.Response{Content: `{"thought":"loop","action":{"type":"Loop through each task in the inbox"}}`},
			agent.Response{Content: `{"thought":"x","action":{"type":"create_project","title":"Trip"}}`},
			agent.Response{Content: `{"thought":"x","action":{"type":"create_project","name":"Trip"}}`},
			agent.Response{Content: `{"thought":"x","action":{"type":"create_section","name":"Bookings"}}`},
			agent.Response{Content: `{"thought":"x","action":{"type":"final_answer","answer":"Created Trip."}}`},
		))
		out := agent.New(e.model, e.tasks, agent.Config{Protocol: agent.ProtocolJSON}).Start(t.Context(), agent.Input{Instruction: "make a Trip project"}, agent.Hooks{})
		if out.Status != agent.StatusDone {
			t.Fatalf("outcome %s %q", out.Status, out.Answer)
		}
		for call, want := range map[int][]string{
			1: {"there is no action", "Loop through each task", "Valid actions: get_overview"},
			2: {"additional properties 'title' not allowed", "missing property 'name'"},
			4: {"missing property 'project_id'"},
		} {
			for _, w := range want {
				if msg := e.model.lastMessage(call); !strings.Contains(msg, w) {
					t.Errorf("repair prompt %d lacks %q:\n%s", call, w, msg)
				}
			}
		}
		if _, ok := e.todo.ProjectByName("Trip"); !ok {
			t.Error("Trip was not created")
		}
	})
	t.Run("unknown project id names close matches", func(t *testing.T) {
		e := newE2E(t, nil)
		tasks := e.todo.SeedTalkInbox()
		bday := e.todo.AddProject(todoisttest.Project{Name: "Birthday"})
		e.model.next = newModel(t, replies(
			toolReply(tc(agent.ActGetProjects, `{}`)),
			toolReply(tc(agent.ActMoveTasks, fmt.Sprintf(`{"moves":[{"task_id":%q,"project_id":"birthday"}]}`, tasks[3].ID))),
			toolReply(tc(agent.ActMoveTasks, fmt.Sprintf(`{"moves":[{"task_id":%q,"project_id":%q}]}`, tasks[3].ID, bday.ID+"x"))),
			toolReply(tc(agent.ActFinalAnswer, `{"answer":"gave up"}`)),
		))
		out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "file the submitted abstract"}, agent.Hooks{})
		obs := e.model.lastMessage(3)
		if !strings.Contains(obs, "no project with id "+bday.ID+"x") || !strings.Contains(obs, shown(out.Transcript, bday.ID)+` "Birthday"`) {
			t.Errorf("observation: %s", obs)
		}
		if e.todo.SyncRequests() != 1 {
			t.Errorf("/sync requests = %d: a bad id from a fresh list must not reach Todoist", e.todo.SyncRequests())
		}
	})
	t.Run("duplicate project is reused", func(t *testing.T) {
		e := newE2E(t, replies(
			toolReply(tc(agent.ActCreateProject, `{"name":"birthday celebration"}`)),
			toolReply(tc(agent.ActFinalAnswer, `{"answer":"ok"}`)),
		))
		p := e.todo.AddProject(todoisttest.Project{Name: "Birthday Celebration"})
		out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "x"}, agent.Hooks{})
		if obs := e.model.lastMessage(1); !strings.Contains(obs, "already exists: id "+shown(out.Transcript, p.ID)) {
			t.Errorf("observation: %s", obs)
		}
		if n := len(e.todo.Projects()); n != 2 {
			t.Errorf("projects = %d, want 2 (Inbox and the existing one)", n)
		}
	})
	t.Run("Todoist 429 is waited out", func(t *testing.T) {
		tidier := &sim.Tidier{Groups: sim.TalkGroups}
		e := newE2E(t, tidier.Reply)
		e.todo.SeedTalkInbox()
		e.todo.FailNext("/sync", 1, todoisttest.Fault{Status: 429, RetryAfter: "0"})
		out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "tidy", Policy: agent.PolicyCommand}, agent.Hooks{})
		if out.Status != agent.StatusDone || len(e.where()["Inbox"]) != 0 {
			t.Fatalf("outcome %s %q; state %v", out.Status, out.Answer, e.where())
		}
	})
}

func TestAskUserSuspendsAndResumes(t *testing.T) {
	e := newE2E(t, nil)
	tasks := e.todo.SeedTalkInbox()
	e.model.next = newModel(t, replies(
		toolReply(tc(agent.ActAskUser, `{"question":"Which project should the cake go to?","options":["Birthday","Groceries"]}`)),
		toolReply(tc(agent.ActMoveTasks, fmt.Sprintf(`{"moves":[{"task_id":%q,"project_name":"Birthday"}]}`, tasks[3].ID))),
		toolReply(tc(agent.ActFinalAnswer, `{"answer":"Filed it under Birthday."}`)),
	))
	eng := agent.New(e.model, e.tasks, agent.Config{})
	out := eng.Start(t.Context(), agent.Input{Instruction: "file the abstract"}, agent.Hooks{})
	if out.Status != agent.StatusAsking || len(out.Options) != 2 {
		t.Fatalf("outcome %+v", out)
	}
	raw, _ := agent.MarshalTranscript(out.Transcript)
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatalf("transcript is not JSON: %v", err)
	}
	tr, err := agent.UnmarshalTranscript(raw)
	if err != nil {
		t.Fatal(err)
	}
	// A new engine: as after a restart.
	out = agent.New(e.model, e.tasks, agent.Config{}).Resume(t.Context(), tr, "Birthday", agent.Hooks{})
	if out.Status != agent.StatusDone || out.Answer != "Filed it under Birthday." {
		t.Fatalf("outcome %s %q", out.Status, out.Answer)
	}
	if got := e.where()["Birthday"]; len(got) != 1 {
		t.Errorf("state: %v", e.where())
	}
}

func TestGatedDeleteAnsweredNoDeletesNothing(t *testing.T) {
	e := newE2E(t, nil)
	tasks := e.todo.SeedTalkInbox()
	e.model.next = newModel(t, replies(
		toolReply(tc(agent.ActDeleteTasks, fmt.Sprintf(`{"task_ids":[%q]}`, tasks[0].ID))),
		toolReply(tc(agent.ActFinalAnswer, `{"answer":"Kept it."}`)),
	))
	eng := agent.New(e.model, e.tasks, agent.Config{Confirm: agent.ConfirmDestructive})
	out := eng.Start(t.Context(), agent.Input{Instruction: "delete the slides task"}, agent.Hooks{})
	if out.Status != agent.StatusConfirming || out.Label != "Delete 1 task" || !strings.Contains(out.Question, tasks[0].Content) {
		t.Fatalf("outcome %+v", out)
	}
	out = eng.Resume(t.Context(), out.Transcript, "no", agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("outcome %s", out.Status)
	}
	if _, ok := e.todo.Task(tasks[0].ID); !ok || e.todo.SyncRequests() != 0 {
		t.Errorf("the task was touched after a no (%d /sync requests)", e.todo.SyncRequests())
	}
}

func TestModel429IsWaitedOut(t *testing.T) {
	todo := todoisttest.New(t)
	todo.SeedTalkInbox()
	tidier := &sim.Tidier{Groups: sim.TalkGroups}
	first := true
	var mu sync.Mutex
	srv := openaitest.New(func(req openaitest.Request) openaitest.Reply {
		mu.Lock()
		defer mu.Unlock()
		if first {
			first = false
			return openaitest.RateLimited("0")
		}
		return openaitest.FromAgent(tidier.Reply)(req)
	})
	t.Cleanup(srv.Close)
	model := openai.New(openai.Config{APIKey: "sk-test", BaseURL: srv.URL, Model: "scripted", BackoffBase: 1e6, BackoffMax: 1e7}, srv.Client())
	tasks := todoist.New(todo.Token, todo.URL, todo.Client())
	out := agent.New(model, tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "tidy", Policy: agent.PolicyCommand}, agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if srv.Calls() != 3 || out.Transcript.Usage.Calls != 2 {
		t.Errorf("server calls %d (want 3: one 429), run's model calls %d (want 2)", srv.Calls(), out.Transcript.Usage.Calls)
	}
}

// lossyTransport delivers one /sync request, then loses the response
// and stops the run, as a crash right after sending would.
type lossyTransport struct {
	next    http.RoundTripper
	stop    context.CancelFunc
	mu      sync.Mutex
	tripped bool
}

func (l *lossyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && strings.HasSuffix(req.URL.Path, "/sync") && req.Method == http.MethodPost && !l.tripped && resp.StatusCode == 200 {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "sync_status") {
			l.tripped = true
			l.stop()
			return nil, context.Canceled
		}
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
	}
	return resp, err
}

// crashingTasks is a Todoist client on e's fake whose first write's
// response is lost, with its transport (tripped once it has lost it) and
// the run context that this loss cancels.
func crashingTasks(t *testing.T, e *e2e) (context.Context, *todoist.Client, *lossyTransport) {
	ctx, cancel := context.WithCancel(t.Context())
	lossy := &lossyTransport{next: e.todo.Client().Transport, stop: cancel}
	if lossy.next == nil {
		lossy.next = http.DefaultTransport
	}
	return ctx, todoist.New(e.todo.Token, e.todo.URL, &http.Client{Transport: lossy, Timeout: 10 * time.Second}), lossy
}

func TestResumedWriteIsAppliedOnce(t *testing.T) {
	tidier := &sim.Tidier{Groups: sim.TalkGroups}
	e := newE2E(t, tidier.Reply)
	e.todo.SeedTalkInbox()
	ctx, tasks, lossy := crashingTasks(t, e)
	var saved []byte
	eng := agent.New(e.model, tasks, agent.Config{})
	out := eng.Start(ctx, agent.Input{Instruction: "tidy", Policy: agent.PolicyCommand}, agent.Hooks{Save: func(_ context.Context, tr *agent.Transcript) error {
		saved, _ = agent.MarshalTranscript(tr)
		return nil
	}})
	if out.Status != agent.StatusInterrupted || !lossy.tripped {
		t.Fatalf("outcome %s (tripped %v)", out.Status, lossy.tripped)
	}
	applied := e.todo.AppliedCommands()
	if applied != 12 {
		t.Fatalf("applied %d commands before the crash, want 12", applied)
	}
	tr, err := agent.UnmarshalTranscript(saved)
	if err != nil {
		t.Fatal(err)
	}
	out = agent.New(e.model, e.tasks, agent.Config{}).Resume(t.Context(), tr, "", agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	if got := e.todo.AppliedCommands(); got != applied {
		t.Errorf("applied %d commands after resuming, %d before: a write was applied twice", got, applied)
	}
	if n := len(e.todo.Projects()); n != 4 {
		t.Errorf("projects = %d, want 4 (no duplicates)", n)
	}
	for _, a := range out.Transcript.Journal {
		if a.Write.Kind == agent.AddProject && (a.NewID == "" || strings.HasPrefix(a.NewID, "tmp-")) {
			t.Errorf("created project %q has no real id after the resend: %q", a.Write.Name, a.NewID)
		}
	}
}

// Reading a big inbox again costs one small request: an incremental
// /sync, not the inbox's pages (issue 15 item 3).
func TestInboxRereadIsIncremental(t *testing.T) {
	e := newE2E(t, replies(
		toolReply(tc(agent.ActGetInboxTasks, `{}`)),
		toolReply(tc(agent.ActGetInboxTasks, `{}`)),
		toolReply(tc(agent.ActFinalAnswer, `{"answer":"ok"}`)),
	))
	e.todo.SeedInbox(1000, 5)
	out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "Tidy my inbox", Overview: true}, agent.Hooks{})
	if out.Status != agent.StatusDone {
		t.Fatalf("outcome %s %q %v", out.Status, out.Answer, out.Err)
	}
	// The prefetched overview (a full sync) and two incremental ones.
	if n, full := e.todo.TotalRequests(), e.todo.FullSyncs(); n != 3 || full != 1 {
		t.Errorf("%d Todoist requests, %d full syncs; want 3 and 1", n, full)
	}
	if obs := e.model.lastMessage(2); !strings.Contains(obs, "Inbox tasks (1000)") {
		t.Errorf("the second read says %.80q", obs)
	}
}

// 100 moves into a new project go out in two requests; the second fails
// for good. The project and the 99 moves of the first request are
// journaled, reported and undone through the real client (issue 20
// item 7).
func TestPartialBatchIsJournaledThroughTheClient(t *testing.T) {
	e := newE2E(t, nil)
	tasks := e.todo.SeedInbox(100, 2)
	var moves []string
	for _, task := range tasks {
		moves = append(moves, fmt.Sprintf(`{"task_id":%q,"project_name":"Trip"}`, task.ID))
	}
	e.model.next = newModel(t, replies(
		toolReply(tc(agent.ActMoveTasks, `{"moves":[`+strings.Join(moves, ",")+`]}`), tc(agent.ActFinalAnswer, `{"answer":"Filed all 100."}`)),
		toolReply(tc(agent.ActFinalAnswer, `{"answer":"Filed 99; Todoist refused the last one."}`)),
	))
	e.todo.FailAfter("/sync", 1, -1, todoisttest.Fault{Status: 403})
	eng := agent.New(e.model, e.tasks, agent.Config{})
	out := eng.Start(t.Context(), agent.Input{Instruction: "file the PyData talk and birthday party tasks under Trip"}, agent.Hooks{})
	if out.Status != agent.StatusDone || out.Answer != "Filed 99; Todoist refused the last one." {
		t.Fatalf("outcome %s %q", out.Status, out.Answer)
	}
	if got := len(e.where()["Trip"]); got != 99 {
		t.Fatalf("%d tasks in Trip, want 99", got)
	}
	if got := len(out.Transcript.Journal); got != 100 {
		t.Errorf("journal has %d entries, want 100 (the project and 99 moves)", got)
	}
	var obs string
	for _, m := range e.model.reqs[1].Messages {
		if m.Role == agent.RoleTool && m.ToolCallID == "call_0" {
			obs = m.Content
		}
	}
	if !strings.Contains(obs, "not confirmed: "+shown(out.Transcript, tasks[99].ID)) || strings.Count(obs, "✓ Moved") != 99 {
		t.Errorf("observation ends with %q", obs[max(0, len(obs)-300):])
	}
	e.todo.ClearFaults()
	rep, err := eng.Undo(t.Context(), out.Transcript.Journal)
	if err != nil || len(rep.NotUndone) > 0 {
		t.Fatalf("undo: %v, not undone %v", err, rep.NotUndone)
	}
	if got := len(e.where()["Inbox"]); got != 100 || len(e.todo.Projects()) != 1 {
		t.Errorf("after undo: %d in the inbox, %d projects", got, len(e.todo.Projects()))
	}
}

// A task added to an Inbox the run never read, then moved: the move's
// undo must know where the task was. Found by TestEngineRandomized: the
// undo of the move had no destination and Todoist refused the whole undo.
func TestUndoMoveOfATaskAddedToAnUnreadInbox(t *testing.T) {
	e := newE2E(t, nil)
	e.todo.SeedTalkInbox()
	before := e.where()
	e.model.next = newModel(t, func(req agent.Request) agent.Response {
		last := req.Messages[len(req.Messages)-1].Content
		switch {
		case strings.HasPrefix(last, "✓ Added"):
			_, id, _ := strings.Cut(last, ": id ")
			return toolReply(tc(agent.ActMoveTasks, fmt.Sprintf(`{"moves":[{"task_id":%q,"project_name":"Trip"}]}`, strings.TrimSpace(id))))
		case strings.HasPrefix(last, "✓ Created"):
			return toolReply(tc(agent.ActFinalAnswer, `{"answer":"done"}`))
		}
		return toolReply(tc(agent.ActAddTasks, `{"tasks":[{"content":"Pack bags"}]}`))
	})
	eng := agent.New(e.model, e.tasks, agent.Config{})
	out := eng.Start(t.Context(), agent.Input{Instruction: "add pack bags and file it under Trip"}, agent.Hooks{})
	if out.Status != agent.StatusDone || len(out.Transcript.Journal) != 3 {
		t.Fatalf("outcome %s %q, journal %d", out.Status, out.Answer, len(out.Transcript.Journal))
	}
	if rep, err := eng.Undo(t.Context(), out.Transcript.Journal); err != nil || len(rep.NotUndone) > 0 {
		t.Fatalf("undo: %v, not undone %v", err, rep.NotUndone)
	}
	if got := e.where(); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("after undo %v, want %v", got, before)
	}
}

// A section the run created is removed by undo once nothing else is in
// it: Todoist deletes a section's tasks with it, so a section that got a
// task since is kept, and said so.
func TestUndoRemovesACreatedSection(t *testing.T) {
	for _, added := range []bool{false, true} {
		t.Run(fmt.Sprintf("task added since %v", added), func(t *testing.T) {
			e := newE2E(t, nil)
			home := e.todo.AddProject(todoisttest.Project{Name: "Home"})
			tap := e.todo.AddTask(todoisttest.Task{Content: "Fix tap", ProjectID: home.ID})
			e.model.next = newModel(t, func(req agent.Request) agent.Response {
				last := req.Messages[len(req.Messages)-1].Content
				if strings.HasPrefix(last, "✓ Created section") {
					_, id, _ := strings.Cut(last, ": id ")
					return toolReply(tc(agent.ActMoveTasks, fmt.Sprintf(`{"moves":[{"task_id":%q,"section_id":%q}]}`, tap.ID, strings.TrimSpace(id))))
				}
				if strings.HasPrefix(last, "✓ Moved") {
					return toolReply(tc(agent.ActFinalAnswer, `{"answer":"done"}`))
				}
				return toolReply(tc(agent.ActCreateSection, fmt.Sprintf(`{"project_id":%q,"name":"Kitchen"}`, home.ID)))
			})
			eng := agent.New(e.model, e.tasks, agent.Config{})
			out := eng.Start(t.Context(), agent.Input{Instruction: "fix tap: a kitchen section for it"}, agent.Hooks{})
			if out.Status != agent.StatusDone || len(e.todo.Sections()) != 1 {
				t.Fatalf("outcome %s %q, sections %v", out.Status, out.Answer, e.todo.Sections())
			}
			if added {
				e.todo.AddTask(todoisttest.Task{Content: "Buy sponges", ProjectID: home.ID, SectionID: e.todo.Sections()[0].ID})
			}
			rep, err := eng.Undo(t.Context(), out.Transcript.Journal)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := e.todo.Task(tap.ID)
			if got.SectionID != "" || got.ProjectID != home.ID {
				t.Errorf("the tap after undo: %+v", got)
			}
			if added {
				if len(e.todo.Sections()) != 1 || len(rep.NotUndone) != 1 || !strings.Contains(rep.NotUndone[0], "kept") {
					t.Errorf("sections %v, not undone %v: want the section kept with its new task", e.todo.Sections(), rep.NotUndone)
				}
				return
			}
			if len(e.todo.Sections()) != 0 || len(rep.NotUndone) != 0 {
				t.Errorf("sections %v, not undone %v: want the section gone", e.todo.Sections(), rep.NotUndone)
			}
		})
	}
}

// In a batch that failed as a whole, a write Todoist refused on its own
// is reported with its own reason; only the writes the failure left
// unknown are "not confirmed".
func TestPartialBatchKeepsEachWritesOwnFailure(t *testing.T) {
	e := newE2E(t, nil)
	tasks := e.todo.SeedInbox(100, 2)
	work := e.todo.AddProject(todoisttest.Project{Name: "Work"})
	var moves []string
	for i, task := range tasks {
		if i < 50 {
			moves = append(moves, fmt.Sprintf(`{"task_id":%q,"project_id":%q}`, task.ID, work.ID))
		} else { // a new project: 101 writes, two requests
			moves = append(moves, fmt.Sprintf(`{"task_id":%q,"project_name":"Trip"}`, task.ID))
		}
	}
	e.model.next = newModel(t, replies(
		toolReply(tc(agent.ActMoveTasks, `{"moves":[`+strings.Join(moves, ",")+`]}`)),
		toolReply(tc(agent.ActFinalAnswer, `{"answer":"Filed 98."}`)),
	))
	e.todo.FailCommands(1, todoisttest.Fault{Status: 400})
	e.todo.FailAfter("/sync", 1, -1, todoisttest.Fault{Status: 403})
	out := agent.New(e.model, e.tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "file the PyData talk and birthday party tasks under Work and Trip"}, agent.Hooks{})
	var obs string
	for _, m := range e.model.reqs[1].Messages {
		if m.Role == agent.RoleTool && m.ToolCallID == "call_0" {
			obs = m.Content
		}
	}
	if out.Status != agent.StatusDone || len(out.Transcript.Journal) != 99 {
		t.Fatalf("outcome %s %q, journal %d, want 99; observation:\n%s", out.Status, out.Answer, len(out.Transcript.Journal), obs[max(0, len(obs)-600):])
	}
	if !strings.Contains(obs, "✗ "+shown(out.Transcript, tasks[0].ID)+": ") || !strings.Contains(obs, "not confirmed: "+shown(out.Transcript, tasks[99].ID)+".") {
		t.Errorf("observation:\n%s", obs[max(0, len(obs)-400):])
	}
}

// shown is how observations name id: by the alias the run gave it (see
// alias.go), or as it is.
func shown(tr *agent.Transcript, id string) string {
	for a, x := range tr.Known.Aliases {
		if x == id {
			return a
		}
	}
	return id
}
