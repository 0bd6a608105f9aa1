package slack_test

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
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
			deliver(t, h, srv.Events(tt.m))
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

// TestConnectButtonPressKeepsThePressersTeam: a block_actions payload
// names the workspace it is delivered to (team.id) and the presser's own
// team (user.team_id, docs.slack.dev/reference/interaction-payloads/block_actions-payload):
// a press by a member of another organisation gets their team.
func TestConnectButtonPressKeepsThePressersTeam(t *testing.T) {
	a, _ := newAdapter(t)
	rec := &recorder{}
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": "t2", "team": map[string]any{"id": "T1"},
		"user": map[string]any{"id": "U9", "team_id": "T9"}, "channel": map[string]any{"id": "C1"},
		"container": map[string]any{"type": "message", "message_ts": "5.5", "channel_id": "C1", "thread_ts": "2.2"},
		"actions":   []map[string]any{{"type": "button", "action_id": "choice_0", "block_id": "choices", "value": "w:abcd1234:y"}},
	})
	body := url.Values{"payload": {string(payload)}}.Encode()
	w := httptest.NewRecorder()
	a.InteractivityHandler(rec).ServeHTTP(w, signed(t, "/slack/interactivity", "application/x-www-form-urlencoded", []byte(body), secret, time.Now()))
	if w.Code != 200 {
		t.Fatalf("button: %d", w.Code)
	}
	if got := rec.got(); len(got) != 1 || got[0].TeamID != "T9" {
		t.Errorf("handled %+v, want the presser's team T9", got)
	}
}
