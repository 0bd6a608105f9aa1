package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode"
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
