package slack_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
)

// TestConnectMembersKeepTheirOwnTeam: in a Slack Connect channel the
// envelope names the workspace the event is delivered to (T1) for every
// message, while the sender's own team is in the event (user_team): a
// member of the other organisation (T9) gets Incoming.TeamID T9, so the
// host workspace's slack:team:T1 entry does not admit them; a host
// member, whose event names T1 or no team, gets T1.
func TestConnectMembersKeepTheirOwnTeam(t *testing.T) {
	a, srv := newAdapter(t)
	for _, tt := range []struct {
		name string
		m    slacktest.Message
		want string
	}{
		{"a host member's mention", slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U1", Text: slacktest.Mention + " what's due?", TS: "1.1"}, "T1"},
		{"an external member's mention", slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U9", Team: "T9", Text: slacktest.Mention + " what's due?", TS: "1.2"}, "T9"},
		{"an external member's DM", slacktest.Message{Channel: "D9", ChannelType: "im", User: "U9", Team: "T9", Text: "what's due?", TS: "1.3"}, "T9"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			h := a.EventsHandler(rec)
			for _, ev := range srv.Events(tt.m) {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, signed(t, "/slack/events", "application/json", ev, secret, time.Now()))
				if w.Code != 200 {
					t.Fatalf("status %d", w.Code)
				}
			}
			got := rec.got()
			if len(got) == 0 {
				t.Fatal("nothing handled")
			}
			for _, in := range got {
				if in.TeamID != tt.want {
					t.Errorf("%s: TeamID %q, want the sender's team %q", in.EventID, in.TeamID, tt.want)
				}
			}
		})
	}
}
