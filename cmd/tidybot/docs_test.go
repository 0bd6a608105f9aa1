package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/tidybot/tidybot/internal/config"
)

// docPages are README.md and every page under docs/, relative to root.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no docs/*.md")
	}
	for i, p := range pages {
		pages[i], _ = filepath.Rel(root, p)
	}
	return append([]string{"README.md"}, pages...)
}

// TestDocsSettingsListsEverySetting: docs/settings.md has a row for every
// variable of the config type (a row may name two: "A, B").
func TestDocsSettingsListsEverySetting(t *testing.T) {
	page := readRepoFile(t, "docs/settings.md")
	for _, f := range reflect.VisibleFields(reflect.TypeOf(Config{})) {
		name := f.Tag.Get("envconfig")
		if !regexp.MustCompile(`(?m)^\| (?:[A-Z_]+, )*` + name + `(?:, [A-Z_]+)* \|`).MatchString(page) {
			t.Errorf("docs/settings.md lacks a row for %s", name)
		}
	}
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	mdFence   = regexp.MustCompile("(?ms)^```.*?^```")
	mdCode    = regexp.MustCompile("`([^`\n]+)`")
)

// anchor is the id GitHub gives a heading: lower case, punctuation
// dropped (hyphens and underscores kept), spaces turned to hyphens.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(page string) map[string]bool {
	ids := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(mdFence.ReplaceAllString(page, ""), -1) {
		id := anchor(m[1])
		for n := 1; ids[id]; n++ { // GitHub numbers repeated headings
			id = anchor(m[1]) + "-" + string(rune('0'+n))
		}
		ids[id] = true
	}
	return ids
}

// TestDocsLinksResolve: every relative link in README.md and docs/*.md
// names a file that exists, and a heading that exists in it.
func TestDocsLinksResolve(t *testing.T) {
	for _, page := range docPages(t) {
		text := mdFence.ReplaceAllString(readRepoFile(t, page), "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(filepath.Join(root, path)); err != nil {
					t.Errorf("%s: link %s: no file %s", page, target, path)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				t.Errorf("%s: link %s: a heading in a file that is not markdown", page, target)
				continue
			}
			if !anchors(readRepoFile(t, path))[frag] {
				t.Errorf("%s: link %s: %s has no heading #%s", page, target, path, frag)
			}
		}
	}
}

func TestAnchor(t *testing.T) {
	for in, want := range map[string]string{
		"Data kept": "data-kept",
		"The flow of a message: the bot (`bot`) and the store (`store`)": "the-flow-of-a-message-the-bot-bot-and-the-store-store",
		"What is stored, and how it is protected":                        "what-is-stored-and-how-it-is-protected",
		"1. Register an app":                          "1-register-an-app",
		"Against the talk's design (`cmd/tidybench`)": "against-the-talks-design-cmdtidybench",
	} {
		if got := anchor(in); got != want {
			t.Errorf("anchor(%q) = %q, want %q", in, got, want)
		}
	}
}

var docCommand = regexp.MustCompile(`^(?:\$ )?(?:tidybot|go run (?:-ldflags "[^"]*" )?\./cmd/tidybot)((?: [^#]*)?)(?:#.*)?$`)

// docInvocations are the tidybot command lines in README.md and
// docs/*.md, in fenced blocks and in `code` spans, as page: line →
// arguments.
func docInvocations(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, page := range docPages(t) {
		text := readRepoFile(t, page)
		var lines []string
		for _, block := range mdFence.FindAllString(text, -1) {
			lines = append(lines, strings.Split(block, "\n")...)
		}
		for _, span := range mdCode.FindAllStringSubmatch(mdFence.ReplaceAllString(text, ""), -1) {
			lines = append(lines, span[1])
		}
		{
			for _, line := range lines {
				line = strings.TrimSpace(line)
				m := docCommand.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				args := strings.Fields(m[1])
				if len(args) > 0 && strings.HasSuffix(args[0], ":") {
					continue // output, such as "tidybot eval: model …"
				}
				out[page+": "+line] = args
			}
		}
	}
	return out
}

// TestDocsCommandsRun: every tidybot command line in README.md or
// docs/*.md (fenced blocks and code spans) names a subcommand that answers -h with its
// usage, and its arguments are ones that subcommand takes (a synopsis
// with [optional] parts is checked at the -h level only). slack-manifest
// and version, which read no setting, run for real.
func TestDocsCommandsRun(t *testing.T) {
	inv := docInvocations(t)
	if len(inv) < 5 {
		t.Fatalf("found only %d tidybot command lines in the docs: %v", len(inv), inv)
	}
	for where, args := range inv {
		if len(args) == 0 {
			t.Errorf("%s: no subcommand", where)
			continue
		}
		cmd := args[0]
		if helpArg(args[:1]) {
			cmd = "help" // tidybot -h
		}
		var out bytes.Buffer
		if err := (&Main{Args: []string{cmd, "-h"}, Stdout: &out, Stderr: &out}).Run(t.Context()); err != nil || !strings.Contains(out.String(), "Usage:") {
			t.Errorf("%s: tidybot %s -h: %v\n%s", where, cmd, err, out.String())
			continue
		}
		if strings.ContainsAny(strings.Join(args, " "), "[]") {
			continue // a synopsis
		}
		if err := checkArgs(cmd, args[1:]); err != nil {
			t.Errorf("%s: %v", where, err)
		}
		if cmd == "slack-manifest" || cmd == "version" {
			out.Reset()
			if err := (&Main{Args: args, Stdout: &out}).Run(t.Context()); err != nil || out.Len() == 0 {
				t.Errorf("%s: %v", where, err)
			}
		}
	}
}

// TestOllamaExampleIsOneModel: the start-up error, the env example,
// README.md and docs/models.md suggest the same Ollama model.
func TestOllamaExampleIsOneModel(t *testing.T) {
	cfg := validConfig()
	cfg.OpenAIKey = ""
	if err := validate(cfg, false); err == nil || !strings.Contains(err.Error(), "OPENAI_MODEL="+config.OllamaExample+")") {
		t.Errorf("the no-model error does not suggest %s: %v", config.OllamaExample, err)
	}
	if !strings.Contains(readRepoFile(t, "deploy/tidybot.env.example"), "11434/v1\n#OPENAI_MODEL="+config.OllamaExample+"\n") {
		t.Errorf("tidybot.env.example's Ollama lines do not name %s", config.OllamaExample)
	}
	if !strings.Contains(readRepoFile(t, "README.md"), "OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL="+config.OllamaExample) {
		t.Errorf("README.md's Ollama line does not name %s", config.OllamaExample)
	}
	row := regexp.MustCompile(`(?m)^\| Ollama \|.*$`).FindString(readRepoFile(t, "docs/models.md"))
	if !strings.Contains(row, "`"+config.OllamaExample+"`") {
		t.Errorf("docs/models.md's Ollama row does not name %s: %s", config.OllamaExample, row)
	}
}
