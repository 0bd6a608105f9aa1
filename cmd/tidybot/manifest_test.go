package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/adapters/telegram"
)

// TestSlackManifestsAreGenerated: the manifests in deploy/ are what
// `tidybot slack-manifest` prints, so they list the commands, scopes and
// events the code uses and never drift from it.
func TestSlackManifestsAreGenerated(t *testing.T) {
	for _, tt := range []struct {
		file string
		args []string
	}{
		{"deploy/slack-manifest.yaml", []string{"slack-manifest"}},
		{"deploy/slack-manifest-http.yaml", []string{"slack-manifest", "--http", "https://tidybot.example.com"}},
	} {
		var out bytes.Buffer
		if err := (&Main{Args: tt.args, Stdout: &out}).Run(t.Context()); err != nil {
			t.Fatalf("tidybot %s: %v", strings.Join(tt.args, " "), err)
		}
		if got := readRepoFile(t, tt.file); got != out.String() {
			t.Errorf("%s is not the output of tidybot %s: regenerate it with\n  go run ./cmd/tidybot %s > %s",
				tt.file, strings.Join(tt.args, " "), strings.Join(tt.args, " "), tt.file)
		}
	}
}

// TestSlackManifestRefusesABadAddress: --http takes an https address;
// anything else is said at once, with nothing printed.
func TestSlackManifestRefusesABadAddress(t *testing.T) {
	for _, args := range [][]string{{"--http", "http://tidybot.example.com"}, {"--http", "tidybot.example.com"}, {"extra"}, {"--bogus"}} {
		var out bytes.Buffer
		err := (&Main{Args: append([]string{"slack-manifest"}, args...), Stdout: &out}).Run(t.Context())
		if err == nil || out.Len() != 0 {
			t.Errorf("slack-manifest %v: %v, printed %q", args, err, out.String())
		}
	}
}

// updateTelegramCommands rewrites deploy/telegram-commands.txt from the
// bot's commands.
var updateTelegramCommands = flag.Bool("update-telegram-commands", false, "rewrite deploy/telegram-commands.txt")

// TestTelegramCommandsAreGenerated: the list deploy/telegram-commands.txt
// gives BotFather (/setcommands) is the one the adapter registers with
// setMyCommands in personal mode, made from the bot's commands.
func TestTelegramCommandsAreGenerated(t *testing.T) {
	const file = "deploy/telegram-commands.txt"
	want := telegram.BotFatherList(false)
	if *updateTelegramCommands {
		if err := os.WriteFile(filepath.Join(root, file), []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := readRepoFile(t, file); got != want {
		t.Errorf("%s is not the bot's command list; regenerate it with\n  go test ./cmd/tidybot -run TestTelegramCommandsAreGenerated -update-telegram-commands\ngot:\n%s\nwant:\n%s", file, got, want)
	}
}
