package bot

import "testing"

// TestEveryButtonHasAKind: the data of every button the bot posts
// reaches a handler of pressKinds, each by its own kind; other data
// reaches none.
func TestEveryButtonHasAKind(t *testing.T) {
	fb := withFeedback(Outgoing{}, &Run{ID: "r1"}).Buttons
	for _, tc := range []struct {
		data, prefix string
	}{
		{answerData("k1", "y"), answerPrefix},
		{undoButtonPrefix + "r1", undoButtonPrefix},
		{fb[0].Data, feedbackPrefix},
		{fb[1].Data, feedbackPrefix},
		{settingButton + "confirm:never", settingButton},
		{digestMove, "dg:"},
		{digestTidy, "dg:"},
		{digestSnooze, "dg:"},
		{stopAutopilotButton, "ap:"},
		{"x:1", ""},
		{"nocolon", ""},
		{"", ""},
	} {
		k := pressKindOf(tc.data)
		switch {
		case tc.prefix == "" && k != nil:
			t.Errorf("%q reaches the handler of %q, want none", tc.data, k.prefix)
		case tc.prefix != "" && (k == nil || k.prefix != tc.prefix):
			t.Errorf("%q reaches %v, want the handler of %q", tc.data, k, tc.prefix)
		}
	}
	seen := map[string]bool{}
	for _, k := range pressKinds {
		if seen[k.prefix] || k.prefix[len(k.prefix)-1] != ':' {
			t.Errorf("kind %q: each prefix once, ending in its colon", k.prefix)
		}
		seen[k.prefix] = true
	}
}
