package todoist_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// A big account's full sync may answer data made a while ago
// (full_sync_date_utc); Snapshot follows it with an incremental sync, so a
// read right after a write sees the write.
func TestSnapshotCatchesUpOnADelayedFullSync(t *testing.T) {
	clk := &testClock{t: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)}
	srv := todoisttest.New(t, todoisttest.WithClock(clk.now))
	c := todoist.New(srv.Token, srv.URL, srv.Client(), todoist.WithClock(clk.now))
	tasks := srv.SeedTalkInbox()
	srv.DelayFullSyncs()
	clk.add(time.Minute)

	res, err := c.Apply(t.Context(), []agent.Write{
		w(agent.Write{Kind: agent.AddProject, TempID: "tmp-p", Name: "Talks"}),
		w(agent.Write{Kind: agent.MoveTask, ID: tasks[0].ID, ProjectID: "tmp-p"}),
		w(agent.Write{Kind: agent.DeleteTask, ID: tasks[1].ID}),
		w(agent.Write{Kind: agent.UpdateTask, ID: tasks[2].ID, Content: strp("Renamed")}),
		w(agent.Write{Kind: agent.AddTask, Content: strp("Brand new")}),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.ResetCounters()
	snap, err := c.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.SyncRequests(); n != 2 {
		t.Errorf("%d /sync requests, want 2 (the full sync and the catch-up)", n)
	}
	project := res[0].NewID
	byID := map[string]agent.Task{}
	for _, task := range snap.Tasks {
		byID[task.ID] = task
	}
	if got := byID[tasks[0].ID].ProjectID; got != project {
		t.Errorf("moved task is in %q, want %q", got, project)
	}
	if _, ok := byID[tasks[1].ID]; ok {
		t.Error("the deleted task is still listed")
	}
	if got := byID[tasks[2].ID].Content; got != "Renamed" {
		t.Errorf("renamed task says %q", got)
	}
	if _, ok := byID[res[4].NewID]; !ok {
		t.Error("the new task is missing")
	}
	if !slices.ContainsFunc(snap.Projects, func(p agent.Project) bool { return p.ID == project }) {
		t.Errorf("the new project is missing from %v", snap.Projects)
	}
	if len(snap.Tasks) != len(srv.Tasks()) {
		t.Errorf("%d tasks in the snapshot, %d in Todoist", len(snap.Tasks), len(srv.Tasks()))
	}

	// A fresh full sync needs no catch-up.
	srv.ServeFreshFullSyncs()
	srv.ResetCounters()
	if _, err := c.Snapshot(t.Context()); err != nil || srv.SyncRequests() != 1 {
		t.Errorf("fresh snapshot: %v, %d /sync requests, want 1", err, srv.SyncRequests())
	}
}
