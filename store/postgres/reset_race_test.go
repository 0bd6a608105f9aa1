package postgres

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/seal"
)

// enqueueChange is what bot.enqueue commits for a message: its thread, the
// message and its job.
func enqueueChange(key, text string, i int) bot.Change {
	in := bot.Incoming{Platform: "telegram", ChatID: "c1", UserID: "42", DM: true, Text: text, EventID: fmt.Sprint("ev", i), At: time.Now()}
	j := bot.Job{ID: fmt.Sprintf("job-%d", i), ThreadKey: key, Kind: bot.JobIncoming, Incoming: in, Enqueued: time.Now()}
	return bot.Change{Thread: &bot.Thread{Key: key, Platform: "telegram", ChatID: "c1"},
		Message: &bot.Message{ThreadKey: key, Role: bot.RoleUser, Text: text, At: time.Now()}, Job: &j,
		EventKey: "telegram:" + in.EventID, EventAt: in.At}
}

// TestResetWaitsForAMessageBeingStored: replica B stores a message (its
// job sealed with the conversation's data key) while replica A's /reset
// (DeleteConversation) runs. The reset waits for B's commit (B holds the
// key's row FOR SHARE), then deletes the message and seals the job again
// with a new key: every replica still reads the conversation's work, and
// a later message is answered. Before, the job committed sealed with the
// destroyed key, and no message there was answered again (issue 35).
func TestResetWaitsForAMessageBeingStored(t *testing.T) {
	a, b := twoReplicas(t)
	ctx := context.Background()
	const key = "telegram:c1:"
	// The conversation so far: one message answered (its job retired).
	first := enqueueChange(key, "hello", 0)
	if err := a.Commit(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteJob(ctx, first.Job.ID); err != nil {
		t.Fatal(err)
	}

	// B's Commit of the next message, step by step as Commit runs it.
	c := enqueueChange(key, "a message sent while /reset runs", 1)
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // after Commit, a no-op
	if _, err := markEvent(ctx, tx, c.EventKey, c.EventAt); err != nil {
		t.Fatal(err)
	}
	if err := b.apply(ctx, tx, c); err != nil {
		t.Fatal(err)
	}
	// Meanwhile A's /reset of the conversation starts: it waits.
	done := make(chan error, 1)
	go func() { done <- a.DeleteConversation(ctx, key) }()
	select {
	case err := <-done:
		t.Fatalf("DeleteConversation did not wait for the message being sealed with the key it destroys (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A third replica (or A, or B after a restart) reads the
	// conversation's work: the job is there, the message is gone.
	c3, err := Open(ctx, a.pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	_, jobs, err := leasedWork(ctx, c3, key)
	if err != nil || len(jobs) != 1 {
		t.Errorf("Work of the conversation after a /reset raced a message: %d jobs, %v; want the one job", len(jobs), err)
	}
	if _, _, err := leasedWork(ctx, a, key); err != nil {
		t.Errorf("Work on the replica that reset it: %v", err)
	}
	if msgs, err := c3.RecentMessages(ctx, key, time.Time{}, 10); err != nil || len(msgs) != 0 {
		t.Errorf("messages after the /reset: %d, %v; want none", len(msgs), err)
	}
	answersAgain(t, c3, key)
}

// TestWorkDropsAJobSealedWithADestroyedKey: a job whose key is gone (as a
// tidybot before issue 35 could leave one) is deleted with a log line,
// and the conversation's later jobs are read and answered.
func TestWorkDropsAJobSealedWithADestroyedKey(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	const key = "telegram:c1:"
	if err := s.Commit(ctx, enqueueChange(key, "sealed with a key about to go", 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM data_keys`); err != nil {
		t.Fatal(err)
	}
	s.keys.opened = seal.Cache{}
	if err := s.Commit(ctx, enqueueChange(key, "after", 1)); err != nil {
		t.Fatal(err)
	}
	_, jobs, err := leasedWork(ctx, s, key)
	if err != nil || len(jobs) != 1 || jobs[0].ID != "job-1" {
		t.Fatalf("Work: %v, %v; want job-1 alone", jobs, err)
	}
	var left int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&left); err != nil || left != 1 {
		t.Errorf("jobs left: %d, %v; want 1 (the unreadable one deleted)", left, err)
	}
}

// answersAgain starts a bot on s, sends one more message in the
// conversation and fails unless it is answered within 15 s.
func answersAgain(t *testing.T, s *Store, key string) {
	t.Helper()
	ch := &chats{posts: map[string][]string{}, by: map[int]int{}}
	bt := bot.New(s, echoAgent{}, bot.Config{Workers: 2, AllowedUsers: []string{"telegram:42"}})
	bt.AddPlatform(chatPlatform{ch, 0})
	if err := bt.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer bt.Stop()
	in := bot.Incoming{Platform: "telegram", ChatID: "c1", UserID: "42", DM: true, Text: "are you there?", EventID: "later", At: time.Now()}
	if err := bt.Handle(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		ch.mu.Lock()
		got := strings.Join(ch.posts["c1"], " | ")
		ch.mu.Unlock()
		if strings.Contains(got, "did: are you there?") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a later message in %s was not answered within 15 s; posts: %q", key, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestResetRacingMessagesAcrossReplicas: the same race through the public
// bot.Store methods only: one replica stores messages of a conversation
// while another resets it, as two people's taps would. No job is left
// sealed with a destroyed key, none is lost, and a fresh replica reads
// the conversation's work.
func TestResetRacingMessagesAcrossReplicas(t *testing.T) {
	a, b := twoReplicas(t)
	ctx := context.Background()
	const key = "telegram:c1:"
	if err := a.Commit(ctx, enqueueChange(key, "hello", 0)); err != nil {
		t.Fatal(err)
	}
	u := a.pool.Config().ConnString()
	for round := 0; round < 100; round++ {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := b.Commit(ctx, enqueueChange(key, "msg", 1+round)); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := a.DeleteConversation(ctx, key); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		if round%20 != 19 {
			continue
		}
		fresh, err := Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		var gone int
		_ = fresh.pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE key_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM data_keys d WHERE d.id = jobs.key_id)`).Scan(&gone)
		_, jobs, werr := leasedWork(ctx, fresh, key)
		fresh.Close()
		if werr != nil || gone != 0 || len(jobs) != round+2 {
			t.Fatalf("after %d rounds: %d job(s) sealed with a destroyed key; Work of the conversation on a fresh replica: %d jobs (want %d), %v", round+1, gone, len(jobs), round+2, werr)
		}
	}
}

// TestResetRacingMessagesOneProcess: the same race on one process
// (one store, as a single serve on PostgreSQL): its intake stores a
// message while its worker runs /reset. Before issue 35 destroy forgot
// the key in the process's cache too, so the process itself could no
// longer read the conversation's jobs, and no message there was
// answered again; now every job is kept and readable.
func TestResetRacingMessagesOneProcess(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	const key = "telegram:c1:"
	if err := s.Commit(ctx, enqueueChange(key, "hello", 0)); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 100; round++ {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := s.Commit(ctx, enqueueChange(key, "msg", 1+round)); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := s.DeleteConversation(ctx, key); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		if _, jobs, err := leasedWork(ctx, s, key); err != nil || len(jobs) != round+2 {
			t.Fatalf("after %d rounds the process reads %d jobs of the conversation (want %d): %v", round+1, len(jobs), round+2, err)
		}
	}
	answersAgain(t, s, key)
}

// leasedWork reads key's work as its lease holder does (Work requires
// the lease): it holds the lease, reads, and lets it go.
func leasedWork(ctx context.Context, s *Store, key string) ([]*bot.Run, []bot.Job, error) {
	if ok, err := s.Hold(ctx, key); err != nil || !ok {
		return nil, nil, fmt.Errorf("hold %s: %v %w", key, ok, err)
	}
	defer s.Release(ctx, key, false)
	return s.Work(ctx, key)
}

// TestAKeptKeyDestroyedByAnotherReplicaSealsNothing: replica A keeps
// the key it sealed a conversation's message with, to seal its next
// write without reading it (keyring.sealing); replica B resets the
// conversation, destroying the key. A's next save, in one round trip
// with the kept key, fails the key's guard and is made again with a new
// key: the run is stored readable, never sealed with the destroyed key.
func TestAKeptKeyDestroyedByAnotherReplicaSealsNothing(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t)
	ctx := context.Background()
	const key = "telegram:c1:"
	if err := a.Commit(ctx, enqueueChange(key, "first", 0)); err != nil {
		t.Fatal(err)
	}
	kept, ids, ok := a.keys.sealingKeys([]string{key})
	if !ok || len(ids) != 1 {
		t.Fatalf("A kept no key of %s: %v", key, kept)
	}
	if err := b.DeleteConversation(ctx, key); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM data_keys WHERE id = $1`, ids[0]).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the reset left the key: %d %v", n, err)
	}
	now := time.Now()
	run := &bot.Run{ID: "r1", ThreadKey: key, Platform: "telegram", Status: bot.RunWorking, Instruction: "after the reset", Created: now, Updated: now}
	if err := a.SaveRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	got, err := b.Run(ctx, "r1")
	if err != nil || got.Instruction != "after the reset" {
		t.Fatalf("the run A saved after B's reset: %+v %v", got, err)
	}
	if _, now, ok := a.keys.sealingKeys([]string{key}); !ok || bytes.Equal(now[0], ids[0]) {
		t.Errorf("A still keeps the destroyed key (%v)", ok)
	}
}
