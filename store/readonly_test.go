package store

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

func TestReadOnlyReadsAndYieldsToTheWriter(t *testing.T) {
	s, path := open(t)
	if err := s.SaveRun(t.Context(), &bot.Run{ID: "r1", ThreadKey: "k", Status: bot.RunDone, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// While the writer holds the file, a reader gets ErrInUse quickly.
	start := time.Now()
	if _, err := Open(path, ReadOnly(), WithLockTimeout(200*time.Millisecond)); !errors.Is(err, ErrInUse) {
		t.Fatalf("read-only open beside a writer: %v, want ErrInUse", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(path, ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if r, err := ro.Run(t.Context(), "r1"); err != nil || r.Status != bot.RunDone {
		t.Errorf("run %+v, %v", r, err)
	}
	if err := ro.SaveRun(t.Context(), &bot.Run{ID: "r2"}); err == nil {
		t.Error("a read-only store wrote")
	}
}

func TestReadOnlyRefusesAMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.db")
	if _, err := Open(path, ReadOnly()); err == nil {
		t.Fatal("a missing file opened read-only")
	}
}
