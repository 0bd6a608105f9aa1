package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/bot"
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
	ctx := context.Background()
	a, b, px, pb := replicasViaProxies(t, true)
	const acct = "acct-1"
	if err := a.SaveSnapshot(ctx, acct, []byte("before")); err != nil {
		t.Fatal(err)
	}
	reached, resume := px.PauseAt(`ORDER BY id FOR UPDATE`) // lockKeys
	defer resume()
	deleted := make(chan error, 1)
	go func() { deleted <- a.DeleteSnapshot(ctx, acct) }()
	waitHeld(t, reached, deleted, "DeleteSnapshot's locking of the keys")
	// B seals (its key FOR SHARE), held before its upsert reaches the
	// server; then both go on. (Before, B's upsert then waited for A's
	// row while A's FOR UPDATE waited for B's key.)
	sealed, upsert := pb.PauseAt(`INSERT INTO snapshots`)
	defer upsert()
	saved := make(chan error, 1)
	go func() { saved <- b.SaveSnapshot(ctx, acct, []byte("saved while deleted")) }()
	waitHeld(t, sealed, saved, "SaveSnapshot's upsert, once sealed")
	upsert()
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
	waitBlockedBy(t, a, tx.Conn().PgConn().PID(), done) // A's delete waits for B's transaction
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

// waitHeld waits up to 10 s for reached (a PauseAt holding a
// statement), and fails the test when it does not come, or when done
// (the result of the call that should send the statement) comes first.
func waitHeld(t *testing.T, reached <-chan struct{}, done <-chan error, what string) {
	t.Helper()
	select {
	case <-reached:
	case err := <-done:
		t.Fatalf("%s: never sent, the call ended: %v", what, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not sent within 10 s", what)
	}
}

// waitBlockedBy waits up to 10 s until a statement waits for a lock
// that server process pid holds, and fails the test when none does, or
// when done (the would-be waiter's result) comes first.
func waitBlockedBy(t *testing.T, s *Store, pid uint32, done <-chan error) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var blocked bool
		if err := s.pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE $1::int = ANY(pg_blocking_pids(pid)))`, int32(pid)).Scan(&blocked); err != nil {
			t.Fatal(err)
		}
		if blocked {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("ended without waiting for server process %d: %v", pid, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing waited for server process %d within 10 s", pid)
		}
	}
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

// TestPruneKeepsAPendingRequestReplacedMeanwhile: replica A's Prune
// reads an old pending request and decides it goes; before A deletes
// it, replica B replaces it with a fresh one (the person asked again).
// A deletes the request it read only: B's fresh one stays, readable.
// Before, A deleted the row by its key, whatever it held by then, and
// destroyed the fresh request's key with it.
func TestPruneKeepsAPendingRequestReplacedMeanwhile(t *testing.T) {
	ctx := context.Background()
	a, b, px := twoReplicasAViaProxy(t)
	key := bot.PendingPrefix + "telegram:42"
	// Set through B: A's connection has not prepared lockKeys' statement,
	// which PauseAt then sees by its text.
	if err := b.SetSetting(ctx, key, `{"text":"old","at":"2020-01-01T00:00:00Z"}`); err != nil {
		t.Fatal(err)
	}
	fresh := `{"text":"fresh","at":"` + time.Now().UTC().Format(time.RFC3339) + `"}`
	reached, resume := px.PauseAt(`ORDER BY id FOR UPDATE`) // the pending request's keys, once it was read
	defer resume()
	pruned := make(chan error, 1)
	go func() { _, err := a.Prune(ctx, time.Now().Add(-time.Hour)); pruned <- err }()
	waitHeld(t, reached, pruned, "Prune's locking of the pending request's keys")
	if err := b.SetSetting(ctx, key, fresh); err != nil {
		t.Fatal(err)
	}
	resume()
	if err := <-pruned; err != nil {
		t.Fatalf("Prune: %v", err)
	}
	if got, err := b.Setting(ctx, key); err != nil || got != fresh {
		t.Errorf("the request made while Prune ran: %q, %v; want %q", got, err, fresh)
	}
	assertNoValueSealedWithAGoneKey(t, a)
}
