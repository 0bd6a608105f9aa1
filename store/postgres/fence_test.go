package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

// pause makes s's last beat older than any lease time, as a replica
// frozen (SIGSTOP, a long GC pause) or cut off for longer than a lease
// leaves it, while its sessions stay open on the server.
func pause(t *testing.T, s *Store) {
	t.Helper()
	if _, err := s.pool.Exec(context.Background(), `UPDATE replicas SET beat = now() - interval '1 hour' WHERE id = $1`, s.me()); err != nil {
		t.Fatal(err)
	}
}

// TestFencedWriteOfTheOldHolderIsRefused: A holds a conversation and
// pauses past its lease; B takes the lease. Every write A makes under
// its lease (a run's save, its end with the outbox and the journal, its
// job's deletion, a delivery) is refused with bot.ErrFenced and changes
// nothing; B's writes go through. A's next beat finds it was presumed
// dead: A's leases are lost.
func TestFencedWriteOfTheOldHolderIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoReplicas(t)
	const key = "telegram:5:"
	if ok, err := a.Hold(ctx, key); !ok || err != nil {
		t.Fatalf("A holds %s: %v %v", key, ok, err)
	}
	if ok, err := b.Hold(ctx, key); ok || err != nil {
		t.Fatalf("B holds %s while A lives: %v %v", key, ok, err)
	}
	fa := a.Fence(ctx, key)
	now := time.Now()
	j := bot.Job{ID: "j1", ThreadKey: key, Kind: bot.JobIncoming, Enqueued: now}
	if err := a.Commit(fa, bot.Change{Job: &j}); err != nil {
		t.Fatalf("A's write under its lease: %v", err)
	}
	run := &bot.Run{ID: "r1", ThreadKey: key, Platform: "telegram", Status: bot.RunWorking, Instruction: "A's", Created: now, Updated: now}
	if err := a.SaveRun(fa, run); err != nil {
		t.Fatal(err)
	}

	pause(t, a)
	if ok, err := b.Hold(ctx, key); !ok || err != nil {
		t.Fatalf("B takes the lease of a paused A: %v %v", ok, err)
	}
	fb := b.Fence(ctx, key)
	late := *run
	late.Status, late.Answer = bot.RunDone, "A's late answer"
	ob := bot.Outbound{ID: "o1", Platform: "telegram", RunID: "r1", Msg: bot.Outgoing{ChatID: "5", Text: "A's late answer"}, Created: now}
	writes := map[string]error{
		"commit of the run's end": a.Commit(fa, bot.Change{Run: &late, Send: []bot.Outbound{ob}, DeleteJob: "j1",
			Audit: []bot.AuditEntry{{RunID: "r1", ThreadKey: key, Summary: "deleted everything", At: now}}}),
		"save of the run":   a.SaveRun(fa, &late),
		"deletion of a job": a.DeleteJob(fa, "j1"),
		"delivery":          a.Delivered(fa, ob, "m1"),
	}
	for what, err := range writes {
		if !errors.Is(err, bot.ErrFenced) {
			t.Errorf("A's %s after B took the lease: %v, want bot.ErrFenced", what, err)
		}
	}
	got, err := b.Run(ctx, "r1")
	if err != nil || got.Status != bot.RunWorking || got.Answer != "" {
		t.Errorf("the run after A's refused writes: %+v %v", got, err)
	}
	if obs, err := b.Outbox(ctx); err != nil || len(obs) != 0 {
		t.Errorf("outbox after A's refused end: %v %v", obs, err)
	}
	if entries, err := b.RunAudit(ctx, "r1"); err != nil || len(entries) != 0 {
		t.Errorf("journal after A's refused end: %v %v", entries, err)
	}
	if jobs, err := b.Jobs(ctx); err != nil || len(jobs) != 1 {
		t.Errorf("jobs after A's refused deletion: %v %v", jobs, err)
	}
	if _, _, err := a.Work(ctx, key); !errors.Is(err, bot.ErrFenced) {
		t.Errorf("A's work of the conversation B took: %v, want bot.ErrFenced", err)
	}
	late.Answer = "B's answer"
	if err := b.Commit(fb, bot.Change{Run: &late, DeleteJob: "j1"}); err != nil {
		t.Errorf("B's write under its lease: %v", err)
	}
	select {
	case <-a.LeasesLost():
	case <-time.After(3 * beatEvery):
		t.Error("A's beat did not find that it was presumed dead")
	}
}

// TestCancelStoredWithoutItsNotification: a /cancel stored for a
// conversation whose run another replica runs stops the run even when
// its notification is lost (the listener was reconnecting): the
// replica reads the stored cancels at each sweep.
func TestCancelStoredWithoutItsNotification(t *testing.T) {
	t.Parallel()
	a, _ := twoReplicas(t)
	c := &chats{posts: map[string][]string{}, by: map[int]int{}}
	calls, ended, release := make(chan int, 8), make(chan int, 8), make(chan struct{})
	defer close(release)
	bt := startBot(t, a, gateAgent{0, calls, ended, release}, c, 0, bot.Config{})
	in := bot.Incoming{Platform: "telegram", ChatID: "c", UserID: "42", DM: true, Text: "delete all my tasks", EventID: "e1", At: time.Now()}
	if err := bt.Handle(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	select {
	case <-calls:
	case <-time.After(20 * time.Second):
		t.Fatal("no model call")
	}
	// What Cancel stores, without its NOTIFY.
	if _, err := a.pool.Exec(t.Context(), `INSERT INTO cancels (thread_key) VALUES ('telegram:c:')`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("a stored /cancel did not stop the run within 10 s")
	}
	waitForPost(t, c, "c", "Stopped, as you asked.", 10*time.Second) // the run says it stopped
}

// TestFencedRunPostsNothing: while replica A's run waits for the model,
// another replica takes the conversation's lease (A's beat looked late
// to it). The model answers A; the end's commit is refused: A posts
// neither the answer nor an apology, and the job stays stored for the
// lease's new holder.
func TestFencedRunPostsNothing(t *testing.T) {
	t.Parallel()
	a, _ := twoReplicas(t)
	c := &chats{posts: map[string][]string{}, by: map[int]int{}}
	calls, ended, release := make(chan int, 8), make(chan int, 8), make(chan struct{})
	bt := startBot(t, a, gateAgent{0, calls, ended, release}, c, 0, bot.Config{})
	in := bot.Incoming{Platform: "telegram", ChatID: "c", UserID: "42", DM: true, Text: "tidy", EventID: "e1", At: time.Now()}
	if err := bt.Handle(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	select {
	case <-calls:
	case <-time.After(20 * time.Second):
		t.Fatal("no model call")
	}
	// What another replica's Hold does when it takes the lease.
	if _, err := a.pool.Exec(t.Context(), `UPDATE leases SET owner = 'another', epoch = nextval('lease_epochs') WHERE thread_key = 'telegram:c:'`); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := bt.WaitIdle(t.Context()); err != nil { // the run ended, and what it queued is posted
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.posts["c"] {
		if strings.HasPrefix(p, "did: ") || strings.Contains(p, "went wrong") {
			t.Errorf("a fenced run posted %q", p)
		}
	}
	if jobs, err := a.Jobs(t.Context()); err != nil || len(jobs) != 1 {
		t.Errorf("the fenced run's job: %v %v, want it stored", jobs, err)
	}
	if runs, err := a.Runs(t.Context()); err != nil || len(runs) != 0 {
		t.Errorf("runs after the fenced end: %v %v, want none saved", runs, err)
	}
}

// TestResetOfTheOldHolderIsRefused: A holds a conversation and pauses
// past its lease; B takes it. A's /reset (bot.reset: SaveThread, then
// DeleteConversation, under its lease) is refused with bot.ErrFenced
// and changes nothing: the conversation's messages, kept by B, stay.
// (Before, neither was fenced: the old holder deleted the conversation
// its new holder was answering in.)
func TestResetOfTheOldHolderIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoReplicas(t)
	const key = "telegram:c1:"
	if ok, err := a.Hold(ctx, key); !ok || err != nil {
		t.Fatalf("A holds %s: %v %v", key, ok, err)
	}
	fa := a.Fence(ctx, key)
	pause(t, a)
	if ok, err := b.Hold(ctx, key); !ok || err != nil {
		t.Fatalf("B takes the lease of a paused A: %v %v", ok, err)
	}
	if err := b.Commit(b.Fence(ctx, key), enqueueChange(key, "B's message", 0)); err != nil {
		t.Fatal(err)
	}
	th, err := a.Thread(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	th.ResetAt = time.Now()
	if err := a.SaveThread(fa, th); !errors.Is(err, bot.ErrFenced) {
		t.Errorf("A's SaveThread after B took the lease: %v, want bot.ErrFenced", err)
	}
	if err := a.DeleteConversation(fa, key); !errors.Is(err, bot.ErrFenced) {
		t.Errorf("A's DeleteConversation after B took the lease: %v, want bot.ErrFenced", err)
	}
	if got, err := b.Thread(ctx, key); err != nil || !got.ResetAt.IsZero() {
		t.Errorf("the thread after A's refused reset: %+v %v", got, err)
	}
	if msgs, err := b.RecentMessages(ctx, key, time.Time{}, 10); err != nil || len(msgs) != 1 {
		t.Errorf("messages after A's refused reset: %d, %v; want B's one", len(msgs), err)
	}
}
