package postgres

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/discord"
	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
)

var (
	_ slack.Hooks   = (*Store)(nil)
	_ discord.Hooks = (*Store)(nil)
)

// TestHookUsesCountedAcrossReplicas: a response_url saved by one
// replica is taken by another; the uses both take are counted together,
// also when taken at once, and a new one comes with uses of its own.
func TestHookUsesCountedAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoReplicas(t)
	now := time.Now()
	const url = "https://hooks.slack.com/commands/T1/1/secret"
	if err := a.SaveHook(ctx, "C1", "U1", url, now.Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	take := func(s *Store, within int) bool {
		t.Helper()
		u, ok, err := s.TakeHook(ctx, "C1", "U1", "", within, now)
		if err != nil {
			t.Fatal(err)
		}
		if ok && u != url {
			t.Fatalf("took %q, want %q", u, url)
		}
		return ok
	}
	// Edits take while more than the reserve of 2 is left (within 3).
	if !take(b, 3) || !take(a, 3) || !take(b, 3) {
		t.Fatal("an edit found no use left among the first 3")
	}
	if take(a, 3) {
		t.Fatal("an edit took a use of the reserve")
	}
	if !take(a, 5) || !take(b, 5) {
		t.Fatal("the reserve is not there for answers")
	}
	if take(a, 5) || take(b, 5) {
		t.Fatal("more than 5 uses taken")
	}
	if _, ok, err := b.TakeHook(ctx, "C2", "U1", "", 5, now); ok || err != nil {
		t.Fatalf("a channel with no response_url: ok %v, err %v", ok, err)
	}

	// Taken at once from both replicas: 5 uses between them, no more.
	if err := b.SaveHook(ctx, "C1", "U1", url, now.Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if i%2 == 1 {
				s = b
			}
			if _, ok, err := s.TakeHook(ctx, "C1", "U1", "", 5, now); err != nil {
				t.Error(err)
			} else if ok {
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if n.Load() != 5 {
		t.Fatalf("%d uses taken at once, want 5", n.Load())
	}
}

// TestHookExpires: a response_url is not given once expired, and an
// expired one is deleted by the next save (and by Prune).
func TestHookExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	now := time.Now()
	if err := s.SaveHook(ctx, "C1", "U1", "https://hooks.slack.com/commands/old", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.TakeHook(ctx, "C1", "U1", "", 5, now.Add(time.Minute)); ok {
		t.Fatal("an expired response_url was given")
	}
	if _, ok, _ := s.TakeHook(ctx, "C1", "U1", "", 5, now.Add(59*time.Second)); !ok {
		t.Fatal("an unexpired response_url was not given")
	}
	// Expired by the store's clock: the next save deletes it.
	if _, err := s.pool.Exec(ctx, `UPDATE slack_hooks SET expires = $1 WHERE channel = 'C1'`, ns(now.Add(-time.Second))); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveHook(ctx, "C2", "U1", "https://hooks.slack.com/commands/new", now.Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if c := count(t, s, "C1"); c != 0 {
		t.Fatalf("%d expired response_urls kept after a save", c)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE slack_hooks SET expires = $1`, ns(now.Add(-time.Second))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prune(ctx, now.Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if c := count(t, s, ""); c != 0 {
		t.Fatalf("%d expired response_urls kept after Prune", c)
	}
}

// TestHookSealed: the URL is not kept in the clear.
func TestHookSealed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	const url = "https://hooks.slack.com/commands/T1/1/plain-secret"
	if err := s.SaveHook(ctx, "C1", "U1", url, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var raw []byte
	if err := s.pool.QueryRow(ctx, `SELECT url FROM slack_hooks WHERE channel = 'C1'`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("plain-secret")) {
		t.Fatal("the response_url is stored in the clear")
	}
}

func count(t *testing.T, s *Store, channel string) int {
	t.Helper()
	q := `SELECT count(*) FROM slack_hooks`
	if channel != "" {
		q += fmt.Sprintf(` WHERE channel = '%s'`, channel)
	}
	var n int
	if err := s.pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHookSealedAgainWhenItsKeyGoes: retention destroys the data key of
// an old period; a response_url still sealed with it is sealed again
// with a current key first, and stays usable.
func TestHookSealedAgainWhenItsKeyGoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := t0.Add(30 * 24 * time.Hour)
	clock := t0
	s, _ := openTest(t, withClock(func() time.Time { return clock }))
	const url = "https://hooks.slack.com/commands/T1/1/kept"
	if err := s.SaveHook(ctx, "C1", "U1", url, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var oldKey []byte
	if err := s.pool.QueryRow(ctx, `SELECT key_id FROM slack_hooks WHERE channel = 'C1'`).Scan(&oldKey); err != nil {
		t.Fatal(err)
	}
	clock = now
	if _, err := s.Prune(ctx, now.Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	var gone bool
	if err := s.pool.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM data_keys WHERE id = $1)`, oldKey).Scan(&gone); err != nil || !gone {
		t.Fatalf("the old period's key is kept (%v): the test proves nothing", err)
	}
	if u, ok, err := s.TakeHook(ctx, "C1", "U1", "", 5, now); err != nil || !ok || u != url {
		t.Fatalf("after retention: %q, %v, %v", u, ok, err)
	}
}

// TestHookIsItsPersonsAndItsRuns: the contract of slack.Hooks, one
// replica saving, another taking (issue 33, defect 4).
func TestHookIsItsPersonsAndItsRuns(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t)
	slacktest.TestHooks(t, a, b)
}
