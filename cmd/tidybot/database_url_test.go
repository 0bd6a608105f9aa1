package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/store/postgres"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// TestDatabaseURLFromTheEnvironment runs the built binary with only
// environment variables, TIDYBOT_DATABASE_URL among them: serve answers
// a Telegram message and keeps it in PostgreSQL (no bbolt file appears);
// runs, chat and migrate use the same database.
func TestDatabaseURLFromTheEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	e := newEnv(t)
	u := pgtest.URL(t)
	e.todo.SeedTalkInbox()
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	env := []string{"TIDYBOT_DATABASE_URL=" + u, "TELEGRAM_BOT_TOKEN=" + tg.Token, "TELEGRAM_API_URL=" + tg.URL, "TIDYBOT_ALLOWED_USERS=telegram:42"}
	p := startServeProcess(t, e, env...)
	tg.PushText(42, 42, "/tidy-inbox")
	waitFor(t, "the tidy's answer", func() bool { return strings.HasPrefix(lastText(tg, 42), "Moved ") })

	run := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(tidybotBinary(t), args...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
			"OPENAI_API_KEY=" + e.cfg.OpenAIKey, "OPENAI_BASE_URL=" + e.cfg.OpenAIBaseURL, "OPENAI_MODEL=" + e.cfg.OpenAIModel,
			"TODOIST_TOKEN=" + e.cfg.TodoistToken, "TODOIST_API_URL=" + e.cfg.TodoistURL, "TIDYBOT_DB=" + e.cfg.DB, "TIDYBOT_METRICS_ADDR="}, env...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tidybot %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// runs reads the database serve writes, while serve runs.
	mustContain(t, run("", "runs"), "telegram:42", "done")
	p.stop()
	mustContain(t, run("hello there\n", "chat"), "You said: hello there")
	out := run("", "runs")
	mustContain(t, out, "telegram:42", "console:local")
	if out := run("", "migrate"); strings.Contains(out, "applied") || !strings.Contains(out, "schema version") {
		t.Errorf("migrate on the database serve made: %q", out)
	}
	if _, err := os.Stat(e.cfg.DB); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a bbolt file was made at %s beside PostgreSQL: %v", e.cfg.DB, err)
	}
}

// TestNewerSchemaIsRefused: a database migrated by a newer tidybot is
// refused by serve, chat, runs and migrate, each saying to upgrade
// tidybot, and nothing is written to it.
func TestNewerSchemaIsRefused(t *testing.T) {
	e := newEnv(t)
	e.cfg.DatabaseURL = pgtest.URL(t)
	e.cfg.TelegramToken = ""
	st, err := postgres.Open(t.Context(), e.cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	conn, err := pgx.Connect(t.Context(), e.cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	newer := postgres.SchemaVersion() + 1
	if _, err := conn.Exec(t.Context(), `INSERT INTO tidybot_schema (version) VALUES ($1)`, newer); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"serve"}, {"chat"}, {"runs"}, {"migrate"}} {
		var out bytes.Buffer
		m := &Main{Args: args, Stdin: strings.NewReader("hi\n"), Stdout: &out, Stderr: &bytes.Buffer{}, Config: &e.cfg}
		err := m.Run(t.Context())
		_ = m.Close()
		if err == nil || !strings.Contains(err.Error(), "newer than this tidybot") || !strings.Contains(err.Error(), "upgrade tidybot") {
			t.Errorf("tidybot %s on a schema of version %d: %v, want a refusal saying to upgrade tidybot", args[0], newer, err)
		}
	}
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM messages`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d messages written to a database of a newer schema (%v)", n, err)
	}
}
