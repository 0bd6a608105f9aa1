package postgres

import (
	"bytes"
	"context"
	"crypto/cipher"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/inspector"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
	"github.com/tidybot/tidybot/store/seal"
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

// TestOpenReadsTheKeysOfOneMoment: a replica that reads the master key
// before another replica keeps its own, and the data keys after that
// replica sealed a first value with it, would find data keys and no
// master to open them with, and refuse to start. The test's
// transaction plays the other replica: it keeps a master key and a data
// key while Open waits for data_keys, locked until then.
func TestOpenReadsTheKeysOfOneMoment(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	ctx := context.Background()
	// A migrated database with no key yet: a store with a secret keeps
	// none.
	s, err := Open(ctx, u, WithSecretKeys([][]byte{bytes.Repeat([]byte{1}, 32)}))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()

	other, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	watch, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE data_keys IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

	type opened struct {
		s   *Store
		err error
	}
	done := make(chan opened, 1)
	go func() {
		s, err := Open(ctx, u)
		done <- opened{s, err}
	}()
	for waiting := false; !waiting; {
		if err := watch.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_locks WHERE relation = 'data_keys'::regclass AND NOT granted`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case o := <-done:
			t.Fatalf("Open did not wait for data_keys: %v", o.err)
		case <-time.After(10 * time.Millisecond):
		}
	}

	master := bytes.Repeat([]byte{2}, 32)
	ma, err := seal.NewAEAD(master)
	if err != nil {
		t.Fatal(err)
	}
	id, key, err := seal.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO meta (key, value) VALUES ($1, $2)`, metaMaster, master); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO data_keys (id, period, scope, sealed) VALUES ($1, $2, $3, $4)`,
		id, seal.PeriodOf(t0), scopeNone, seal.SealKey(ma, id, key)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	o := <-done
	if o.err != nil {
		t.Fatalf("a replica opening while another kept its keys: %v", o.err)
	}
	defer o.s.Close()
	if _, err := o.s.keys.aead(ctx, o.s.pool, id); err != nil {
		t.Errorf("the data key the other replica sealed does not open: %v", err)
	}
}

// TestLockLaterLeavesTheScopesAsGiven: lockLater locks each scope once,
// "" as scopeNone, in one order, and leaves the caller's slice as it
// was (fencedTx passes its caller's scopes on).
func TestLockLaterLeavesTheScopesAsGiven(t *testing.T) {
	master, err := seal.NewAEAD(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	k := &keyring{masters: []cipher.AEAD{master}, now: time.Now}
	scopes := []string{"telegram:1:", "", scopeOutbox, "", "telegram:1:"}
	given := slices.Clone(scopes)
	p := &pipe{b: &pgx.Batch{}}
	k.lockLater(p, scopes...)
	if !slices.Equal(scopes, given) {
		t.Errorf("lockLater changed the caller's scopes: %q, was %q", scopes, given)
	}
	var locked []string
	for _, q := range p.b.QueuedQueries {
		locked = append(locked, q.Arguments[0].(string))
	}
	if want := []string{scopeNone, scopeOutbox, "telegram:1:"}; !slices.Equal(locked, want) {
		t.Errorf("locked %q, want %q", locked, want)
	}
}
