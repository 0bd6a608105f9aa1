package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

func TestMigrationsAreNumberedAndEmbedded(t *testing.T) {
	ms, err := migrations()
	if err != nil || len(ms) == 0 || SchemaVersion() != len(ms) {
		t.Fatalf("migrations: %d, %v", len(ms), err)
	}
}

func TestSchemaVersionChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, u := openTest(t)
	if v, err := s.Version(ctx); err != nil || v != SchemaVersion() {
		t.Fatalf("version after Open: %d, %v", v, err)
	}
	// Migrating again (another replica, tidybot migrate) applies nothing.
	if done, err := s.Migrate(ctx); err != nil || len(done) != 0 {
		t.Fatalf("second migrate: %v, %v", done, err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO tidybot_schema (version) VALUES ($1)`, SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	_, err := Open(ctx, u)
	if err == nil || !strings.Contains(err.Error(), "newer than this tidybot") {
		t.Fatalf("Open of a newer schema: %v", err)
	}
	if _, err := Open(ctx, u, WithoutMigrate()); err == nil || !strings.Contains(err.Error(), "upgrade tidybot") {
		t.Fatalf("a read-only Open of a newer schema: %v, want a refusal saying to upgrade tidybot", err)
	}
}

func TestReadOnlyOpenRefusesAnEmptyDatabase(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	_, err := Open(context.Background(), u, WithoutMigrate())
	if err == nil || !strings.Contains(err.Error(), "tidybot migrate") {
		t.Fatalf("WithoutMigrate on an empty database: %v", err)
	}
}

func TestBadURLDoesNotShowThePassword(t *testing.T) {
	_, err := Open(context.Background(), "postgres://u:hunter2@[::1/db")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("a bad URL: %v", err)
	}
}

func TestSecretKeyRotationAndAbsence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k1, k2 := []byte(strings.Repeat("1", 32)), []byte(strings.Repeat("2", 32))
	s, u := openTest(t, WithSecretKeys([][]byte{k1}))
	if err := s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: "a", Text: "hello", At: t0}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(ctx, u); err == nil || !strings.Contains(err.Error(), "TIDYBOT_SECRET_KEY") {
		t.Fatalf("Open without the key: %v", err)
	}
	if _, err := Open(ctx, u, WithSecretKeys([][]byte{k2})); err == nil || !strings.Contains(err.Error(), "do not open") {
		t.Fatalf("Open with another key: %v", err)
	}
	// A rotation lists the new key first: the data keys are sealed
	// again with it, and the old one is no longer needed.
	s2, err := Open(ctx, u, WithSecretKeys([][]byte{k2, k1}))
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	s3, err := Open(ctx, u, WithSecretKeys([][]byte{k2}))
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if msgs, err := s3.RecentMessages(ctx, "a", time.Time{}, 5); err != nil || len(msgs) != 1 || msgs[0].Text != "hello" {
		t.Fatalf("after the rotation: %+v, %v", msgs, err)
	}
}

func TestGeneratedMasterKeyIsKeptAndReplacedBySecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, u := openTest(t)
	if err := s.SaveSnapshot(ctx, "acct", []byte(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// A second replica (or restart) uses the generated key kept.
	s2, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s2.LoadSnapshot(ctx, "acct"); err != nil || string(got) != `{"x":1}` {
		t.Fatalf("after a restart: %s, %v", got, err)
	}
	s2.Close()
	s3, err := Open(ctx, u, WithSecretKeys([][]byte{[]byte(strings.Repeat("3", 32))}))
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	var n int
	_ = s3.pool.QueryRow(ctx, `SELECT count(*) FROM meta WHERE key = $1`, metaMaster).Scan(&n)
	if n != 0 {
		t.Error("the generated master key is kept once TIDYBOT_SECRET_KEY seals every data key")
	}
	if got, err := s3.LoadSnapshot(ctx, "acct"); err != nil || string(got) != `{"x":1}` {
		t.Fatalf("with the secret: %s, %v", got, err)
	}
}

func TestPruneRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := t0.Add(30 * 24 * time.Hour)
	clock := t0
	s, _ := openTest(t, withClock(func() time.Time { return clock }))
	old, recent := t0, now.Add(-time.Hour)
	oldRun := run("old", "a", bot.RunDone, old)
	busyRun := run("busy", "a", bot.RunWorking, old)
	busyRun.Instruction = "keep me"
	for _, c := range []bot.Change{
		{Message: &bot.Message{ThreadKey: "a", Text: "old", At: old}},
		{Run: oldRun, Audit: []bot.AuditEntry{{RunID: "old", ThreadKey: "a"}, {RunID: "old", ThreadKey: "a"}}},
		{Run: busyRun},
	} {
		if err := s.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetSetting(ctx, bot.PendingPrefix+"old", `{"at":"`+old.Format(time.RFC3339)+`"}`); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveSnapshot(ctx, "stale", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	var oldKeys int
	_ = s.pool.QueryRow(ctx, `SELECT count(*) FROM data_keys`).Scan(&oldKeys)
	clock = now
	if err := s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: "a", Text: "new", At: recent}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSetting(ctx, bot.PendingPrefix+"new", `{"at":"`+recent.Format(time.RFC3339)+`"}`); err != nil {
		t.Fatal(err)
	}
	n, err := s.Prune(ctx, now.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n != (bot.Pruned{Messages: 1, Runs: 1, Audit: 2}) {
		t.Errorf("pruned %+v", n)
	}
	if msgs, _ := s.RecentMessages(ctx, "a", time.Time{}, 10); len(msgs) != 1 || msgs[0].Text != "new" {
		t.Errorf("messages kept: %+v", msgs)
	}
	if r, err := s.Run(ctx, "busy"); err != nil || r.Instruction != "keep me" {
		t.Errorf("the working run, sealed with a key of an old period: %+v, %v", r, err)
	}
	if _, err := s.Setting(ctx, bot.PendingPrefix+"old"); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("the old pending request: %v", err)
	}
	if _, err := s.Setting(ctx, bot.PendingPrefix+"new"); err != nil {
		t.Errorf("the new pending request: %v", err)
	}
	if got, _ := s.LoadSnapshot(ctx, "stale"); got != nil {
		t.Error("a snapshot not saved for the retention period is kept")
	}
	var left int
	_ = s.pool.QueryRow(ctx, `SELECT count(*) FROM data_keys WHERE period < $1`, now.Add(-24*time.Hour).Unix()).Scan(&left)
	if oldKeys == 0 || left != 0 {
		t.Errorf("data keys of old periods: %d before, %d left", oldKeys, left)
	}
}
