package postgres

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// TestDeleteSnapshotLocksTheKeysFirst: replica A's DeleteSnapshot
// (/disconnect, or Prune) and replica B's SaveSnapshot of the same
// account at once both succeed, and no snapshot is left sealed with a
// destroyed key. B seals with the account's key (its row FOR SHARE)
// between A's first statement and A's locking of the keys. Before, A
// deleted the snapshot's row first: B's upsert waited for A's row lock
// while A's FOR UPDATE of the key waited for B's FOR SHARE, a deadlock
// PostgreSQL broke by failing one of them.
func TestDeleteSnapshotLocksTheKeysFirst(t *testing.T) {
	u := pgtest.URL(t)
	ctx := context.Background()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	px := pgtest.NewProxy(t, pu.Host)
	a, err := Open(ctx, px.Via(t, u))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	const acct = "acct-1"
	if err := a.SaveSnapshot(ctx, acct, []byte("before")); err != nil {
		t.Fatal(err)
	}
	reached, resume := px.PauseAt(`ORDER BY id FOR UPDATE`) // lockKeys
	defer resume()
	deleted := make(chan error, 1)
	go func() { deleted <- a.DeleteSnapshot(ctx, acct) }()
	select {
	case <-reached:
	case err := <-deleted:
		t.Fatalf("DeleteSnapshot locked no key: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("DeleteSnapshot did not lock the keys")
	}
	saved := make(chan error, 1)
	go func() { saved <- b.SaveSnapshot(ctx, acct, []byte("saved while deleted")) }()
	time.Sleep(300 * time.Millisecond) // B seals (and, before, waits for A's row)
	resume()
	if err := <-deleted; err != nil {
		t.Errorf("DeleteSnapshot: %v", err)
	}
	if err := <-saved; err != nil {
		t.Errorf("SaveSnapshot: %v", err)
	}
	for _, s := range []*Store{a, b} {
		if got, err := s.LoadSnapshot(ctx, acct); err != nil || got != nil {
			t.Errorf("LoadSnapshot after the delete: %q, %v; want none", got, err)
		}
	}
	assertNoValueSealedWithAGoneKey(t, a)
}

// TestDeletePendingWaitsForARequestBeingSet: replica B replaces a
// pending request (destroying its key, sealing the new one with a new
// key) while replica A deletes it (SetSetting with "", as Prune does).
// A waits for B, then deletes B's request: none is left sealed with a
// destroyed key. Before, A's DELETE missed B's new row and A then
// destroyed B's new key under it.
func TestDeletePendingWaitsForARequestBeingSet(t *testing.T) {
	a, b := twoReplicas(t)
	ctx := context.Background()
	key := bot.PendingPrefix + "telegram:42"
	if err := a.SetSetting(ctx, key, `{"text":"old"}`); err != nil {
		t.Fatal(err)
	}
	// B's SetSetting, step by step as it runs.
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := b.deletePending(ctx, tx, key); err != nil {
		t.Fatal(err)
	}
	v, id, err := b.sealJSON(ctx, tx, key, `{"text":"new"}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := putSetting(ctx, tx, key, v, id); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.SetSetting(ctx, key, "") }()
	time.Sleep(300 * time.Millisecond)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, err := b.Setting(ctx, key); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("Setting after a delete raced a set: %q, %v; want not found, not one sealed with a destroyed key", got, err)
	}
	assertNoValueSealedWithAGoneKey(t, a)
}

// assertNoValueSealedWithAGoneKey fails when a sealed column holds a
// value whose key is no longer there.
func assertNoValueSealedWithAGoneKey(t *testing.T, s *Store) {
	t.Helper()
	for _, c := range sealedColumns {
		var n int
		err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+c.table+` WHERE `+c.keyID+` IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM data_keys d WHERE d.id = `+c.keyID+`)`).Scan(&n)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if n > 0 {
			t.Errorf("%s.%s: %d values sealed with a destroyed key", c.table, c.value, n)
		}
	}
}
