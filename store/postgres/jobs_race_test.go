package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

// TestWorkKeepsAJobSealedAgainByAReset: replica A reads a conversation's
// jobs (Work) while replica B's /reset (DeleteConversation) seals them
// again with a new key and destroys the old one, committing between A's
// read of the jobs and A's read of their key. A finds the key gone; the
// job was not lost, only sealed again: it must stay, and be read with its
// new key. (Before: A deleted it, as a job sealed with a destroyed key,
// on a decision its DELETE did not check again: the message was never
// answered.)
func TestWorkKeepsAJobSealedAgainByAReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, px := twoReplicasAViaProxy(t)
	const key = "telegram:c1:"
	// B stores a message: its job is sealed with the conversation's
	// key, which A has not opened yet.
	if err := b.Commit(ctx, enqueueChange(key, "hello", 0)); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Hold(ctx, key); err != nil || !ok {
		t.Fatalf("A holds %s: %v %v", key, ok, err)
	}
	// A's read of the job's key waits until B's reset committed.
	reached, resume := px.PauseAt(`SELECT sealed FROM data_keys WHERE id = $1`)
	defer resume()
	type work struct {
		jobs []bot.Job
		err  error
	}
	done := make(chan work, 1)
	go func() {
		_, jobs, err := a.Work(ctx, key)
		done <- work{jobs, err}
	}()
	select {
	case <-reached:
	case w := <-done:
		t.Fatalf("A's Work read no data key: %v %v", w.jobs, w.err)
	case <-time.After(10 * time.Second):
		t.Fatal("A's Work did not read the job's key")
	}
	if err := b.DeleteConversation(ctx, key); err != nil {
		t.Fatal(err)
	}
	resume()
	w := <-done
	if w.err != nil {
		t.Fatalf("A's Work: %v", w.err)
	}
	var n int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE thread_key = $1`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("jobs of %s after the reset and A's Work: %d, want 1 (the reset keeps the jobs, sealed again)", key, n)
	}
	if len(w.jobs) != 1 || w.jobs[0].Incoming.Text != "hello" {
		t.Errorf("A's Work found %+v, want the job sealed again", w.jobs)
	}
}
