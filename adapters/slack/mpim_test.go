package slack_test

import (
	"os"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
)

// manifestList returns the items of the YAML list under key (such as
// "bot_events:") in deploy/slack-manifest.yaml.
func manifestList(t *testing.T, key string) []string {
	t.Helper()
	raw, err := os.ReadFile("../../deploy/slack-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == key:
			in = true
		case in && strings.HasPrefix(trimmed, "- "):
			out = append(out, strings.TrimPrefix(trimmed, "- "))
		case in:
			in = false
		}
	}
	return out
}

// TestGroupDMsAreSharedChats: a group DM (mpim) with the bot is a shared
// chat, as a channel is: a mention starts the person's own conversation
// in the message's thread, and a reply in that thread reaches the bot
// without a mention, which takes the message.mpim subscription (and its
// mpim:history scope) in the manifest; chatter does not.
func TestGroupDMsAreSharedChats(t *testing.T) {
	events, scopes := manifestList(t, "bot_events:"), manifestList(t, "bot:")
	for _, e := range events {
		if sc := slacktest.EventScopes[e]; sc != "" && !strings.Contains(strings.Join(scopes, " "), sc) {
			t.Errorf("the manifest subscribes to %s without its scope %s", e, sc)
		}
	}
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	srv.Subscribe(events...)
	a, err := slack.New(t.Context(), slack.Config{BotToken: slacktest.Token, SigningSecret: secret, APIURL: srv.URL,
		Threads: threads{known: map[string]bool{"slack:G1:5.0": true}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		m    slacktest.Message
		want string // the thread of the conversation; "" for not handled
	}{
		{"chatter", slacktest.Message{Channel: "G1", ChannelType: "mpim", User: "U1", Text: "see you", TS: "1.1"}, ""},
		{"a mention", slacktest.Message{Channel: "G1", ChannelType: "mpim", User: "U1", Text: slacktest.Mention + " what's due today?", TS: "2.1"}, "2.1"},
		{"a reply in the bot's thread", slacktest.Message{Channel: "G1", ChannelType: "mpim", User: "U2", Text: "and tomorrow?", TS: "5.2", ThreadTS: "5.0"}, "5.0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &dedupe{}
			h := a.EventsHandler(rec)
			deliver(t, h, srv.Events(tt.m))
			got := rec.got()
			switch {
			case tt.want == "" && len(got) > 0:
				t.Errorf("handled %+v", got)
			case tt.want != "" && (len(got) != 1 || got[0].DM || got[0].ThreadID != tt.want || got[0].UserID != tt.m.User):
				t.Errorf("handled %+v, want one shared-chat message of %s in thread %s", got, tt.m.User, tt.want)
			}
		})
	}
}
