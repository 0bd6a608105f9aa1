// Command tidydemo shows a whole /tidy-inbox with no account: tidybot's
// terminal chat against the fake Todoist seeded with the talk's inbox and
// a scripted model. It is a SIMULATION: no real model, no real Todoist.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
	"github.com/tidybot/tidybot/internal/sim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tidydemo:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	todo := todoisttest.New(nil, todoisttest.WithLatency(80*time.Millisecond))
	defer todo.Close()
	todo.SeedTalkInbox()
	mdl, err := sim.StartModel((&sim.Tidier{Groups: sim.TalkGroups}).Reply, 400*time.Millisecond)
	if err != nil {
		return err
	}
	defer mdl.Close()

	dir, err := os.MkdirTemp("", "tidydemo")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "tidybot")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/tidybot").CombinedOutput(); err != nil {
		return fmt.Errorf("build tidybot: %v\n%s", err, out)
	}

	banner := strings.Repeat("=", 72)
	fmt.Printf("%s\nSIMULATION: a fake Todoist seeded with the talk's inbox and a scripted\nmodel (no account, no real model). The bot below is the real tidybot.\n%s\n\n", banner, banner)
	printInbox(os.Stdout, todo, "Before")
	fmt.Println("\n> /tidy-inbox")

	cmd := exec.CommandContext(ctx, bin, "chat")
	cmd.Env = append(os.Environ(),
		"TODOIST_TOKEN="+todo.Token, "TODOIST_API_URL="+todo.URL,
		"OPENAI_API_KEY=sk-simulated", "OPENAI_BASE_URL="+mdl.URL, "OPENAI_MODEL=simulated",
		"TIDYBOT_DB="+filepath.Join(dir, "demo.db"))
	cmd.Stdin = strings.NewReader("/tidy-inbox\n")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("tidybot chat: %w", err)
	}
	fmt.Println()
	printInbox(os.Stdout, todo, "After")
	fmt.Printf("\nNow try it for real: export TODOIST_TOKEN and OPENAI_API_KEY, then make run.\n")
	return nil
}

// printInbox shows the fake account's projects and tasks.
func printInbox(w io.Writer, todo *todoisttest.Server, title string) {
	names := map[string]string{}
	for _, p := range todo.Projects() {
		names[p.ID] = p.Name
	}
	by := map[string][]string{}
	for _, t := range todo.Tasks() {
		by[names[t.ProjectID]] = append(by[names[t.ProjectID]], t.Content)
	}
	var projects []string
	for p := range by {
		projects = append(projects, p)
	}
	sort.Strings(projects)
	fmt.Fprintf(w, "%s (the fake Todoist):\n", title)
	for _, p := range projects {
		fmt.Fprintf(w, "  %s\n", p)
		for _, t := range by[p] {
			fmt.Fprintf(w, "    - %s\n", t)
		}
	}
}
