package todoist_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// newClient starts a fake Todoist and a client for it, with a fast
// backoff so that retries cost milliseconds.
func newClient(t testing.TB, opts ...todoisttest.Option) (*todoist.Client, *todoisttest.Server) {
	t.Helper()
	srv := todoisttest.New(t, opts...)
	c := todoist.New(srv.Token, srv.URL, srv.Client(),
		todoist.WithBackoff(time.Millisecond, 5*time.Millisecond), todoist.WithMaxRetryWait(100*time.Millisecond))
	return c, srv
}

// wantCode fails the test unless err carries an *agent.Error with code.
func wantCode(t *testing.T, err error, code agent.ErrorCode) *agent.Error {
	t.Helper()
	var e *agent.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not an *agent.Error (want code %s)", err, code)
	}
	if e.Code != code {
		t.Fatalf("code %s, want %s (error: %v)", e.Code, code, err)
	}
	return e
}

func taskIDs(ts []agent.Task) []string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}

func TestProjectsAndInbox(t *testing.T) {
	c, srv := newClient(t)
	work := srv.AddProject(todoisttest.Project{Name: "Work"})
	talks := srv.AddProject(todoisttest.Project{Name: "Talks", ParentID: work.ID})
	srv.AddProject(todoisttest.Project{Name: "Old", IsArchived: true})

	got, err := c.Projects(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []agent.Project{
		{ID: srv.InboxID(), Name: "Inbox", IsInbox: true},
		{ID: work.ID, Name: "Work"},
		{ID: talks.ID, Name: "Talks", ParentID: work.ID},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Projects = %+v, want %+v", got, want)
	}

	inbox, err := c.Inbox(t.Context())
	if err != nil || inbox.ID != srv.InboxID() || !inbox.IsInbox {
		t.Errorf("Inbox = %+v, %v; want id %s", inbox, err, srv.InboxID())
	}
	p, err := c.Project(t.Context(), talks.ID)
	if err != nil || p != want[2] {
		t.Errorf("Project = %+v, %v", p, err)
	}
	_, err = c.Project(t.Context(), "AAAAAAAAAAAAAAAA")
	if e := wantCode(t, err, agent.ErrNotFound); e.Message != "no project with id AAAAAAAAAAAAAAAA" {
		t.Errorf("message %q", e.Message)
	}
}

func TestUser(t *testing.T) {
	c, srv := newClient(t)
	u, err := c.User(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if u.InboxProjectID != srv.InboxID() || u.ID == "" || u.Timezone != "UTC" {
		t.Errorf("User = %+v", u)
	}
}

func TestTasks(t *testing.T) {
	now := time.Date(2026, 5, 20, 9, 0, 0, 0, time.UTC)
	c, srv := newClient(t, todoisttest.WithClock(func() time.Time { return now }))
	home := srv.AddProject(todoisttest.Project{Name: "Home"})
	kitchen := srv.AddSection(todoisttest.Section{ProjectID: home.ID, Name: "Kitchen"})
	rent := srv.AddTask(todoisttest.Task{Content: "Pay rent", Priority: 4, Due: &todoisttest.Due{String: "today"}})
	plants := srv.AddTask(todoisttest.Task{Content: "Water plants", ProjectID: home.ID, Labels: []string{"chore"},
		Due: &todoisttest.Due{String: "every mon"}, Description: "the big ones too"})
	tap := srv.AddTask(todoisttest.Task{Content: "Fix tap", SectionID: kitchen.ID, Priority: 2})
	sub := srv.AddTask(todoisttest.Task{Content: "Buy washer", ParentID: tap.ID})
	done := srv.AddTask(todoisttest.Task{Content: "Done already", Checked: true})

	tests := []struct {
		name      string
		q         agent.TaskQuery
		want      []string
		wantPaths map[string]int
	}{
		{"all", agent.TaskQuery{}, []string{rent.ID, plants.ID, tap.ID, sub.ID}, map[string]int{"/tasks": 1}},
		{"project", agent.TaskQuery{ProjectID: home.ID}, []string{plants.ID, tap.ID, sub.ID}, map[string]int{"/tasks": 1}},
		{"section", agent.TaskQuery{SectionID: kitchen.ID}, []string{tap.ID, sub.ID}, map[string]int{"/tasks": 1}},
		{"label", agent.TaskQuery{Label: "chore"}, []string{plants.ID}, map[string]int{"/tasks": 1}},
		{"ids, one unknown and one closed", agent.TaskQuery{IDs: []string{tap.ID, "AAAAAAAAAAAAAAAA", rent.ID, done.ID}}, []string{rent.ID, tap.ID}, map[string]int{"/tasks": 1}},
		{"filter", agent.TaskQuery{Filter: "today | #Home & p3"}, []string{rent.ID, tap.ID}, map[string]int{"/tasks/filter": 1, "/tasks": 0}},
		{"filter search", agent.TaskQuery{Filter: "search: washer"}, []string{sub.ID}, map[string]int{"/tasks/filter": 1, "/tasks": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv.ResetCounters()
			got, err := c.Tasks(t.Context(), tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if ids := taskIDs(got); !reflect.DeepEqual(ids, tt.want) {
				t.Errorf("ids %v, want %v", ids, tt.want)
			}
			for p, n := range tt.wantPaths {
				if got := srv.Requests(p); got != n {
					t.Errorf("Requests(%s) = %d, want %d", p, got, n)
				}
			}
		})
	}

	t.Run("mapping", func(t *testing.T) {
		got, err := c.Tasks(t.Context(), agent.TaskQuery{IDs: []string{rent.ID, plants.ID, tap.ID, sub.ID}})
		if err != nil {
			t.Fatal(err)
		}
		want := []agent.Task{
			{ID: rent.ID, Content: "Pay rent", ProjectID: srv.InboxID(), Priority: agent.P1, Due: "today", DueDate: "2026-05-20", DueLang: "en"},
			{ID: plants.ID, Content: "Water plants", Description: "the big ones too", ProjectID: home.ID, Priority: agent.P4,
				Labels: []string{"chore"}, Due: "every mon", DueDate: "2026-05-25", IsRecurring: true, DueLang: "en"},
			{ID: tap.ID, Content: "Fix tap", ProjectID: home.ID, SectionID: kitchen.ID, Priority: agent.P3},
			{ID: sub.ID, Content: "Buy washer", ProjectID: home.ID, SectionID: kitchen.ID, ParentID: tap.ID, Priority: agent.P4},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got\n%+v\nwant\n%+v", got, want)
		}
	})

	t.Run("unknown project", func(t *testing.T) {
		_, err := c.Tasks(t.Context(), agent.TaskQuery{ProjectID: "AAAAAAAAAAAAAAAA"})
		if e := wantCode(t, err, agent.ErrNotFound); e.Message != "no project with id AAAAAAAAAAAAAAAA" {
			t.Errorf("message %q", e.Message)
		}
		if !strings.HasPrefix(err.Error(), "todoist: list tasks: ") {
			t.Errorf("error %q lacks context", err)
		}
	})
	t.Run("unknown section", func(t *testing.T) {
		_, err := c.Tasks(t.Context(), agent.TaskQuery{SectionID: "AAAAAAAAAAAAAAAA"})
		if e := wantCode(t, err, agent.ErrNotFound); e.Message != "no section with id AAAAAAAAAAAAAAAA" {
			t.Errorf("message %q", e.Message)
		}
	})
	t.Run("bad filter", func(t *testing.T) {
		_, err := c.Tasks(t.Context(), agent.TaskQuery{Filter: "due before: someday"})
		e := wantCode(t, err, agent.ErrInvalid)
		if !strings.Contains(e.Message, `"due before: someday"`) || !strings.Contains(e.Message, "today | overdue") {
			t.Errorf("message %q", e.Message)
		}
	})
	t.Run("filter with a project is refused locally", func(t *testing.T) {
		srv.ResetCounters()
		_, err := c.Tasks(t.Context(), agent.TaskQuery{Filter: "today", ProjectID: home.ID})
		wantCode(t, err, agent.ErrInvalid)
		if n := srv.TotalRequests(); n != 0 {
			t.Errorf("%d requests, want 0", n)
		}
	})
}

func TestPagination(t *testing.T) {
	c, srv := newClient(t)
	seeded := srv.SeedInbox(500, 5)

	got, err := c.Tasks(t.Context(), agent.TaskQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 500 {
		t.Fatalf("got %d tasks, want 500", len(got))
	}
	for i, task := range got {
		if task.ID != seeded[i].ID {
			t.Fatalf("task %d is %s, want %s", i, task.ID, seeded[i].ID)
		}
	}
	if n := srv.Requests("/tasks"); n != 3 {
		t.Errorf("%d requests for 500 tasks, want 3 (limit=200)", n)
	}

	// Through a filter too.
	srv.ResetCounters()
	got, err = c.Tasks(t.Context(), agent.TaskQuery{Filter: "#Inbox"})
	if err != nil || len(got) != 500 {
		t.Fatalf("filter: %d tasks, %v; want 500", len(got), err)
	}
	if n := srv.Requests("/tasks/filter"); n != 3 {
		t.Errorf("%d filter requests, want 3", n)
	}

	// Ids go 100 to a request.
	ids := make([]string, 250)
	for i := range ids {
		ids[i] = seeded[i*2].ID
	}
	srv.ResetCounters()
	got, err = c.Tasks(t.Context(), agent.TaskQuery{IDs: ids})
	if err != nil || len(got) != 250 {
		t.Fatalf("ids: %d tasks, %v; want 250", len(got), err)
	}
	if n := srv.Requests("/tasks"); n != 3 {
		t.Errorf("%d requests for 250 ids, want 3", n)
	}
}

// TestFakeDefaultPage checks that without a limit the fake, like Todoist,
// answers only 50 tasks and a cursor: the client must ask for 200 and
// follow the cursor.
func TestFakeDefaultPage(t *testing.T) {
	srv := todoisttest.New(t)
	srv.SeedInbox(120, 3)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/tasks", nil)
	req.Header.Set("Authorization", "Bearer "+srv.Token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Results    []json.RawMessage `json:"results"`
		NextCursor *string           `json:"next_cursor"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	if len(page.Results) != 50 || page.NextCursor == nil {
		t.Errorf("default page: %d results, cursor %v; want 50 and a cursor", len(page.Results), page.NextCursor)
	}
}

func TestSectionsAndLabels(t *testing.T) {
	c, srv := newClient(t)
	home := srv.AddProject(todoisttest.Project{Name: "Home"})
	a := srv.AddSection(todoisttest.Section{ProjectID: home.ID, Name: "Kitchen"})
	b := srv.AddSection(todoisttest.Section{ProjectID: home.ID, Name: "Garden"})
	srv.AddSection(todoisttest.Section{ProjectID: srv.InboxID(), Name: "Elsewhere"})
	l1 := srv.AddLabel(todoisttest.Label{Name: "errand"})
	l2 := srv.AddLabel(todoisttest.Label{Name: "phone"})

	ss, err := c.Sections(t.Context(), home.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []agent.Section{{ID: a.ID, ProjectID: home.ID, Name: "Kitchen"}, {ID: b.ID, ProjectID: home.ID, Name: "Garden"}}
	if !reflect.DeepEqual(ss, want) {
		t.Errorf("Sections = %+v, want %+v", ss, want)
	}
	_, err = c.Sections(t.Context(), "AAAAAAAAAAAAAAAA")
	if e := wantCode(t, err, agent.ErrNotFound); e.Message != "no project with id AAAAAAAAAAAAAAAA" {
		t.Errorf("message %q", e.Message)
	}
	_, err = c.Sections(t.Context(), "")
	wantCode(t, err, agent.ErrInvalid)

	ls, err := c.Labels(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := []agent.Label{{ID: l1.ID, Name: "errand"}, {ID: l2.ID, Name: "phone"}}; !reflect.DeepEqual(ls, want) {
		t.Errorf("Labels = %+v, want %+v", ls, want)
	}
}

func TestSnapshot(t *testing.T) {
	c, srv := newClient(t)
	srv.SeedTalkInbox()
	work := srv.AddProject(todoisttest.Project{Name: "Work"})
	sec := srv.AddSection(todoisttest.Section{ProjectID: work.ID, Name: "Admin"})
	lab := srv.AddLabel(todoisttest.Label{Name: "office"})
	report := srv.AddTask(todoisttest.Task{Content: "Expense report", SectionID: sec.ID, Labels: []string{"office"}, Priority: 3})
	srv.AddTask(todoisttest.Task{Content: "Closed", ProjectID: work.ID, Checked: true})
	srv.ResetCounters()

	snap, err := c.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n, s := srv.TotalRequests(), srv.Requests("/sync"); n != 1 || s != 1 {
		t.Errorf("%d requests (%d /sync), want one /sync", n, s)
	}
	if snap.InboxID() != srv.InboxID() || len(snap.Projects) != 2 || snap.Projects[1].Name != "Work" {
		t.Errorf("projects %+v", snap.Projects)
	}
	if want := []agent.Section{{ID: sec.ID, ProjectID: work.ID, Name: "Admin"}}; !reflect.DeepEqual(snap.Sections, want) {
		t.Errorf("sections %+v", snap.Sections)
	}
	if want := []agent.Label{{ID: lab.ID, Name: "office"}}; !reflect.DeepEqual(snap.Labels, want) {
		t.Errorf("labels %+v", snap.Labels)
	}
	if len(snap.Tasks) != len(todoisttest.TalkInbox)+1 {
		t.Fatalf("%d tasks, want %d open ones", len(snap.Tasks), len(todoisttest.TalkInbox)+1)
	}
	for i, content := range todoisttest.TalkInbox {
		if snap.Tasks[i].Content != content || snap.Tasks[i].ProjectID != srv.InboxID() {
			t.Errorf("task %d = %+v, want %q in the Inbox", i, snap.Tasks[i], content)
		}
	}
	last := snap.Tasks[len(snap.Tasks)-1]
	if last.ID != report.ID || last.SectionID != sec.ID || last.Priority != agent.P2 || !slices.Equal(last.Labels, []string{"office"}) {
		t.Errorf("last task %+v", last)
	}
}

func TestRetiredEndpoint(t *testing.T) {
	srv := todoisttest.New(t)
	retired := strings.TrimSuffix(srv.URL, "/api/v1") + "/rest/v2"
	c := todoist.New(srv.Token, retired, srv.Client(), todoist.WithBackoff(time.Millisecond, time.Millisecond))
	_, err := c.Projects(t.Context())
	e := wantCode(t, err, agent.ErrRetired)
	if !strings.Contains(e.Message, "retired Todoist endpoint GET /projects") || !strings.Contains(e.Message, "this is a bug in tidybot") {
		t.Errorf("message %q", e.Message)
	}
	if n := srv.Requests("/rest/v2/projects"); n != 1 {
		t.Errorf("%d requests, want 1 (a 410 is not retried)", n)
	}
}

func TestUnauthorized(t *testing.T) {
	const secret = "s3cr3t-t0ken-do-not-leak"
	srv := todoisttest.New(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := todoist.New(secret, srv.URL, srv.Client(), todoist.WithLogger(log), todoist.WithBackoff(time.Millisecond, time.Millisecond))

	calls := map[string]func() error{
		"projects": func() error { _, err := c.Projects(t.Context()); return err },
		"snapshot": func() error { _, err := c.Snapshot(t.Context()); return err },
		"apply": func() error {
			_, err := c.Apply(t.Context(), []agent.Write{{Kind: agent.CloseTask, ID: "AAAAAAAAAAAAAAAA", UUID: agent.NewUUID()}})
			return err
		},
	}
	for name, f := range calls {
		t.Run(name, func(t *testing.T) {
			err := f()
			e := wantCode(t, err, agent.ErrUnauthorized)
			if e.Message != "Todoist rejected the token: check TODOIST_TOKEN" {
				t.Errorf("message %q", e.Message)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(fmt.Sprintf("%+v", err), secret) {
				t.Errorf("error %q holds the token", err)
			}
		})
	}
	if n := srv.Requests("/projects"); n != 1 {
		t.Errorf("%d requests, want 1 (a 401 is not retried)", n)
	}

	// Retries are logged; the token is not.
	srv2 := todoisttest.New(t, todoisttest.WithToken(secret))
	srv2.FailNext("/labels", 1, todoisttest.Fault{Status: 503})
	c2 := todoist.New(secret, srv2.URL, srv2.Client(), todoist.WithLogger(log), todoist.WithBackoff(time.Millisecond, time.Millisecond))
	if _, err := c2.Labels(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "retrying") {
		t.Errorf("no retry logged: %s", logs.String())
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("log holds the token: %s", logs.String())
	}
}

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		status    int
		wantCode  agent.ErrorCode
		wantCalls int
	}{
		{400, agent.ErrInvalid, 1},
		{403, agent.ErrForbidden, 1},
		{404, agent.ErrNotFound, 1},
		{422, agent.ErrInvalid, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			c, srv := newClient(t)
			srv.FailNext("/labels", 1, todoisttest.Fault{Status: tt.status})
			_, err := c.Labels(t.Context())
			wantCode(t, err, tt.wantCode)
			if n := srv.Requests("/labels"); n != tt.wantCalls {
				t.Errorf("%d requests, want %d", n, tt.wantCalls)
			}
		})
	}
}

// TestConcurrentUse runs reads and writes from several goroutines on one
// client and one fake (run with -race).
func TestConcurrentUse(t *testing.T) {
	c, srv := newClient(t)
	tasks := srv.SeedInbox(60, 3)
	dest := srv.AddProject(todoisttest.Project{Name: "Dest"})
	errs := make(chan error, 12)
	for g := range 6 {
		go func() {
			_, err := c.Snapshot(t.Context())
			errs <- err
		}()
		go func() {
			var ws []agent.Write
			for _, task := range tasks[g*10 : g*10+10] {
				ws = append(ws, agent.Write{Kind: agent.MoveTask, UUID: agent.NewUUID(), ID: task.ID, ProjectID: dest.ID})
			}
			res, err := c.Apply(t.Context(), ws)
			for _, r := range res {
				err = errors.Join(err, r.Err)
			}
			errs <- err
		}()
	}
	for range 12 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := len(srv.TasksIn(dest.ID)); n != 60 {
		t.Errorf("%d tasks moved, want 60", n)
	}
}
