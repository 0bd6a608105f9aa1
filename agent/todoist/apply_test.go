package todoist_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

func strp(s string) *string { return &s }

// w returns a write with a fresh uuid.
func w(write agent.Write) agent.Write {
	write.UUID = agent.NewUUID()
	return write
}

func TestApplyEachKind(t *testing.T) {
	c, srv := newClient(t)
	inbox := srv.InboxID()
	home := srv.AddProject(todoisttest.Project{Name: "Home"})
	kitchen := srv.AddSection(todoisttest.Section{ProjectID: home.ID, Name: "Kitchen"})
	task := srv.AddTask(todoisttest.Task{Content: "Fix tap", Labels: []string{"old"}, Due: &todoisttest.Due{String: "tomorrow"}, Priority: 2})
	doomed := srv.AddTask(todoisttest.Task{Content: "Doomed"})
	oldProject := srv.AddProject(todoisttest.Project{Name: "Old"})

	tests := []struct {
		name  string
		write agent.Write
		check func(t *testing.T, res agent.WriteResult)
	}{
		{"project_add", agent.Write{Kind: agent.AddProject, Name: " Garden ", ParentID: home.ID}, func(t *testing.T, res agent.WriteResult) {
			p, ok := srv.Project(res.NewID)
			if !ok || p.Name != "Garden" || p.ParentID != home.ID {
				t.Errorf("project %+v (found %v)", p, ok)
			}
		}},
		{"section_add", agent.Write{Kind: agent.AddSection, Name: "Pantry", ProjectID: home.ID}, func(t *testing.T, res agent.WriteResult) {
			for _, s := range srv.Sections() {
				if s.ID == res.NewID && s.Name == "Pantry" && s.ProjectID == home.ID {
					return
				}
			}
			t.Errorf("no section %s", res.NewID)
		}},
		{"label_add", agent.Write{Kind: agent.AddLabel, Name: "errand"}, func(t *testing.T, res agent.WriteResult) {
			if ls := srv.Labels(); len(ls) != 1 || ls[0].ID != res.NewID || ls[0].Name != "errand" {
				t.Errorf("labels %+v", ls)
			}
		}},
		{"item_add", agent.Write{Kind: agent.AddTask, Content: strp("Buy bread"), Description: strp("rye"), SectionID: kitchen.ID,
			DueString: strp("every mon"), Priority: agent.P1, Labels: &[]string{"errand"}}, func(t *testing.T, res agent.WriteResult) {
			got, _ := srv.Task(res.NewID)
			if got.Content != "Buy bread" || got.Description != "rye" || got.ProjectID != home.ID || got.SectionID != kitchen.ID ||
				got.Priority != 4 || got.Due == nil || got.Due.String != "every mon" || !got.Due.IsRecurring || !reflect.DeepEqual(got.Labels, []string{"errand"}) {
				t.Errorf("task %+v due %+v", got, got.Due)
			}
		}},
		{"item_add to the inbox by default", agent.Write{Kind: agent.AddTask, Content: strp("Call mum")}, func(t *testing.T, res agent.WriteResult) {
			got, _ := srv.Task(res.NewID)
			if got.ProjectID != inbox || got.Priority != 1 || got.Due != nil {
				t.Errorf("task %+v", got)
			}
		}},
		{"item_update priority and labels only", agent.Write{Kind: agent.UpdateTask, ID: task.ID, Priority: agent.P4, Labels: &[]string{}}, func(t *testing.T, res agent.WriteResult) {
			got, _ := srv.Task(task.ID)
			if got.Priority != 1 || len(got.Labels) != 0 || got.Content != "Fix tap" || got.Due == nil {
				t.Errorf("task %+v", got)
			}
		}},
		{"item_update content and due", agent.Write{Kind: agent.UpdateTask, ID: task.ID, Content: strp("Fix the tap"), DueString: strp("next monday")}, func(t *testing.T, res agent.WriteResult) {
			got, _ := srv.Task(task.ID)
			if got.Content != "Fix the tap" || got.Due == nil || got.Due.String != "next monday" {
				t.Errorf("task %+v", got)
			}
		}},
		{"item_update no date", agent.Write{Kind: agent.UpdateTask, ID: task.ID, DueString: strp("no date")}, func(t *testing.T, res agent.WriteResult) {
			if got, _ := srv.Task(task.ID); got.Due != nil {
				t.Errorf("due %+v, want none", got.Due)
			}
		}},
		{"item_move to a section", agent.Write{Kind: agent.MoveTask, ID: task.ID, SectionID: kitchen.ID}, func(t *testing.T, res agent.WriteResult) {
			if got, _ := srv.Task(task.ID); got.ProjectID != home.ID || got.SectionID != kitchen.ID {
				t.Errorf("task %+v", got)
			}
		}},
		{"item_move to a project", agent.Write{Kind: agent.MoveTask, ID: task.ID, ProjectID: inbox}, func(t *testing.T, res agent.WriteResult) {
			if got, _ := srv.Task(task.ID); got.ProjectID != inbox || got.SectionID != "" {
				t.Errorf("task %+v", got)
			}
		}},
		{"item_close", agent.Write{Kind: agent.CloseTask, ID: task.ID}, func(t *testing.T, res agent.WriteResult) {
			if got, _ := srv.Task(task.ID); !got.Checked {
				t.Errorf("task %+v is open", got)
			}
		}},
		{"item_uncomplete", agent.Write{Kind: agent.ReopenTask, ID: task.ID}, func(t *testing.T, res agent.WriteResult) {
			if got, _ := srv.Task(task.ID); got.Checked {
				t.Errorf("task %+v is closed", got)
			}
		}},
		{"item_delete", agent.Write{Kind: agent.DeleteTask, ID: doomed.ID}, func(t *testing.T, res agent.WriteResult) {
			if _, ok := srv.Task(doomed.ID); ok {
				t.Error("task still there")
			}
		}},
		{"project_delete", agent.Write{Kind: agent.DeleteProject, ID: oldProject.ID}, func(t *testing.T, res agent.WriteResult) {
			if _, ok := srv.Project(oldProject.ID); ok {
				t.Error("project still there")
			}
		}},
		{"section_delete", agent.Write{Kind: agent.DeleteSection, ID: kitchen.ID}, func(t *testing.T, res agent.WriteResult) {
			for _, s := range srv.Sections() {
				if s.ID == kitchen.ID {
					t.Error("section still there")
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			write := w(tt.write)
			res, err := c.Apply(t.Context(), []agent.Write{write})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 1 || res[0].Err != nil || res[0].UUID != write.UUID {
				t.Fatalf("results %+v", res)
			}
			if got := srv.Applied(write.UUID); got != 1 {
				t.Errorf("Applied = %d, want 1", got)
			}
			tt.check(t, res[0])
		})
	}
}

func TestApplyBatchesOf100(t *testing.T) {
	c, srv := newClient(t)
	tasks := srv.SeedInbox(250, 5)
	dest := srv.AddProject(todoisttest.Project{Name: "Archive"})
	ws := make([]agent.Write, len(tasks))
	for i, task := range tasks {
		ws[i] = w(agent.Write{Kind: agent.MoveTask, ID: task.ID, ProjectID: dest.ID})
	}
	srv.ResetCounters()
	res, err := c.Apply(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.Requests("/sync"); n != 3 {
		t.Errorf("%d /sync requests for 250 moves, want 3", n)
	}
	if n := srv.TotalRequests(); n != 3 {
		t.Errorf("%d requests in all, want 3", n)
	}
	for i, r := range res {
		if r.Err != nil || r.UUID != ws[i].UUID {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if got := len(srv.TasksIn(dest.ID)); got != 250 {
		t.Errorf("%d tasks moved, want 250", got)
	}
	// In order: the tasks keep their order in the destination.
	for i, task := range srv.TasksIn(dest.ID) {
		if task.ID != tasks[i].ID {
			t.Fatalf("task %d in the destination is %s, want %s", i, task.ID, tasks[i].ID)
		}
	}
}

func TestApplyTempIDOneRequest(t *testing.T) {
	c, srv := newClient(t)
	tasks := srv.SeedTalkInbox()
	ws := []agent.Write{w(agent.Write{Kind: agent.AddProject, TempID: "tmp-birthday", Name: "Birthday"})}
	for _, i := range []int{1, 4, 7} {
		ws = append(ws, w(agent.Write{Kind: agent.MoveTask, ID: tasks[i].ID, ProjectID: "tmp-birthday"}))
	}
	ws = append(ws,
		w(agent.Write{Kind: agent.AddSection, TempID: "tmp-food", Name: "Food", ProjectID: "tmp-birthday"}),
		w(agent.Write{Kind: agent.AddTask, Content: strp("Order balloons"), SectionID: "tmp-food"}))
	srv.ResetCounters()
	res, err := c.Apply(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.TotalRequests(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Errorf("write %d: %v", i, r.Err)
		}
	}
	p, ok := srv.ProjectByName("Birthday")
	if !ok || res[0].NewID != p.ID {
		t.Fatalf("NewID %q, project %+v", res[0].NewID, p)
	}
	var got []string
	for _, task := range srv.TasksIn(p.ID) {
		got = append(got, task.Content)
	}
	want := []string{"Buy birthday cake for Anna", "Send invitations to birthday party", "Book a table for the birthday dinner", "Order balloons"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Birthday holds %q, want %q", got, want)
	}
	if balloons, _ := srv.Task(res[5].NewID); balloons.SectionID != res[4].NewID {
		t.Errorf("balloons in section %q, want %q", balloons.SectionID, res[4].NewID)
	}
}

func TestApplyTempIDAcrossRequests(t *testing.T) {
	c, srv := newClient(t, todoisttest.WithLimits(todoisttest.Limits{Projects: 2}))
	tasks := srv.SeedInbox(150, 3)
	// Write 0 creates "Kept", write 1 tries "Refused" (past the plan's two
	// projects); writes 2… move tasks into both, the last 50 in the second
	// request.
	ws := []agent.Write{
		w(agent.Write{Kind: agent.AddProject, TempID: "tmp-kept", Name: "Kept"}),
		w(agent.Write{Kind: agent.AddProject, TempID: "tmp-refused", Name: "Refused"}),
	}
	for i, task := range tasks {
		dest := "tmp-kept"
		if i%2 == 1 {
			dest = "tmp-refused"
		}
		ws = append(ws, w(agent.Write{Kind: agent.MoveTask, ID: task.ID, ProjectID: dest}))
	}
	srv.ResetCounters()
	res, err := c.Apply(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.Requests("/sync"); n != 2 {
		t.Errorf("%d /sync requests, want 2", n)
	}
	kept := res[0].NewID
	if res[0].Err != nil || kept == "" {
		t.Fatalf("create: %+v", res[0])
	}
	wantCode(t, res[1].Err, agent.ErrPlanLimit)
	for i := 2; i < len(ws); i++ {
		switch {
		case ws[i].ProjectID == "tmp-kept" && res[i].Err != nil:
			t.Errorf("write %d into Kept: %v", i, res[i].Err)
		case ws[i].ProjectID == "tmp-refused":
			e := wantCode(t, res[i].Err, agent.ErrNotFound)
			if !strings.HasPrefix(e.Message, "no project with id tmp-refused") {
				t.Errorf("write %d: %q", i, e.Message)
			}
		}
	}
	if got := len(srv.TasksIn(kept)); got != 75 {
		t.Errorf("%d tasks in Kept, want 75", got)
	}
	// The second request carried the real id, not the temp id.
	if got := srv.Applied(ws[len(ws)-2].UUID); got != 1 {
		t.Errorf("last move into Kept applied %d times", got)
	}
}

func TestApplyTwiceAppliesOnce(t *testing.T) {
	c, srv := newClient(t)
	tasks := srv.SeedTalkInbox()
	ws := []agent.Write{
		w(agent.Write{Kind: agent.AddProject, TempID: "tmp-web", Name: "Website"}),
		w(agent.Write{Kind: agent.MoveTask, ID: tasks[2].ID, ProjectID: "tmp-web"}),
		w(agent.Write{Kind: agent.AddTask, Content: strp("Buy a domain"), ProjectID: "tmp-web"}),
		w(agent.Write{Kind: agent.CloseTask, ID: tasks[5].ID}),
	}
	first, err := c.Apply(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	after := srv.Snapshot()
	second, err := c.Apply(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(srv.Snapshot(), after) {
		t.Error("the re-sent batch changed the state")
	}
	for _, write := range ws {
		if n := srv.Applied(write.UUID); n != 1 {
			t.Errorf("%s applied %d times, want 1", write.Kind, n)
		}
	}
	for i := range ws {
		if first[i].Err != nil || second[i].Err != nil || first[i].NewID != second[i].NewID {
			t.Errorf("write %d: first %+v, second %+v", i, first[i], second[i])
		}
	}
	if n := len(srv.Projects()); n != 2 {
		t.Errorf("%d projects, want 2", n)
	}
}

func TestApplyPartialFailure(t *testing.T) {
	c, srv := newClient(t)
	tasks := srv.SeedTalkInbox()
	home := srv.AddProject(todoisttest.Project{Name: "Home"})
	ws := []agent.Write{
		w(agent.Write{Kind: agent.MoveTask, ID: tasks[0].ID, ProjectID: home.ID}),
		w(agent.Write{Kind: agent.MoveTask, ID: "unknown_id", ProjectID: home.ID}),
		w(agent.Write{Kind: agent.MoveTask, ID: tasks[1].ID, ProjectID: "6X7rM8997g3RQmvh"}),
		w(agent.Write{Kind: agent.CloseTask, ID: "AAAAAAAAAAAAAAAA"}),
		w(agent.Write{Kind: agent.MoveTask, ID: tasks[2].ID, SectionID: "BBBBBBBBBBBBBBBB"}),
		w(agent.Write{Kind: agent.AddTask, Content: strp("Soon"), DueString: strp("when pigs fly")}),
		w(agent.Write{Kind: agent.CloseTask, ID: tasks[3].ID}),
	}
	res, err := c.Apply(t.Context(), ws)
	if err != nil {
		t.Fatalf("a partial failure is not a batch error: %v", err)
	}
	want := []struct {
		code agent.ErrorCode
		msg  string
	}{
		{},
		{agent.ErrNotFound, "no task with id unknown_id"},
		{agent.ErrNotFound, "no project with id 6X7rM8997g3RQmvh"},
		{agent.ErrNotFound, "no task with id AAAAAAAAAAAAAAAA"},
		{agent.ErrNotFound, "no section with id BBBBBBBBBBBBBBBB"},
		{agent.ErrInvalid, `Todoist rejected item_add "Soon": Invalid date format (argument due)`},
		{},
	}
	for i, wt := range want {
		if wt.code == "" {
			if res[i].Err != nil {
				t.Errorf("write %d failed: %v", i, res[i].Err)
			}
			continue
		}
		if got := agent.ErrorCodeOf(res[i].Err); got != wt.code {
			t.Errorf("write %d: code %q, want %q (%v)", i, got, wt.code, res[i].Err)
		}
		if got := agent.ErrorMessageOf(res[i].Err); got != wt.msg {
			t.Errorf("write %d: message %q, want %q", i, got, wt.msg)
		}
	}
	if got, _ := srv.Task(tasks[0].ID); got.ProjectID != home.ID {
		t.Error("the good move was not applied")
	}
	if got, _ := srv.Task(tasks[3].ID); !got.Checked {
		t.Error("the good close was not applied")
	}
}

func TestApplyValidatesBeforeSending(t *testing.T) {
	c, srv := newClient(t)
	ok := w(agent.Write{Kind: agent.AddTask, Content: strp("fine")})
	long := strings.Repeat("x", 501)
	tests := []struct {
		name   string
		writes []agent.Write
		want   string
	}{
		{"empty batch", nil, "empty batch"},
		{"no content", []agent.Write{ok, w(agent.Write{Kind: agent.AddTask})}, "write 2 of 2 (item_add): the task content is empty"},
		{"blank content", []agent.Write{w(agent.Write{Kind: agent.AddTask, Content: strp("  ")})}, "the task content is empty"},
		{"blank content in an update", []agent.Write{w(agent.Write{Kind: agent.UpdateTask, ID: "x", Content: strp("")})}, "the task content is empty"},
		{"content over 500 characters", []agent.Write{w(agent.Write{Kind: agent.AddTask, Content: &long})}, "501 characters long; at most 500"},
		{"priority p5", []agent.Write{w(agent.Write{Kind: agent.AddTask, Content: strp("a"), Priority: "p5"})}, `priority "p5" is not one of p1`},
		{"priority high", []agent.Write{w(agent.Write{Kind: agent.UpdateTask, ID: "x", Priority: "high"})}, `priority "high"`},
		{"update without id", []agent.Write{w(agent.Write{Kind: agent.UpdateTask, Content: strp("a")})}, "empty task id"},
		{"move without id", []agent.Write{w(agent.Write{Kind: agent.MoveTask, ProjectID: "p"})}, "empty task id"},
		{"close without id", []agent.Write{w(agent.Write{Kind: agent.CloseTask})}, "empty task id"},
		{"reopen without id", []agent.Write{w(agent.Write{Kind: agent.ReopenTask, ID: " "})}, "empty task id"},
		{"delete without id", []agent.Write{w(agent.Write{Kind: agent.DeleteTask})}, "empty task id"},
		{"project delete without id", []agent.Write{w(agent.Write{Kind: agent.DeleteProject})}, "empty project id"},
		{"project without name", []agent.Write{w(agent.Write{Kind: agent.AddProject, Name: " "})}, "empty project name"},
		{"section without name", []agent.Write{w(agent.Write{Kind: agent.AddSection, ProjectID: "p"})}, "empty section name"},
		{"section without project", []agent.Write{w(agent.Write{Kind: agent.AddSection, Name: "s"})}, "empty project id"},
		{"label without name", []agent.Write{w(agent.Write{Kind: agent.AddLabel})}, "empty label name"},
		{"move with two destinations", []agent.Write{w(agent.Write{Kind: agent.MoveTask, ID: "x", ProjectID: "p", SectionID: "s"})}, "exactly one destination"},
		{"move without destination", []agent.Write{w(agent.Write{Kind: agent.MoveTask, ID: "x"})}, "exactly one destination"},
		{"unknown kind", []agent.Write{w(agent.Write{Kind: "item_reopen", ID: "x"})}, `unknown kind of write "item_reopen"`},
		{"same uuid twice", []agent.Write{ok, ok}, "used twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.Apply(t.Context(), tt.writes)
			e := wantCode(t, err, agent.ErrInvalid)
			if !strings.Contains(e.Message, tt.want) {
				t.Errorf("message %q, want it to contain %q", e.Message, tt.want)
			}
			if res != nil {
				t.Errorf("results %+v, want none", res)
			}
			if n := srv.TotalRequests(); n != 0 {
				t.Errorf("%d requests, want 0", n)
			}
		})
	}
}

func TestApplyFillsUUIDAndTempID(t *testing.T) {
	c, srv := newClient(t)
	res, err := c.Apply(t.Context(), []agent.Write{{Kind: agent.AddProject, Name: "No ids"}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].UUID == "" || res[0].NewID == "" || srv.Applied(res[0].UUID) != 1 {
		t.Errorf("result %+v", res[0])
	}
}

func TestApplyBatchFailure(t *testing.T) {
	c, srv := newClient(t)
	tasks := srv.SeedInbox(150, 3)
	ws := make([]agent.Write, len(tasks))
	for i, task := range tasks {
		ws[i] = w(agent.Write{Kind: agent.CloseTask, ID: task.ID})
	}
	// The first 100 go through; then Todoist breaks while the whole batch
	// is sent.
	if _, err := c.Apply(t.Context(), ws[:100]); err != nil {
		t.Fatal(err)
	}
	srv.FailNext("/sync", -1, todoisttest.Fault{Status: 500})
	res, err := c.Apply(t.Context(), ws)
	wantCode(t, err, agent.ErrServer)
	if !strings.Contains(err.Error(), "apply writes 1–100 of 150") {
		t.Errorf("error %q does not say which writes", err)
	}
	if len(res) != len(ws) || res[120].Err == nil {
		t.Errorf("results of unsent writes carry no error")
	}
	// Re-sending once Todoist is back finishes the batch; the first 100
	// are not applied twice.
	srv.ClearFaults()
	res, err = c.Apply(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || srv.Applied(ws[i].UUID) != 1 {
			t.Fatalf("write %d: %v, applied %d", i, r.Err, srv.Applied(ws[i].UUID))
		}
	}
	if n := len(srv.Tasks()); n != 0 {
		t.Errorf("%d open tasks, want 0", n)
	}
}

// A batch re-sent after its first request was applied and its answer lost:
// the re-sent create is "ok" without its new id, and the write after it,
// which was never applied, cannot use its temp id. The client finds the
// new id by reading and sends that write again with it.
func TestApplyResentCreateFindsItsID(t *testing.T) {
	c, srv := newClient(t)
	srv.AddProject(todoisttest.Project{Name: "Trip"}) // an older namesake elsewhere
	old := srv.AddTask(todoisttest.Task{Content: "Book a hotel"})
	create := w(agent.Write{Kind: agent.AddProject, TempID: "tmp-trip", Name: "Trip"})
	first, err := c.Apply(t.Context(), []agent.Write{create})
	if err != nil || first[0].Err != nil || first[0].NewID == "" {
		t.Fatalf("first: %+v, %v", first, err)
	}
	ws := []agent.Write{
		create,
		w(agent.Write{Kind: agent.AddTask, TempID: "tmp-hotel", Content: strp("Book a hotel"), ProjectID: "tmp-trip"}),
		w(agent.Write{Kind: agent.MoveTask, ID: old.ID, ProjectID: "tmp-trip"}),
	}
	res, err := c.Apply(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Errorf("write %d: %v", i, r.Err)
		}
	}
	if res[0].NewID != first[0].NewID {
		t.Errorf("re-sent create's id = %q, want %q", res[0].NewID, first[0].NewID)
	}
	added, ok := srv.Task(res[1].NewID)
	if !ok || added.ProjectID != first[0].NewID || strings.HasPrefix(res[1].NewID, "tmp-") {
		t.Errorf("added task %q: %+v", res[1].NewID, added)
	}
	if moved, _ := srv.Task(old.ID); moved.ProjectID != first[0].NewID {
		t.Errorf("moved task is in %s, want %s", moved.ProjectID, first[0].NewID)
	}
	if n := srv.Applied(create.UUID); n != 1 {
		t.Errorf("the create was applied %d times", n)
	}
}

// "There is a 1 MiB HTTP request body limit on POST requests"
// (developer.todoist.com/api/v1 #tag/Request-limits): a batch of long
// tasks is split by size as well as by count.
func TestApplySplitsAtTheBodyLimit(t *testing.T) {
	c, srv := newClient(t)
	long := strings.Repeat("notes ", 2700) // 16,200 bytes, under the 16,383 limit
	ws := make([]agent.Write, 100)
	for i := range ws {
		ws[i] = w(agent.Write{Kind: agent.AddTask, Content: strp(fmt.Sprintf("Task %d", i)), Description: &long})
	}
	res, err := c.Apply(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.NewID == "" {
			t.Fatalf("write %d: %+v", i, r)
		}
	}
	if n := srv.Requests("/sync"); n != 2 {
		t.Errorf("%d /sync requests for 1.6 MB of writes, want 2", n)
	}
	if n := len(srv.Tasks()); n != 100 {
		t.Errorf("%d tasks, want 100", n)
	}
}

// A command that fails on its own asking to wait (error_extra.retry_after
// in its sync_status) is sent again after that wait, with the commands
// after it that failed because of it.
func TestApplyCommandRetryAfter(t *testing.T) {
	srv := todoisttest.New(t)
	c, rec := recordingClient(t, srv)
	srv.FailCommands(1, todoisttest.Fault{Status: 429, ExtraRetryAfter: 3})
	ws := []agent.Write{
		w(agent.Write{Kind: agent.AddProject, TempID: "tmp-p", Name: "Garden"}),
		w(agent.Write{Kind: agent.AddTask, Content: strp("Plant tulips"), ProjectID: "tmp-p"}),
	}
	res, err := c.Apply(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.NewID == "" {
			t.Errorf("write %d: %+v", i, r)
		}
	}
	if !equalDurations(rec.waits, []time.Duration{3 * time.Second}) {
		t.Errorf("waits %v, want [3s]", rec.waits)
	}
	if p, ok := srv.ProjectByName("Garden"); !ok || len(srv.TasksIn(p.ID)) != 1 {
		t.Errorf("projects %+v", srv.Projects())
	}
}

// A re-sent create whose object is gone by the time it is looked up fails
// with a message saying so, never with an empty id.
func TestApplyResentCreateThatIsGone(t *testing.T) {
	c, srv := newClient(t)
	create := w(agent.Write{Kind: agent.AddTask, TempID: "tmp-t", Content: strp("Call mum")})
	first, err := c.Apply(t.Context(), []agent.Write{create})
	if err != nil || first[0].Err != nil {
		t.Fatalf("first: %+v, %v", first, err)
	}
	if _, err := c.Apply(t.Context(), []agent.Write{w(agent.Write{Kind: agent.DeleteTask, ID: first[0].NewID})}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Apply(t.Context(), []agent.Write{create})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].NewID != "" || res[0].Err == nil || !strings.Contains(agent.ErrorMessageOf(res[0].Err), "cannot be found by reading") {
		t.Errorf("result %+v", res[0])
	}
	if n := srv.Applied(create.UUID); n != 1 {
		t.Errorf("applied %d times", n)
	}
}

// A command that asks for a longer wait than the retry budget fails at
// once, as rate limited, and nothing after it is applied out of order.
func TestApplyCommandRetryAfterBeyondBudget(t *testing.T) {
	srv := todoisttest.New(t)
	c, rec := recordingClient(t, srv)
	srv.FailCommands(-1, todoisttest.Fault{Status: 429, ExtraRetryAfter: 600})
	res, err := c.Apply(t.Context(), []agent.Write{w(agent.Write{Kind: agent.AddProject, Name: "Garden"})})
	if err != nil {
		t.Fatal(err)
	}
	if code := agent.ErrorCodeOf(res[0].Err); code != agent.ErrRateLimited || res[0].NewID != "" {
		t.Errorf("result %+v (code %s)", res[0], code)
	}
	if len(rec.waits) != 0 {
		t.Errorf("waited %v beyond the budget", rec.waits)
	}
}

// A batch split over two requests whose second fails for good: Apply
// returns the error and, with it, the results of what the first request
// applied, the new project's id included, so that the caller can report
// and undo it (issue 20 item 7); the writes of the failed request carry
// the error.
func TestApplySecondRequestFailsKeepsTheFirst(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		code   agent.ErrorCode
	}{{"server error", 500, agent.ErrServer}, {"forbidden", 403, agent.ErrForbidden}} {
		t.Run(tt.name, func(t *testing.T) {
			c, srv := newClient(t)
			tasks := srv.SeedInbox(100, 2)
			ws := []agent.Write{w(agent.Write{Kind: agent.AddProject, TempID: "tmp-trip", Name: "Trip"})}
			for _, task := range tasks {
				ws = append(ws, w(agent.Write{Kind: agent.MoveTask, ID: task.ID, ProjectID: "tmp-trip"}))
			}
			srv.FailAfter("/sync", 1, -1, todoisttest.Fault{Status: tt.status})
			res, err := c.Apply(t.Context(), ws)
			wantCode(t, err, tt.code)
			if len(res) != len(ws) {
				t.Fatalf("%d results for %d writes", len(res), len(ws))
			}
			p, ok := srv.Project(res[0].NewID)
			if res[0].Err != nil || !ok || p.Name != "Trip" {
				t.Fatalf("the project's result %+v (found %v): want its new id", res[0], ok)
			}
			for i := 1; i < 100; i++ {
				if res[i].Err != nil || srv.Applied(ws[i].UUID) != 1 {
					t.Fatalf("write %d: %v, applied %d; want it reported applied", i, res[i].Err, srv.Applied(ws[i].UUID))
				}
			}
			if res[100].Err == nil || srv.Applied(ws[100].UUID) != 0 {
				t.Errorf("the last move: %v, applied %d; want its request's error", res[100].Err, srv.Applied(ws[100].UUID))
			}
		})
	}
}
