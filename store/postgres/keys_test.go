package postgres

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/inspector"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// TestReplicasStartingTogetherShareTheKeys: serve replicas started at
// once on a new database, without TIDYBOT_SECRET_KEY, each generate a
// master key and a run link key; all must end up with the first one
// kept, or values sealed by one do not open on another and run links
// signed by one are refused by another.
func TestReplicasStartingTogetherShareTheKeys(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	ctx := context.Background()
	const n = 8
	stores := make([]*Store, n)
	links := make([][]byte, n)
	var opened, wg sync.WaitGroup
	opened.Add(n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(ctx, u)
			opened.Done()
			if err != nil {
				t.Errorf("replica %d: %v", i, err)
				return
			}
			stores[i] = s
			opened.Wait() // every replica asks for the link key at once
			if links[i], err = inspector.LinkKey(ctx, nil, s, true); err != nil {
				t.Errorf("replica %d: link key: %v", i, err)
			}
		}()
	}
	wg.Wait()
	for _, s := range stores {
		if s != nil {
			t.Cleanup(func() { _ = s.Close() })
		}
	}
	if t.Failed() {
		return
	}
	for i := 1; i < n; i++ {
		if !bytes.Equal(links[i], links[0]) {
			t.Errorf("replica %d signs run links with another key than replica 0", i)
		}
	}
	// A replica started later reads the key kept.
	if again, err := inspector.LinkKey(ctx, nil, stores[0], false); err != nil || !bytes.Equal(again, links[0]) {
		t.Errorf("the link key read later is another (%v)", err)
	}
	// A pending request is sealed with a data key, itself sealed with
	// the master key: another replica opens it only with the same master.
	for i, s := range stores {
		key := fmt.Sprintf("%sreplica%d", bot.PendingPrefix, i)
		if err := s.SetSetting(ctx, key, `{"text":"hello"}`); err != nil {
			t.Fatal(err)
		}
		next := stores[(i+1)%n]
		if v, err := next.Setting(ctx, key); err != nil || v != `{"text":"hello"}` {
			t.Errorf("replica %d reads what replica %d sealed: %q, %v", (i+1)%n, i, v, err)
		}
	}
}
