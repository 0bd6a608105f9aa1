package discordtest

import (
	"slices"
	"testing"
)

// A message's text notifies what it mentions, unless allowed_mentions
// says otherwise (pingsOf).
func TestPingsFollowAllowedMentions(t *testing.T) {
	text := "hi @everyone, <@!12> and <@&34>"
	if got := pingsOf(text, nil); !slices.Equal(got, []string{"@everyone", "<@12>", "<@&34>"}) {
		t.Errorf("without allowed_mentions: %v", got)
	}
	if got := pingsOf(text, &allowedMentions{Parse: []string{}}); len(got) != 0 {
		t.Errorf("parse []: %v", got)
	}
	if got := pingsOf(text, &allowedMentions{Users: []string{"12"}}); !slices.Equal(got, []string{"<@12>"}) {
		t.Errorf("users [12]: %v", got)
	}
}
