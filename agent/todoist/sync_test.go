package todoist_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
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

// memSnapshots is a SnapshotStore in memory, standing for the bbolt store
// across a restart.
type memSnapshots struct {
	mu    sync.Mutex
	data  map[string][]byte
	saves int
}

func (m *memSnapshots) LoadSnapshot(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.data[key], nil
}

func (m *memSnapshots) SaveSnapshot(_ context.Context, key string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data == nil {
		m.data = map[string][]byte{}
	}
	m.data[key] = data
	m.saves++
	return nil
}

// The store dates a snapshot by its last save, and retention deletes one
// not saved for that long: an account read every day, whose tasks do not
// change, is saved again at least hourly, not only when it changes.
func TestUnchangedSnapshotIsSavedWhileInUse(t *testing.T) {
	srv := todoisttest.New(t)
	srv.SeedInbox(3, 1)
	store := &memSnapshots{}
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	c := todoist.New(srv.Token, srv.URL, nil, todoist.WithSnapshotStore(store), todoist.WithClock(func() time.Time { return now }))
	for range 3 {
		if _, err := c.Snapshot(t.Context()); err != nil {
			t.Fatal(err)
		}
		now = now.Add(10 * time.Minute)
	}
	if store.saves != 1 {
		t.Errorf("%d saves of an unchanged snapshot within half an hour, want 1 (the first read)", store.saves)
	}
	now = now.Add(24 * time.Hour)
	if _, err := c.Snapshot(t.Context()); err != nil {
		t.Fatal(err)
	}
	if store.saves != 2 {
		t.Errorf("%d saves after a read a day later, want 2: the store must see the account in use", store.saves)
	}
}

// countingTransport counts the response bytes a client reads.
type countingTransport struct {
	mu    sync.Mutex
	bytes int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	c.mu.Lock()
	c.bytes += int64(len(b))
	c.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, err
}

func (c *countingTransport) take() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.bytes
	c.bytes = 0
	return n
}

// After the first read, Snapshot reads only what changed (/sync with the
// last sync_token) and merges it: a read seconds after another is one
// small request, and it still sees every change, made by this client or
// elsewhere (issue 15 item 3). The kept snapshot survives a restart (a new
// client on the same store), keyed by a hash of the token.
func TestSnapshotIsIncremental(t *testing.T) {
	srv := todoisttest.New(t, todoisttest.WithTimezone("Europe/Berlin"))
	srv.SeedInbox(300, 5)
	store := &memSnapshots{}
	ct := &countingTransport{}
	hc := &http.Client{Transport: ct, Timeout: 10 * time.Second}
	c := todoist.New(srv.Token, srv.URL, hc, todoist.WithSnapshotStore(store))

	first, err := c.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	full := ct.take()
	if srv.FullSyncs() != 1 || srv.TotalRequests() != 1 {
		t.Fatalf("first read: %d full syncs, %d requests; want 1 and 1", srv.FullSyncs(), srv.TotalRequests())
	}
	// The snapshot's /sync told the time zone: no GET /user.
	if loc, err := c.TimeZone(t.Context()); err != nil || loc.String() != "Europe/Berlin" || srv.TotalRequests() != 1 {
		t.Errorf("time zone %v %v after %d requests, want Europe/Berlin after 1", loc, err, srv.TotalRequests())
	}

	// Nothing changed: one small request.
	srv.ResetCounters()
	again, err := c.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if srv.TotalRequests() != 1 || srv.FullSyncs() != 0 {
		t.Errorf("second read: %d requests, %d full syncs; want 1 incremental", srv.TotalRequests(), srv.FullSyncs())
	}
	if small := ct.take(); small*20 > full {
		t.Errorf("an incremental read with no change took %d bytes, the full one %d", small, full)
	}
	if !reflect.DeepEqual(again, first) {
		t.Error("the merged snapshot differs from the full one")
	}

	// Changes made here and elsewhere are merged in.
	tasks := first.Tasks
	res, err := c.Apply(t.Context(), []agent.Write{
		w(agent.Write{Kind: agent.AddProject, TempID: "tmp-p", Name: "Talks"}),
		w(agent.Write{Kind: agent.MoveTask, ID: tasks[0].ID, ProjectID: "tmp-p"}),
		w(agent.Write{Kind: agent.DeleteTask, ID: tasks[1].ID}),
		w(agent.Write{Kind: agent.CloseTask, ID: tasks[2].ID}),
	})
	if err != nil {
		t.Fatal(err)
	}
	added := srv.AddTask(todoisttest.Task{Content: "Added in the app"})
	srv.ResetCounters()
	snap, err := c.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if srv.TotalRequests() != 1 || srv.FullSyncs() != 0 {
		t.Errorf("read after changes: %d requests, %d full syncs; want 1 incremental", srv.TotalRequests(), srv.FullSyncs())
	}
	byID := map[string]agent.Task{}
	for _, task := range snap.Tasks {
		byID[task.ID] = task
	}
	if byID[tasks[0].ID].ProjectID != res[0].NewID {
		t.Error("the move is missing")
	}
	if _, ok := byID[tasks[1].ID]; ok {
		t.Error("the deleted task is still listed")
	}
	if _, ok := byID[tasks[2].ID]; ok {
		t.Error("the completed task is still listed")
	}
	if _, ok := byID[added.ID]; !ok {
		t.Error("the task added elsewhere is missing")
	}
	if len(snap.Tasks) != len(srv.Tasks()) {
		t.Errorf("%d tasks in the snapshot, %d open in Todoist", len(snap.Tasks), len(srv.Tasks()))
	}

	// A restart: a new client on the same store reads incrementally.
	for key := range store.data {
		if strings.Contains(key, srv.Token) {
			t.Errorf("the store's key %q holds the token", key)
		}
	}
	srv.ResetCounters()
	restarted := todoist.New(srv.Token, srv.URL, srv.Client(), todoist.WithSnapshotStore(store))
	after, err := restarted.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if srv.FullSyncs() != 0 || !reflect.DeepEqual(after, snap) {
		t.Errorf("after a restart: %d full syncs (want 0), same snapshot %v", srv.FullSyncs(), reflect.DeepEqual(after, snap))
	}

	// Another account on the same store has a snapshot of its own.
	other := todoisttest.New(t)
	other.SeedTalkInbox()
	oc := todoist.New(other.Token, other.URL, other.Client(), todoist.WithSnapshotStore(store))
	osnap, err := oc.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if other.FullSyncs() != 1 || len(osnap.Tasks) != len(other.Tasks()) {
		t.Errorf("other account: %d full syncs, %d tasks; want 1 and %d", other.FullSyncs(), len(osnap.Tasks), len(other.Tasks()))
	}
}
