package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// env is an end-to-end setup: the fake Todoist, the fake model server
// with the scenario model, and a config pointing tidybot at both with its
// database in a temp dir.
type env struct {
	todo  *todoisttest.Server
	model *openaitest.Server
	scen  *scenario
	cfg   Config
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{todo: todoisttest.New(t), scen: &scenario{}}
	e.model = openaitest.New(openaitest.FromAgent(e.scen.reply))
	t.Cleanup(e.model.Close)
	e.cfg = Config{
		OpenAIKey: "sk-test", OpenAIBaseURL: e.model.URL, OpenAIModel: "scripted",
		TodoistToken: e.todo.Token, TodoistURL: e.todo.URL,
		TelegramURL: "https://api.telegram.org", SlackURL: "https://slack.com/api/",
		DB: filepath.Join(t.TempDir(), "tidybot.db"), HTTPAddr: "127.0.0.1:0",
		Protocol: "tools", MaxSteps: 20, MaxTokens: 1024, TokenBudget: 200000, History: 15,
		RunTimeout: time.Minute, Workers: 4, Confirm: "destructive", LogLevel: "warn", Retention: 720 * time.Hour,
		AllowedUsers: []string{"telegram:42"},
		// serve in these tests often runs no platform (each test adds
		// the one it drives): allowed explicitly, as a user must.
		HTTPOnly: true,
	}
	// TIDYBOT_TEST_STORE=postgres runs these end-to-end tests on the
	// PostgreSQL store (a schema each); tests read what is stored with
	// e.openStore and e.stored, and those of the bbolt file itself skip.
	if os.Getenv("TIDYBOT_TEST_STORE") == "postgres" {
		e.cfg.DatabaseURL = pgtest.URL(t)
	}
	return e
}

// chat runs `tidybot chat` with input on stdin and returns stdout.
func (e *env) chat(t *testing.T, input string, ready func(*bot.Bot)) string {
	t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Args: []string{"chat"}, Stdin: strings.NewReader(input), Stdout: &out, Stderr: &errOut, Config: &e.cfg, Ready: ready}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := m.Run(ctx)
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("chat: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	return out.String()
}

// layout is the fake account as project name → sorted task contents.
func (e *env) layout() map[string][]string {
	names := map[string]string{}
	for _, p := range e.todo.Projects() {
		names[p.ID] = p.Name
	}
	out := map[string][]string{}
	for _, p := range e.todo.Projects() {
		out[p.Name] = nil
	}
	for _, task := range e.todo.Tasks() {
		out[names[task.ProjectID]] = append(out[names[task.ProjectID]], task.Content)
	}
	for _, ts := range out {
		sort.Strings(ts)
	}
	return out
}

func mustContain(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestChatTidy(t *testing.T) {
	for _, proto := range []string{"tools", "json"} {
		t.Run(proto, func(t *testing.T) {
			e := newEnv(t)
			e.cfg.Protocol = proto
			e.todo.SeedTalkInbox()
			out := e.chat(t, "/tidy-inbox\n", nil)
			mustContain(t, out, "🤔 Working on it…", "🔎 Read the overview", "➡️ Moved 9 tasks into 3 projects", "Moved 9 tasks: 3 to ")
			got := e.layout()
			if len(got["Inbox"]) != 0 || len(got["PyData Talk"]) != 3 || len(got["Birthday Celebration"]) != 3 || len(got["Personal Website"]) != 3 {
				t.Errorf("layout: %v", got)
			}
			// The final answer is its own last line, after the progress notes.
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if !strings.HasPrefix(lines[len(lines)-1], "Moved ") {
				t.Errorf("last line %q", lines[len(lines)-1])
			}
		})
	}
}

func TestChatAskUserAcrossTwoLines(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	e.todo.AddTask(todoisttest.Task{Content: "Book dentist appointment"})
	out := e.chat(t, "file the dentist task\n2\n", nil)
	mustContain(t, out, "Which project should the dentist task go to?\n  1) Health\n  2) Errands\n", "Filed the dentist task.")
	if got := e.layout()["Errands"]; len(got) != 1 || got[0] != "Book dentist appointment" {
		t.Errorf("layout: %v", e.layout())
	}
}

func TestChatConfirmationNoThenYes(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	out := e.chat(t, "delete the cake task\nno\n", nil)
	mustContain(t, out, "Delete \"Buy birthday cake", "1) Delete 1 task", "2) Cancel", "OK, I kept the cake task.")
	if n := len(e.todo.Tasks()); n != 9 {
		t.Fatalf("tasks after no: %d, want 9", n)
	}
	out = e.chat(t, "delete the cake task\nyes\n", nil)
	mustContain(t, out, "Deleted the cake task.")
	if n := len(e.todo.Tasks()); n != 8 {
		t.Errorf("tasks after yes: %d, want 8", n)
	}
}

func TestChatUndoRestoresTodoist(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	before := e.layout()
	beforeIDs := taskHomes(e.todo)
	out := e.chat(t, "/tidy-inbox\n/undo\n", nil)
	mustContain(t, out, "↩️ Undid 12 of 12 changes of the last run. Reverted:")
	if got := e.layout(); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("after undo:\n%v\nwant\n%v", got, before)
	}
	if got := taskHomes(e.todo); fmt.Sprint(got) != fmt.Sprint(beforeIDs) {
		t.Errorf("task homes differ after undo")
	}
	out = e.chat(t, "/undo\n", nil)
	mustContain(t, out, "There is nothing to undo here.")
}

func taskHomes(todo *todoisttest.Server) map[string]string {
	out := map[string]string{}
	for _, task := range todo.Tasks() {
		out[task.ID] = task.ProjectID + "/" + task.SectionID
	}
	return out
}

func TestChatReset(t *testing.T) {
	e := newEnv(t)
	e.chat(t, "remember the word pineapple\nwhat was the word?\n/reset\nwhat was the word?\n", nil)
	reqs := e.model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("model calls = %d, want 3", len(reqs))
	}
	holds := func(r int) bool { return strings.Contains(fmt.Sprint(reqs[r].Messages), "pineapple") }
	if !holds(1) {
		t.Error("before /reset the history does not hold the earlier message")
	}
	if holds(2) {
		t.Error("after /reset the history still holds the earlier message")
	}
}

// recorder is a platform that records what the bot posts.
type recorder struct {
	mu   sync.Mutex
	sent []string
}

func (r *recorder) Name() string { return "telegram" }

func (r *recorder) Send(_ context.Context, m bot.Outgoing) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, m.ChatID+": "+m.Text)
	return fmt.Sprint(len(r.sent)), nil
}

func (r *recorder) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.sent, "\n")
}

func TestPipelineThroughMain(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	tg := &recorder{}
	e.chat(t, "", func(b *bot.Bot) {
		b.AddPlatform(tg)
		ctx := t.Context()
		in := func(chat, user, text, event string) bot.Incoming {
			return bot.Incoming{Platform: "telegram", ChatID: chat, UserID: user, Text: text, EventID: event, DM: true}
		}
		for _, ev := range []bot.Incoming{
			in("c1", "42", "first message", "u1"),
			in("c1", "42", "first message", "u1"), // a redelivery
			in("c1", "42", "second message", "u2"),
			in("c9", "666", "delete everything", "u3"), // not allowed
		} {
			if err := b.Handle(ctx, ev); err != nil {
				t.Errorf("handle: %v", err)
			}
		}
	})
	got := tg.all()
	if strings.Count(got, "You said: first message") != 1 {
		t.Errorf("the duplicate event ran again:\n%s", got)
	}
	if i, j := strings.Index(got, "You said: first message"), strings.Index(got, "You said: second message"); i < 0 || j < i {
		t.Errorf("the second message did not wait its turn:\n%s", got)
	}
	if !strings.Contains(got, "c9: Sorry, I only work for") || strings.Count(got, "c9:") != 1 {
		t.Errorf("unknown user: want one refusal:\n%s", got)
	}
	st := e.openStore(t)
	if _, err := st.Thread(t.Context(), "telegram:c9:"); err == nil {
		t.Error("the unknown user's message was stored")
	}
	if n := e.todo.SyncRequests(); n != 0 {
		t.Errorf("Todoist writes: %d", n)
	}
}

func TestStartupErrors(t *testing.T) {
	e := newEnv(t)
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no model", func(c *Config) { c.OpenAIKey, c.OpenAIBaseURL = "", "https://api.openai.com/v1" }, "OPENAI_BASE_URL=http://localhost:11434/v1"},
		{"no Todoist token", func(c *Config) { c.TodoistToken = "" }, "Settings → Integrations → Developer"},
		{"bad protocol", func(c *Config) { c.Protocol = "xml" }, "TIDYBOT_PROTOCOL"},
		{"bad user", func(c *Config) { c.AllowedUsers = []string{"bob"} }, "TIDYBOT_ALLOWED_USERS"},
		{"no retention", func(c *Config) { c.Retention = 0 }, "TIDYBOT_RETENTION"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := e.cfg
			tt.edit(&cfg)
			err := (&Main{Args: []string{"chat"}, Config: &cfg}).Run(t.Context())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
	t.Run("database in use", func(t *testing.T) {
		if e.onPostgres() {
			t.Skip("bbolt's file lock: replicas share PostgreSQL by design")
		}
		st, err := store.Open(e.cfg.DB)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		start := time.Now()
		err = (&Main{Args: []string{"chat"}, Config: &e.cfg, Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}).Run(t.Context())
		if err == nil || !strings.Contains(err.Error(), "in use") {
			t.Errorf("err = %v", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("took %v to report a locked database", d)
		}
	})
}

func TestHelpListsEverySetting(t *testing.T) {
	var out bytes.Buffer
	if err := (&Main{Args: []string{"-h"}, Stdout: &out}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "TODOIST_TOKEN", "TODOIST_API_URL", "TELEGRAM_BOT_TOKEN", "TELEGRAM_API_URL",
		"TELEGRAM_WEBHOOK_URL", "TELEGRAM_WEBHOOK_SECRET", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_API_URL", "TIDYBOT_DB",
		"TIDYBOT_HTTP_ADDR", "TIDYBOT_ALLOWED_USERS", "TIDYBOT_PROTOCOL", "TIDYBOT_MAX_STEPS", "TIDYBOT_MAX_TOKENS", "TIDYBOT_HISTORY",
		"TIDYBOT_TEMPERATURE", "TIDYBOT_RUN_TIMEOUT", "TIDYBOT_WORKERS", "TIDYBOT_CONFIRM", "TIDYBOT_RETENTION", "OPENAI_API", "TIDYBOT_REASONING_EFFORT", "OPENAI_REASONING_MODEL", "gpt-6-luna", "destructive"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("-h lacks %s", v)
		}
	}
	for _, f := range reflect.VisibleFields(reflect.TypeOf(Config{})) {
		if v := f.Tag.Get("envconfig"); !strings.Contains(out.String(), v) {
			t.Errorf("-h lacks %s", v)
		}
	}
	if !strings.Contains(out.String(), "tidybot health") {
		t.Error("-h lacks the health subcommand")
	}
}

// TestCrashMidRunResumesWithoutDuplicates builds the binary, kills it
// with SIGKILL while the model stalls right after a write, and restarts it
// on the same database with empty stdin: the run completes, and the fake
// Todoist shows no write applied twice and no duplicate project.
func TestCrashMidRunResumesWithoutDuplicates(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	e := newEnv(t)
	e.scen.check = true // a model call after the write, to crash in
	crashAndResume(t, e, "OPENAI_MODEL=scripted")
}

func TestServeHealth(t *testing.T) {
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	e.cfg.HTTPAddr = addr
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	m := &Main{Args: []string{"serve"}, Config: &e.cfg, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
	go func() { done <- m.Run(ctx) }()
	var body string
	for range 100 {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if body != "ok\n" {
		t.Fatalf("/healthz = %q", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve returned %v", err)
	}
	_ = m.Close()

	e.cfg.SlackBotToken, e.cfg.SlackAppToken = "xoxb-1", ""
	err = (&Main{Args: []string{"serve"}, Config: &e.cfg, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}).Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "neither SLACK_APP_TOKEN") {
		t.Errorf("serve with a Slack token and no way to receive events: %v", err)
	}
}

func TestChatUsage(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	out := e.chat(t, "/tidy-inbox\n/usage\n", nil)
	// The overview is read before the first call, which moves and answers.
	mustContain(t, out, "in 1 model call over 1 run.")
}
