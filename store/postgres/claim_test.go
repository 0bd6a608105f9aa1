package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/bot"
)

func jobIDs(jobs []bot.Job) string {
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	return strings.Join(ids, ",")
}

// TestClaimJobsKeepsConversationOrderAcrossClaimers: while one claimer
// holds conversation a's first job, another takes b's first job, never
// a's second one; after the first commits, a's second is ready.
func TestClaimJobsKeepsConversationOrderAcrossClaimers(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	for _, j := range []bot.Job{{ID: "a1", ThreadKey: "a"}, {ID: "a2", ThreadKey: "a"}, {ID: "b1", ThreadKey: "b"}, {ID: "b2", ThreadKey: "b"}} {
		if err := s.Commit(ctx, bot.Change{Job: &j}); err != nil {
			t.Fatal(err)
		}
	}
	holding, release, done := make(chan string), make(chan struct{}), make(chan error)
	go func() {
		done <- s.ClaimJobs(ctx, 1, func(_ context.Context, jobs []bot.Job) error {
			holding <- jobIDs(jobs)
			<-release
			return nil
		})
	}()
	if got := <-holding; got != "a1" {
		t.Fatalf("first claimer took %s, want a1", got)
	}
	var second string
	if err := s.ClaimJobs(ctx, 10, func(_ context.Context, jobs []bot.Job) error { second = jobIDs(jobs); return nil }); err != nil {
		t.Fatal(err)
	}
	if second != "b1" {
		t.Errorf("while a1 is held, the second claimer took %q, want b1 only", second)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A claim whose handling fails leaves its jobs ready.
	boom := errors.New("boom")
	if err := s.ClaimJobs(ctx, 10, func(context.Context, []bot.Job) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("a failed claim: %v", err)
	}
	var third string
	if err := s.ClaimJobs(ctx, 10, func(_ context.Context, jobs []bot.Job) error { third = jobIDs(jobs); return nil }); err != nil {
		t.Fatal(err)
	}
	if third != "a2,b2" {
		t.Errorf("after both commits: %q, want a2,b2", third)
	}
	if jobs, _ := s.Jobs(ctx); len(jobs) != 0 {
		t.Errorf("jobs left: %s", fmt.Sprint(jobIDs(jobs)))
	}
}
