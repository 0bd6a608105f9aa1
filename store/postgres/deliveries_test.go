package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// storeViaProxy opens a store whose every connection goes through a
// relay that counts its commits.
func storeViaProxy(t *testing.T) (*Store, *pgtest.Proxy) {
	t.Helper()
	u := pgtest.URL(t)
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p := pgtest.NewProxy(t, pu.Host)
	s, err := Open(context.Background(), p.Via(t, u))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, p
}

// commits is the number of write transactions p saw committed.
func commits(p *pgtest.Proxy) int64 {
	var n int64
	for _, c := range p.Commits() {
		n += c
	}
	return n
}

// bumpEpoch moves the lease of key to another epoch, as another
// replica's take does: a write fenced by the old one is refused.
func bumpEpoch(t *testing.T, s *Store, key string) {
	t.Helper()
	if _, err := s.pool.Exec(context.Background(), `UPDATE leases SET epoch = epoch + 1000 WHERE thread_key = $1`, key); err != nil {
		t.Fatal(err)
	}
}

// TestDeliveriesShareACommit: the deliveries of several conversations
// recorded while another is being committed go in one transaction, each
// fenced by its own lease; when one of them was fenced out meanwhile,
// it alone is refused (bot.ErrFenced) and keeps its entry, the others
// are recorded.
func TestDeliveriesShareACommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, p := storeViaProxy(t)
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("one fenced out %v", stale), func(t *testing.T) {
			const n = 3
			fences := make([]context.Context, n)
			obs := make([]bot.Outbound, n)
			for i := range n {
				key := fmt.Sprintf("telegram:%v%d:", stale, i)
				if ok, err := s.Hold(ctx, key); !ok || err != nil {
					t.Fatalf("hold %s: %v %v", key, ok, err)
				}
				fences[i] = s.Fence(ctx, key)
				obs[i] = bot.Outbound{ID: fmt.Sprintf("o-%v-%d", stale, i), Platform: "telegram", RunID: fmt.Sprintf("r-%v-%d", stale, i),
					Msg: bot.Outgoing{ChatID: "c", Text: "answer"}, Created: time.Now()}
				if err := s.Commit(fences[i], bot.Change{Send: []bot.Outbound{obs[i]}}); err != nil {
					t.Fatal(err)
				}
			}
			if stale {
				bumpEpoch(t, s, fmt.Sprintf("telegram:%v%d:", stale, 1))
			}
			// A transaction of deliveries in flight: the next ones wait.
			s.deliveries.slot <- struct{}{}
			errs := make(chan error, n)
			idx := make(chan int, n)
			for i := range n {
				go func() {
					err := s.Delivered(fences[i], obs[i], "")
					idx <- i
					errs <- err
				}()
			}
			waitUntil(t, func() bool {
				s.deliveries.mu.Lock()
				defer s.deliveries.mu.Unlock()
				return len(s.deliveries.waiting) == n
			})
			p.Reset()
			<-s.deliveries.slot
			got := map[int]error{}
			for range n {
				i := <-idx
				got[i] = <-errs
			}
			for i := range n {
				fenced := stale && i == 1
				if fenced != errors.Is(got[i], bot.ErrFenced) || !fenced && got[i] != nil {
					t.Errorf("delivery %d: %v, want fenced %v", i, got[i], fenced)
				}
			}
			want := int64(1) // one for all
			if stale {
				want = n - 1 // refused together, then each alone: the others'
			}
			if c := commits(p); c != want {
				t.Errorf("%d commits (%v), want %d", c, p.Commits(), want)
			}
			left, err := s.Outbox(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, ob := range left {
				ids = append(ids, ob.ID)
			}
			if stale && (len(ids) != 1 || ids[0] != obs[1].ID) || !stale && len(ids) != 0 {
				t.Errorf("outbox after: %v", ids)
			}
			if stale { // leave none for the next case
				if _, err := s.pool.Exec(ctx, `DELETE FROM outbox`); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestClaimThreadWithNothingCommitsNothing: a claim of a conversation's
// outbox that finds nothing to take commits no transaction (its lease's
// guard locked a row: a commit would be a WAL flush), and is still
// refused when the lease was taken since.
func TestClaimThreadWithNothingCommitsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, p := storeViaProxy(t)
	const key = "telegram:claim:"
	if ok, err := s.Hold(ctx, key); !ok || err != nil {
		t.Fatalf("hold: %v %v", ok, err)
	}
	p.Reset()
	if got, err := s.ClaimThread(ctx, key); err != nil || len(got) != 0 {
		t.Fatalf("claim: %v %v, want nothing", got, err)
	}
	if c := commits(p); c != 0 {
		t.Errorf("an empty claim committed %d write transactions (%v), want none", c, p.Commits())
	}
	bumpEpoch(t, s, key)
	if got, err := s.ClaimThread(ctx, key); !errors.Is(err, bot.ErrFenced) || len(got) != 0 {
		t.Errorf("a claim under a lease taken since: %v %v, want bot.ErrFenced", got, err)
	}
}

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
