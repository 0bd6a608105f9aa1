package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/store/postgres"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// TestChatOnPostgres: with TIDYBOT_DATABASE_URL, chat keeps everything
// in PostgreSQL (no bbolt file), and /undo finds the run it wrote there.
func TestChatOnPostgres(t *testing.T) {
	e := newEnv(t)
	e.cfg.DatabaseURL = pgtest.URL(t)
	e.todo.SeedTalkInbox()
	before := e.layout()
	out := e.chat(t, "/tidy-inbox\n", nil)
	mustContain(t, out, "Moved 9 tasks: 3 to ")
	// A second chat (a restart) reads the first's runs from the database.
	out = e.chat(t, "/undo\n", nil)
	mustContain(t, out, "↩️ Undid 12 of 12 changes of the last run.")
	if got := e.layout(); len(got["Inbox"]) != len(before["Inbox"]) {
		t.Errorf("after undo: %v", got)
	}
	// tidybot runs reads them there too.
	var runsOut bytes.Buffer
	m := &Main{Args: []string{"runs"}, Stdout: &runsOut, Stderr: &bytes.Buffer{}, Config: &e.cfg}
	err := m.Run(context.Background())
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil || !strings.Contains(runsOut.String(), "console:local  done") {
		t.Errorf("tidybot runs: %v\n%s", err, runsOut.String())
	}
	if _, err := os.Stat(e.cfg.DB); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a bbolt file was made at %s beside PostgreSQL: %v", e.cfg.DB, err)
	}
}

func TestMigrateCommand(t *testing.T) {
	e := newEnv(t)
	e.cfg.DatabaseURL = pgtest.URL(t)
	migrate := func() string {
		var out, errOut bytes.Buffer
		m := &Main{Args: []string{"migrate"}, Stdout: &out, Stderr: &errOut, Config: &e.cfg}
		if err := m.Run(context.Background()); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		return out.String()
	}
	all := make([]int, postgres.SchemaVersion())
	for i := range all {
		all[i] = i + 1
	}
	if out := migrate(); !strings.Contains(out, fmt.Sprintf("applied migrations %v", all)) {
		t.Errorf("first migrate: %q", out)
	}
	if out := migrate(); strings.Contains(out, "applied") || !strings.Contains(out, fmt.Sprintf("schema version %d", len(all))) {
		t.Errorf("second migrate: %q", out)
	}
	e.cfg.DatabaseURL = ""
	m := &Main{Args: []string{"migrate"}, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Config: &e.cfg}
	if err := m.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "TIDYBOT_DATABASE_URL is not set") {
		t.Errorf("migrate without a URL: %v", err)
	}
}

func TestBadDatabaseURLIsRefusedWithoutShowingIt(t *testing.T) {
	c := validConfig()
	c.DatabaseURL = "mysql://root:pw-do-not-show@db/x"
	err := validate(c, true)
	if err == nil || !strings.Contains(err.Error(), "TIDYBOT_DATABASE_URL") || strings.Contains(err.Error(), "pw-do-not-show") {
		t.Errorf("a MySQL URL: %v", err)
	}
}

// TestMigrateFromBoltRoundTrip: a bbolt database that chat populated is
// copied into PostgreSQL, where a chat on it undoes the run made on
// bbolt (its record, transcript and journal came along); a second copy
// copies nothing.
func TestMigrateFromBoltRoundTrip(t *testing.T) {
	e := newEnv(t)
	e.cfg.DatabaseURL = "" // first on bbolt, whatever TIDYBOT_TEST_STORE says
	e.cfg.SecretKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	e.todo.SeedTalkInbox()
	before := e.layout()
	mustContain(t, e.chat(t, "remember the word pineapple\n/tidy-inbox\n", nil), "Moved ")
	e.cfg.DatabaseURL = pgtest.URL(t)
	migrate := func() string {
		t.Helper()
		var out bytes.Buffer
		m := &Main{Args: []string{"migrate", "--from", e.cfg.DB}, Stdout: &out, Stderr: &bytes.Buffer{}, Config: &e.cfg}
		if err := m.Run(context.Background()); err != nil {
			t.Fatalf("migrate --from: %v", err)
		}
		return out.String()
	}
	out := migrate()
	mustContain(t, out, "copied ", "audit 12", "messages 3", "runs 2", "snapshots 1", "threads 1")
	mustContain(t, migrate(), "was copied before: nothing to do")
	out = e.chat(t, "/undo\nwhat was the word?\n", nil)
	mustContain(t, out, "↩️ Undid 12 of 12 changes of the last run.")
	if got := e.layout(); len(got["Inbox"]) != len(before["Inbox"]) {
		t.Errorf("after undo on PostgreSQL: %v", got)
	}
	reqs := e.model.Requests()
	if last := reqs[len(reqs)-1]; !strings.Contains(fmt.Sprint(last.Messages), "pineapple") {
		t.Error("the history written on bbolt is not given to the model on PostgreSQL")
	}
}
