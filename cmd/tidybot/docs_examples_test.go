package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/adapters/slack"
)

// TestDocsCheckScopesCount: deploy.md's sample of tidybot check says
// as many scopes as the app needs (slack.BotScopes, what check counts).
func TestDocsCheckScopesCount(t *testing.T) {
	m := regexp.MustCompile(`all (\d+) scopes granted`).FindStringSubmatch(readRepoFile(t, "docs/deploy.md"))
	if m == nil {
		t.Fatal(`docs/deploy.md has no "all N scopes granted"`)
	}
	if got, want := m[1], strconv.Itoa(len(slack.BotScopes())); got != want {
		t.Errorf("docs/deploy.md: all %s scopes granted, want %s (slack.BotScopes)", got, want)
	}
}

// TestDocsRunIDsLookReal: the run ids in the docs' tidybot runs examples
// have the shape of an id tidybot runs lists.
func TestDocsRunIDsLookReal(t *testing.T) {
	e := newEnv(t)
	e.chat(t, "what's due today?\n", nil)
	list := runsCmd(t, e)
	real := strings.Fields(strings.Split(list, "\n")[1])[0]
	shape := regexp.MustCompile(`^[0-9a-f]{` + strconv.Itoa(len(real)) + `}$`)
	if !shape.MatchString(real) {
		t.Fatalf("tidybot runs lists id %q, not lowercase hexadecimal: update this test and the docs", real)
	}
	examples := 0
	for _, page := range docPages(t) {
		for _, m := range regexp.MustCompile("tidybot runs (?:show|link) ([^\\s`]+)").FindAllStringSubmatch(readRepoFile(t, page), -1) {
			if m[1] == "ID" {
				continue
			}
			examples++
			if !shape.MatchString(m[1]) {
				t.Errorf("%s: run id %q does not look like %q, a real one", page, m[1], real)
			}
		}
	}
	if examples == 0 {
		t.Error("no run id in the docs' examples")
	}
}
