package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// crashAndResume builds the binary, runs /tidy-inbox in it with extra on
// top of e's settings, kills it with SIGKILL while the model stalls right
// after a write, and restarts it on the same database with empty stdin:
// the run must complete with no write applied twice and no duplicate
// project. It returns the model requests that reached the script before
// the kill and after the restart.
func crashAndResume(t *testing.T, e *env, extra ...string) (before, after []openaitest.Request) {
	t.Helper()
	e.todo.SeedTalkInbox()
	// The model stalls (for an hour, or until the client is gone) on the
	// first request made after the write.
	stalled := make(chan struct{})
	var (
		mu       sync.Mutex
		recorded []openaitest.Request // what reached the script, in order
	)
	var once sync.Once
	e.model.Close()
	e.model = openaitest.New(func(req openaitest.Request) openaitest.Reply {
		mu.Lock()
		recorded = append(recorded, req)
		mu.Unlock()
		stall := false
		if wrote(openaitest.AgentRequest(req)) {
			once.Do(func() { stall = true; close(stalled) })
		}
		if stall {
			return openaitest.Text("…").After(time.Hour)
		}
		return openaitest.FromAgent(e.scen.reply)(req)
	})
	t.Cleanup(e.model.Close)
	bin := tidybotBinary(t)
	environ := append(os.Environ(),
		"OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL="+e.model.URL,
		"TODOIST_TOKEN="+e.todo.Token, "TODOIST_API_URL="+e.todo.URL, "TIDYBOT_DB="+e.cfg.DB)
	environ = append(environ, extra...)

	first := exec.Command(bin, "chat")
	first.Env = environ
	first.Stdin = strings.NewReader("/tidy-inbox\n")
	var out1 bytes.Buffer
	first.Stdout, first.Stderr = &out1, &out1
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stalled:
	case <-time.After(20 * time.Second):
		_ = first.Process.Kill()
		_ = first.Wait()
		t.Fatalf("the model never stalled after the write; output:\n%s", out1.String())
	}
	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()
	if n := len(e.todo.TasksIn(e.todo.InboxID())); n != 0 {
		t.Fatalf("inbox has %d tasks at the kill: the write was not applied", n)
	}
	applied := e.todo.AppliedCommands()
	mu.Lock()
	n := len(recorded)
	mu.Unlock()

	second := exec.Command(bin, "chat")
	second.Env = environ
	second.Stdin = strings.NewReader("")
	out2, err := second.CombinedOutput()
	if err != nil {
		t.Fatalf("restart: %v\n%s", err, out2)
	}
	if !strings.Contains(string(out2), "Moved ") {
		t.Errorf("the resumed run did not finish:\n%s", out2)
	}
	if got := e.todo.AppliedCommands(); got != applied {
		t.Errorf("applied commands %d after restart, %d before: a write was applied twice", got, applied)
	}
	names := map[string]int{}
	for _, p := range e.todo.Projects() {
		names[p.Name]++
	}
	for n, c := range names {
		if c > 1 {
			t.Errorf("project %q exists %d times", n, c)
		}
	}
	if len(names) != 4 {
		t.Errorf("projects: %v", names)
	}
	mu.Lock()
	defer mu.Unlock()
	return recorded[:n], recorded[n:]
}

// TestCrashMidRunResumesOnPostgres: as TestCrashMidRunResumesWithoutDuplicates,
// on PostgreSQL, several times: the restarted chat leases the
// conversation the killed one left (trying again for a moment while the
// killed one's session may outlive it) and queues its work before it
// reads its empty stdin and waits for idleness, so that it resumes the
// run rather than exiting at once. (Issue 35: about 1 restart in 5
// left the run alone.)
func TestCrashMidRunResumesOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	for i := range 5 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			e := newEnv(t)
			e.scen.check = true
			crashAndResume(t, e, "OPENAI_MODEL=scripted", "TIDYBOT_DATABASE_URL="+pgtest.URL(t))
		})
	}
}
