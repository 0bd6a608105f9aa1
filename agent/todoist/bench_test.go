package todoist_test

import (
	"testing"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// The benchmarks run the client against the fake over loopback HTTP and
// report Todoist requests per operation. Allocations include the fake
// server's, which runs in the same process.

func benchClient(b *testing.B, tasks int) (*todoist.Client, *todoisttest.Server) {
	b.Helper()
	srv := todoisttest.New(b)
	srv.SeedInbox(tasks, 10)
	return todoist.New(srv.Token, srv.URL, srv.Client()), srv
}

func reportRequests(b *testing.B, srv *todoisttest.Server, ops int) {
	b.Helper()
	b.ReportMetric(float64(srv.TotalRequests())/float64(ops), "requests/op")
}

// BenchmarkSnapshot reads a 1,000-task account in one /sync: after the
// first, full, read, each is an incremental sync merged into the kept
// snapshot.
func BenchmarkSnapshot(b *testing.B) {
	c, srv := benchClient(b, 1000)
	srv.ResetCounters()
	b.ReportAllocs()
	ops := 0
	for b.Loop() {
		snap, err := c.Snapshot(b.Context())
		if err != nil || len(snap.Tasks) != 1000 {
			b.Fatalf("Snapshot: %d tasks, %v", len(snap.Tasks), err)
		}
		ops++
	}
	reportRequests(b, srv, ops)
}

// BenchmarkTasks lists a 1,000-task account through GET /tasks, 200 to a
// page.
func BenchmarkTasks(b *testing.B) {
	c, srv := benchClient(b, 1000)
	srv.ResetCounters()
	b.ReportAllocs()
	ops := 0
	for b.Loop() {
		ts, err := c.Tasks(b.Context(), agent.TaskQuery{})
		if err != nil || len(ts) != 1000 {
			b.Fatalf("Tasks: %d tasks, %v", len(ts), err)
		}
		ops++
	}
	reportRequests(b, srv, ops)
}

// BenchmarkMove100 moves 100 tasks to another project in one Apply,
// alternating between two projects so every move changes something.
func BenchmarkMove100(b *testing.B) {
	c, srv := benchClient(b, 100)
	tasks := srv.Tasks()
	dests := []string{srv.AddProject(todoisttest.Project{Name: "A"}).ID, srv.InboxID()}
	srv.ResetCounters()
	b.ReportAllocs()
	ops := 0
	for b.Loop() {
		ws := make([]agent.Write, len(tasks))
		for i, t := range tasks {
			ws[i] = agent.Write{Kind: agent.MoveTask, UUID: agent.NewUUID(), ID: t.ID, ProjectID: dests[ops%2]}
		}
		res, err := c.Apply(b.Context(), ws)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		ops++
	}
	reportRequests(b, srv, ops)
}
