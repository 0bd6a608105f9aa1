package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// runMigrate runs `tidybot migrate args...` with e's configuration.
func runMigrate(t *testing.T, e *env, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	m := &Main{Args: append([]string{"migrate"}, args...), Stdout: &out, Stderr: &bytes.Buffer{}, Config: &e.cfg}
	err := m.Run(t.Context())
	_ = m.Close()
	return out.String(), err
}

// populatedBolt writes populate's contents in a bbolt file at path.
func populatedBolt(t *testing.T, e *env, path string) {
	t.Helper()
	src, err := openBolt(e.cfg, path)
	if err != nil {
		t.Fatal(err)
	}
	populate(t, src)
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
}

// copyFile copies the file at from to to.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateFromTheSameFileByAnotherPathCopiesNothing: deploy.md says
// "once done, running it again copies nothing". The copy was recorded by
// the file's absolute path, so the same file reached by a symlink (the
// volume's host path instead of /data) or a copy taken for the move was
// copied again: every message and journal entry twice (issue 35). Now a
// file is known by an id written in it.
func TestMigrateFromTheSameFileByAnotherPathCopiesNothing(t *testing.T) {
	e := newEnv(t)
	e.cfg.DatabaseURL = ""
	e.cfg.SecretKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	populatedBolt(t, e, e.cfg.DB)
	link := filepath.Join(t.TempDir(), "data-volume.db")
	if err := os.Symlink(e.cfg.DB, link); err != nil {
		t.Fatal(err)
	}
	e.cfg.DatabaseURL = pgtest.URL(t)
	if out, err := runMigrate(t, e, "--from", e.cfg.DB); err != nil {
		t.Fatal(err, out)
	}
	copied := filepath.Join(t.TempDir(), "copy.db")
	copyFile(t, e.cfg.DB, copied)
	for _, path := range []string{link, copied} {
		out, err := runMigrate(t, e, "--from", path)
		if err != nil || !strings.Contains(out, "was copied before: nothing to do") {
			t.Errorf("migrate --from %s: %v\n%s", path, err, out)
		}
	}
	dst, err := openPostgres(t.Context(), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	msgs, _ := dst.RecentMessages(t.Context(), "slack:D1:", time.Time{}, 10)
	audit, _ := dst.RunAudit(t.Context(), "run-done")
	if len(msgs) != 2 || len(audit) != 1 {
		t.Errorf("after migrate --from the same file by other paths: %d messages and %d journal entries, want 2 and 1", len(msgs), len(audit))
	}
}

// TestMigrateFromIntoADatabaseInUse: deploy.md: "Data already in this
// database stays". Another bbolt file copied into a database in use
// overwrote a person's newer settings with the file's older ones, and
// its (older) messages came after the conversation's newer ones, so the
// model's history ended with the oldest exchange (issue 35). Now such a
// database is refused without --merge; with it, the database's values
// stay and messages are in the order of their time.
func TestMigrateFromIntoADatabaseInUse(t *testing.T) {
	e := newEnv(t)
	e.cfg.DatabaseURL = ""
	e.cfg.SecretKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	populatedBolt(t, e, e.cfg.DB) // person:slack:U1 = Europe/Berlin; messages of 2026-11-25 09:00
	e.cfg.DatabaseURL = pgtest.URL(t)
	if _, err := runMigrate(t, e); err != nil {
		t.Fatal(err)
	}
	dst, err := openPostgres(t.Context(), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	// PostgreSQL in use: the person moved and said so; a newer exchange.
	ctx := t.Context()
	if err := dst.SetSetting(ctx, "person:slack:U1", `{"timezone":"America/New_York"}`); err != nil {
		t.Fatal(err)
	}
	later := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if err := dst.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: "slack:D1:", Role: "user", Text: "what's due today?", At: later}}); err != nil {
		t.Fatal(err)
	}
	_ = dst.Close()
	if out, err := runMigrate(t, e, "--from", e.cfg.DB); err == nil || !strings.Contains(err.Error(), "--merge") {
		t.Fatalf("migrate --from into a database in use: %v\n%s; want a refusal naming --merge", err, out)
	}
	if out, err := runMigrate(t, e, "--from", e.cfg.DB, "--merge"); err != nil {
		t.Fatal(err, out)
	}
	dst, err = openPostgres(t.Context(), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if v, _ := dst.Setting(ctx, "person:slack:U1"); !strings.Contains(v, "New_York") {
		t.Errorf("person's settings after migrate --from --merge: %s; the newer America/New_York was overwritten", v)
	}
	msgs, _ := dst.RecentMessages(ctx, "slack:D1:", time.Time{}, 10)
	var order []string
	for _, m := range msgs {
		order = append(order, fmt.Sprintf("%s %s", m.At.UTC().Format("01-02 15:04"), m.Text))
	}
	if len(msgs) != 3 || msgs[len(msgs)-1].Text != "what's due today?" {
		t.Errorf("history as the model gets it, oldest first: %q; want the file's two, then the newest", order)
	}
	if out, err := runMigrate(t, e, "--from", e.cfg.DB, "--merge"); err != nil || !strings.Contains(out, "nothing to do") {
		t.Errorf("merged again: %v\n%s", err, out)
	}
}
