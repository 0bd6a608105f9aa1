package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestEverySubcommandAnswersHelp: `tidybot CMD -h` (and --help) prints
// CMD's usage and succeeds before any setting is read, so a missing or
// bad setting does not hide it, and health does not run its check.
func TestEverySubcommandAnswersHelp(t *testing.T) {
	// Settings chat and serve would refuse, and a health check that
	// would fail: none of them may be looked at.
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("TIDYBOT_MAX_STEPS", "many")
	t.Setenv("TIDYBOT_HTTP_ADDR", "127.0.0.1:1")
	for cmd := range subcommands {
		for _, h := range []string{"-h", "--help"} {
			var out, errOut bytes.Buffer
			err := (&Main{Args: []string{cmd, h}, Stdout: &out, Stderr: &errOut}).Run(t.Context())
			if err != nil {
				t.Errorf("tidybot %s %s: %v", cmd, h, err)
				continue
			}
			if !strings.HasPrefix(out.String(), "Usage:") || !strings.Contains(out.String(), "tidybot "+cmd) {
				t.Errorf("tidybot %s %s printed no usage of %s:\n%s", cmd, h, cmd, out.String())
			}
		}
	}
	for _, args := range [][]string{{"help", "serve"}, {"runs", "help"}} {
		var out bytes.Buffer
		if err := (&Main{Args: args, Stdout: &out}).Run(t.Context()); err != nil || !strings.HasPrefix(out.String(), "Usage:") {
			t.Errorf("tidybot %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
	}
	for _, want := range []string{"chat", "serve", "health", "eval", "runs", "version"} {
		if _, ok := subcommands[want]; !ok {
			t.Errorf("no usage for %s", want)
		}
	}
}

// TestVersion: `tidybot version` and `tidybot --version` print it.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version"} {
		var out bytes.Buffer
		if err := (&Main{Args: []string{arg}, Stdout: &out}).Run(t.Context()); err != nil || out.String() != "tidybot "+version+"\n" {
			t.Errorf("tidybot %s: %v %q", arg, err, out.String())
		}
	}
}

// TestExtraArgumentRefused: a wrong argument is said at once, before
// any setting is read (here a bad one), not ignored.
func TestExtraArgumentRefused(t *testing.T) {
	t.Setenv("TIDYBOT_MAX_STEPS", "many")
	for _, args := range [][]string{{"chat", "now"}, {"serve", "now"}, {"health", "now"}, {"eval", "now"}, {"eval", "-bogus"}, {"runs", "now"}, {"runs", "-n", "x"}} {
		err := (&Main{Args: args, Stdout: &bytes.Buffer{}}).Run(t.Context())
		if err == nil || strings.Contains(err.Error(), "TIDYBOT_MAX_STEPS") || !strings.Contains(err.Error(), args[0]+":") {
			t.Errorf("tidybot %s: %v", strings.Join(args, " "), err)
		}
	}
}

// TestChatGreetsATerminalOnly: in a terminal chat starts with one line
// saying who you talk to, /help and Ctrl-D; from a pipe it says nothing
// of the kind, so scripts read only answers.
func TestChatGreetsATerminalOnly(t *testing.T) {
	e := newEnv(t)
	for _, interactive := range []bool{true, false} {
		var out, errOut bytes.Buffer
		m := &Main{Args: []string{"chat"}, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Config: &e.cfg, Interactive: interactive}
		err := m.Run(t.Context())
		if cerr := m.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("chat: %v\n%s", err, errOut.String())
		}
		first, _, _ := strings.Cut(out.String(), "\n")
		greets := strings.Contains(first, "scripted") && strings.Contains(first, "/help") && strings.Contains(first, "Ctrl-D")
		if interactive && !greets {
			t.Errorf("a terminal chat starts with %q, want a greeting naming the model, /help and Ctrl-D", first)
		}
		if !interactive && out.Len() != 0 {
			t.Errorf("a piped chat with no input printed %q", out.String())
		}
	}
}

// TestTopLevelHelpNamesEveryForm: each form a subcommand's own usage
// lists (tidybot runs link ID, tidybot eval -from-feedback) is named by
// tidybot -h too, so a newcomer finds it without guessing.
func TestTopLevelHelpNamesEveryForm(t *testing.T) {
	var top bytes.Buffer
	if err := (&Main{Args: []string{"-h"}, Stdout: &top}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Each subcommand's lines of tidybot -h: from "  tidybot CMD" to the next.
	entries := map[string]string{}
	cmd := ""
	for _, line := range strings.Split(strings.Split(top.String(), "\nSettings")[0], "\n") {
		if rest, ok := strings.CutPrefix(line, "  tidybot "); ok {
			cmd = strings.Fields(rest)[0]
		}
		entries[cmd] += line + "\n"
	}
	forms := 0
	for cmd, usage := range subcommands {
		var out bytes.Buffer
		if err := usage(&out); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out.String(), "\n") {
			_, rest, ok := strings.Cut(line, "tidybot "+cmd+" ")
			if !ok || rest == "" || strings.HasPrefix(rest, "[") || strings.HasPrefix(rest, "(") {
				continue
			}
			word := strings.Fields(rest)[0]
			forms++
			if !strings.Contains(entries[cmd], word) {
				t.Errorf("tidybot -h does not name %q of tidybot %s:\n%s", word, cmd, entries[cmd])
			}
		}
	}
	if forms < 3 { // runs show, runs link, eval -from-feedback
		t.Errorf("found %d forms in the subcommands' usages, want at least 3", forms)
	}
}
