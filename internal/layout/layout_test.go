// Package layout holds a test of the import rules of DESIGN.md §1.
package layout

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/tidybot/tidybot"

// allowed lists, per package, the packages of ours it may import.
var allowed = map[string][]string{
	"agent":                          {},
	"agent/todoist":                  {"agent", "internal/retry"},
	"agent/openai":                   {"agent", "internal/retry"},
	"internal/retry":                 {"agent"},
	"bot":                            {"agent", "bot/outbound", "media"},
	"bot/outbound":                   {},
	"media":                          {},
	"store":                          {"bot", "agent", "store/seal"},
	"store/seal":                     {},
	"store/storetest":                {"bot", "agent"},
	"store/postgres":                 {"bot", "agent", "store/seal"},
	"store/postgres/pgtest":          {},
	"adapters/console":               {"bot", "agent"},
	"adapters/discord":               {"bot", "agent", "internal/hooks", "internal/retry"},
	"adapters/slack":                 {"bot", "agent", "internal/hooks", "internal/retry"},
	"adapters/slack/slacktest":       {},
	"adapters/telegram":              {"bot", "agent", "internal/retry"},
	"adapters/telegram/telegramtest": {},
	"internal/sim":                   {"agent", "agent/openai/openaitest", "internal/eval"},
	"internal/eval":                  {"agent", "agent/todoist", "agent/todoist/todoisttest", "bot"},
	"agent/todoist/todoisttest":      {"agent", "internal/directhttp"},
	"agent/openai/openaitest":        {"agent", "internal/directhttp"},
	"internal/directhttp":            {},
	// The memory Hooks of a process without a shared store (Slack's
	// response_urls, Discord's interaction tokens).
	"internal/hooks":               {},
	"adapters/discord/discordtest": {},
	"inspector":                    {"bot", "agent"},
	// Team mode: the Connect flow on the Todoist OAuth client, and its
	// crypto (the standard library's); no adapter, no store.
	"accounts": {"bot", "agent", "agent/todoist"},
	// serve's HTTP surface (net/http, Prometheus): no adapter, no store;
	// cmd/tidybot adds the adapters' and accounts' routes to its mux.
	"web": {"bot", "agent"},
	// The settings table, its validation and -h listing; the platforms it
	// checks the allowlist against come from cmd/tidybot.
	"internal/config": {"agent", "agent/openai"},
	// tidybot check's per-part logic: it asks each configured service
	// through our clients and reads the database read-only.
	// tidybot eval: its flags and a run of the suite, real or simulated.
	"internal/evalcmd": {"agent", "bot", "internal/config", "internal/eval", "internal/sim"},
	// tidybot migrate: its arguments and the copy of a bbolt file.
	"internal/migratecmd": {"bot", "store", "store/postgres"},
	"internal/checkup":    {"accounts", "adapters/discord", "adapters/slack", "adapters/telegram", "agent", "agent/openai", "agent/todoist", "internal/config", "store", "store/postgres"},
}

// TestImportDirection checks that no package imports one of ours it
// should not (tests excluded: they may wire fakes).
func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if strings.HasPrefix(rel, "cmd/") || rel == "internal/layout" {
			continue // cmd wires everything
		}
		ok, known := allowed[rel]
		if !known {
			t.Errorf("package %s has no import rule here", rel)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			if !contains(ok, dep) {
				t.Errorf("%s imports %s", rel, dep)
			}
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
