package slack

import (
	"strings"
	"testing"
)

func FuzzStripMention(f *testing.F) {
	for _, s := range []string{"<@UBOT> hi", "hi <@UBOT|tidybot>, what's due?", "<@UBOT2> not us", "<@UBOT", "a\n<@UBOT>\nb", "<@UBOT><@UBOT>", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got, found := stripMention(text, "UBOT")
		if strings.Contains(got, "<@UBOT>") {
			t.Errorf("stripMention(%q) = %q: a mention is left", text, got)
		}
		if !strings.Contains(text, "<@UBOT|") && found != strings.Contains(text, "<@UBOT>") {
			t.Errorf("stripMention(%q) found = %v", text, found)
		}
	})
}

func TestStripMention(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		found    bool
	}{
		{"<@UBOT> move the cake", "move the cake", true},
		{"hi <@UBOT|tidybot>, what's due?", "hi, what's due?", true},
		{"line one\n<@UBOT> line two", "line one\nline two", true},
		{"ask <@UBOT2> instead", "ask <@UBOT2> instead", false},
		{"no mention", "no mention", false},
	} {
		got, found := stripMention(tt.in, "UBOT")
		if got != tt.want || found != tt.found {
			t.Errorf("stripMention(%q) = %q, %v; want %q, %v", tt.in, got, found, tt.want, tt.found)
		}
	}
}
