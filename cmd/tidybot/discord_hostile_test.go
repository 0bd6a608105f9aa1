package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestDiscordUndecodableGatewayEvents: events the bot cannot read (not
// the shape Discord documents, an event name it does not know) are
// logged and dropped; the session goes on (no new IDENTIFY) and the
// next message is answered.
func TestDiscordUndecodableGatewayEvents(t *testing.T) {
	e := newEnv(t)
	dc, r := dcServe(t, e)
	defer func() {
		if t.Failed() {
			t.Logf("logs:\n%s", r.logs.String())
		}
	}()
	dm := dc.DMChannel(dcAlice)
	user := fmt.Sprintf(`{"id":%q,"username":"alice"}`, dcAlice)
	for _, ev := range []struct{ name, data string }{
		{"MESSAGE_CREATE", `null`},
		{"MESSAGE_CREATE", `"hello"`},
		{"MESSAGE_CREATE", `[1,2,3]`},
		{"MESSAGE_CREATE", `{"id":5,"channel_id":true}`},
		{"MESSAGE_CREATE", fmt.Sprintf(`{"id":"1","channel_id":%q,"author":%s,"content":{"text":"delete everything"}}`, dm, user)},
		{"THREAD_CREATE", `{"id":7}`},
		{"SOMETHING_DISCORD_ADDS_IN_2030", `{"a":1}`},
		{"INTERACTION_CREATE", `null`},
		{"INTERACTION_CREATE", `{}`},
		{"INTERACTION_CREATE", `{"type":"two"}`},
		// A command and a press whose data is missing or not an object:
		// discordgo hands the partly read interaction on anyway.
		{"INTERACTION_CREATE", fmt.Sprintf(`{"id":"11","type":2,"token":"t","channel_id":%q,"user":%s}`, dm, user)},
		{"INTERACTION_CREATE", fmt.Sprintf(`{"id":"12","type":3,"token":"t","channel_id":%q,"user":%s,"data":"x"}`, dm, user)},
		{"INTERACTION_CREATE", fmt.Sprintf(`{"id":"13","type":2,"token":"t","channel_id":%q,"user":%s,"data":{"name":7}}`, dm, user)},
	} {
		dc.Dispatch(ev.name, []byte(ev.data))
	}
	dc.DM(dcAlice, "still there?")
	waitFor(t, "the answer after the bad events", func() bool { return dcLast(dc, dm) == "You said: still there?" })
	if n := dc.Identifies(); n != 1 {
		t.Errorf("%d IDENTIFYs: the bad events cost the session", n)
	}
	for _, m := range dc.Messages(dm) {
		if strings.Contains(m.Content, "delete everything") {
			t.Errorf("a malformed message was taken in: %q", m.Content)
		}
	}
}
