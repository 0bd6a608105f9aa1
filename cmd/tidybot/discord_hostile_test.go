package main

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/discord/discordtest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// TestDiscordUndecodableGatewayEvents: events the bot cannot read (not
// the shape Discord documents, an event name it does not know) are
// logged and dropped; the session goes on (no new IDENTIFY) and the
// next message is answered.
func TestDiscordUndecodableGatewayEvents(t *testing.T) {
	e := newEnv(t)
	dc, _ := dcServe(t, e)
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

// TestDiscordStrangerIsToldTheirID: someone not in TIDYBOT_ALLOWED_USERS
// who writes to the bot is told their id, once; their press on another
// person's buttons is refused to them alone and changes nothing.
func TestDiscordStrangerIsToldTheirID(t *testing.T) {
	e := newEnv(t)
	dc, _ := dcServe(t, e)
	dm, _ := dc.DM(dcStranger, "hi")
	waitFor(t, "the refusal", func() bool { return strings.Contains(dcLast(dc, dm), "discord:"+dcStranger) })
	if !strings.Contains(dcLast(dc, dm), "TIDYBOT_ALLOWED_USERS") {
		t.Errorf("the refusal %q does not say what to do", dcLast(dc, dm))
	}

	mention := "<@" + dc.BotID() + "> "
	e.todo.AddTask(todoisttest.Task{Content: "Buy cake for the office"})
	ask := dc.Say(dcGuild, dcChannel, dcAlice, mention+"delete the cake task")
	q := dcWaitButton(t, dc, ask, "Delete 1 task")
	id := dc.Press(dcStranger, ask, q.ID, dcButton(q, "Delete 1 task"))
	dcWantRefused(t, dc, id, "not allowed")
	if st := dc.Interaction(id); st.Callback == 0 || len(st.Refused) != 0 {
		t.Errorf("the stranger's press %+v: want answered once", st)
	}
	if n := len(e.todo.Tasks()); n != 1 {
		t.Errorf("the stranger's press changed the account: %d tasks", n)
	}
	if m := dc.Messages(ask); dcButton(m[len(m)-1], "Delete 1 task") == "" {
		t.Errorf("the stranger's press took the buttons away: %+v", m[len(m)-1])
	}
}

// TestDiscordStrangerSlashCommandIsAnswered: a slash command is
// deferred at once ("tidybot is thinking…"); whatever the bot makes of
// it, the deferred response must become an answer, or the person
// watches "thinking…" until Discord gives up. A stranger already told
// their id today, using a slash command, is such a case.
func TestDiscordStrangerSlashCommandIsAnswered(t *testing.T) {
	e := newEnv(t)
	dc, _ := dcServe(t, e)
	dm, _ := dc.DM(dcStranger, "hi")
	waitFor(t, "the refusal", func() bool { return strings.Contains(dcLast(dc, dm), "discord:"+dcStranger) })
	id := dc.Command(dcStranger, "", "", "help", nil)
	waitFor(t, "the command's answer", func() bool {
		st := dc.Interaction(id)
		return st.Original != nil && st.Original.Content != "" || len(st.Followups) > 0
	})
}

// TestDiscordInteractionsEndpoint: with DISCORD_PUBLIC_KEY set, POST
// /discord/interactions answers Discord's PING, refuses a request whose
// Ed25519 signature does not verify with 401 (touching nothing), and
// answers a signed slash command within Discord's 3 s.
func TestDiscordInteractionsEndpoint(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	dc := dcFake(t, e)
	e.cfg.DiscordPublicKey = hex.EncodeToString(dc.PublicKey())
	r := dcStart(t, e, dc)
	endpoint := r.base + "/discord/interactions"
	if ok, err := dc.Ping(endpoint); err != nil || !ok {
		t.Fatalf("PING: %v %v, want PONG", ok, err)
	}
	dm := dc.DMChannel(dcAlice)
	body := fmt.Sprintf(`{"id":"1","application_id":%q,"type":2,"token":"forged","version":1,"channel_id":%q,"user":{"id":%q,"username":"alice"},"data":{"id":"2","name":"tidy-inbox","type":1}}`,
		dc.AppID(), dm, dcAlice)
	if code, err := dc.PostForged(endpoint, []byte(body)); err != nil || code != http.StatusUnauthorized {
		t.Errorf("forged: %d %v, want 401", code, err)
	}
	for _, h := range []map[string]string{
		{},
		{"X-Signature-Ed25519": "zz", "X-Signature-Timestamp": "1"},
		{"X-Signature-Ed25519": strings.Repeat("00", 64), "X-Signature-Timestamp": "1"},
		{"X-Signature-Ed25519": dc.Sign("1", []byte(body)), "X-Signature-Timestamp": "2"},
	} {
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("headers %v: %d, want 401", h, resp.StatusCode)
		}
	}
	// Signed, but no interaction.
	resp, err := dc.PostInteraction(endpoint, []byte(`{"hello":"world"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a signed body that is no interaction: %d, want 400", resp.StatusCode)
	}
	if n := len(e.layout()["Inbox"]); n != 9 || len(dc.Messages(dm)) != 0 {
		t.Errorf("a refused request ran: inbox %d, messages %+v", n, dc.Messages(dm))
	}

	// The real thing, signed: deferred in the HTTP response, then the
	// run's messages.
	dc.SetInteractionsEndpoint(endpoint)
	id := dc.Command(dcAlice, "", "", "tidy-inbox", nil)
	waitFor(t, "the tidy's answer", func() bool { return dcCount(dc, dm, "Moved 9 tasks: ") == 1 })
	if st := dc.Interaction(id); st.Callback != 5 || len(st.Refused) != 0 {
		t.Errorf("interaction %+v: want one deferred response", st)
	}
	if n := len(e.layout()["Inbox"]); n != 0 {
		t.Errorf("inbox after the tidy: %d", n)
	}
}

// TestDiscordRateLimitOnOneChannelDoesNotStallAnother: Discord limits
// each route per channel (its bucket); a 429 with a long Retry-After on
// Alice's DM holds her answer, not Bob's.
func TestDiscordRateLimitOnOneChannelDoesNotStallAnother(t *testing.T) {
	e := newEnv(t)
	dc, _ := dcServe(t, e)
	alice, bob := dc.DMChannel(dcAlice), dc.DMChannel(dcBob)
	dc.SetRetryAfter(5 * time.Second)
	dc.RateLimit("POST /channels/"+alice+"/messages", 1)
	dc.DM(dcAlice, "hello from Alice")
	waitFor(t, "the 429", func() bool { return dc.Limited() >= 1 })
	dc.DM(dcBob, "hello from Bob")
	waitFor(t, "Bob's answer", func() bool { return dcLast(dc, bob) == "You said: hello from Bob" })
	if n := dcCount(dc, alice, "You said: hello from Alice"); n != 0 {
		t.Errorf("Alice's answer was posted within its Retry-After")
	}
	waitFor(t, "Alice's answer", func() bool { return dcLast(dc, alice) == "You said: hello from Alice" })
	if n := dcCount(dc, alice, "You said: hello from Alice"); n != 1 {
		t.Errorf("Alice's answer was posted %d times", n)
	}
}

// TestDiscordServerErrorsOnPost: Discord answers posts in a channel with
// 5xx for a while (a 502 discordgo retries itself, then 500s); the
// answer is posted once they pass, once (each try carries the same
// nonce), and another person's answer goes out as usual.
func TestDiscordServerErrorsOnPost(t *testing.T) {
	e := newEnv(t)
	dc, _ := dcServe(t, e)
	alice, bob := dc.DMChannel(dcAlice), dc.DMChannel(dcBob)
	dc.Fail("POST /channels/"+alice+"/messages", http.StatusBadGateway, 2)
	dc.Fail("POST /channels/"+alice+"/messages", http.StatusInternalServerError, 2)
	dc.DM(dcAlice, "hello from Alice")
	dc.DM(dcBob, "hello from Bob")
	waitFor(t, "both answers", func() bool {
		return dcLast(dc, alice) == "You said: hello from Alice" && dcLast(dc, bob) == "You said: hello from Bob"
	})
	if n := dcCount(dc, alice, "You said: hello from Alice"); n != 1 {
		t.Errorf("Alice's answer was posted %d times", n)
	}
	if n := dc.Requests("POST /channels/{id}/messages"); n < 6 {
		t.Errorf("%d posts: the failures were not met", n)
	}
}

// dcRelay stands between Discord and tidybot's interactions endpoint
// and hands tidybot's HTTP response back to Discord after a delay, as
// the network between them may: the bot's calls that follow its answer
// (follow-ups, edits of @original) may then reach Discord before the
// answer does.
func dcRelay(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, target, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		time.Sleep(delay)
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestDiscordButtonsThroughTheInteractionsEndpoint: with interactions
// posted to POST /discord/interactions, a press is answered in the HTTP
// response (a deferred update), the wrong person's press gets its
// ephemeral refusal as a follow-up, and the right person's yes deletes;
// a slash command is deferred there and then answered. Discord may read
// the HTTP answer a moment after the bot wrote it (here 300 ms later):
// what the bot sends after it must still arrive.
func TestDiscordButtonsThroughTheInteractionsEndpoint(t *testing.T) {
	for _, delay := range []time.Duration{0, 300 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) { dcButtonsThroughEndpoint(t, delay) })
	}
}

func dcButtonsThroughEndpoint(t *testing.T, delay time.Duration) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	dc := dcFake(t, e)
	e.cfg.DiscordPublicKey = hex.EncodeToString(dc.PublicKey())
	r := dcStart(t, e, dc)
	dc.SetInteractionsEndpoint(dcRelay(t, r.base+"/discord/interactions", delay))
	dm := dc.DMChannel(dcAlice)
	id := dc.Command(dcAlice, "", "", "tidy-inbox", nil)
	waitFor(t, "the tidy's answer", func() bool { return dcCount(dc, dm, "Moved 9 tasks: ") == 1 })
	if st := dc.Interaction(id); st.Callback != 5 || len(st.Refused) != 0 || st.Original == nil || !strings.Contains(st.Original.Content, "Moved 9 tasks into 3 projects") {
		t.Errorf("the command %+v: want deferred once, then replaced by the run's progress", st)
		if st.Original != nil {
			t.Logf("original %q", st.Original.Content)
		}
		dcDump(t, dc, dm)
	}

	e.todo.AddTask(todoisttest.Task{Content: "Buy cake for the office"})
	ask := dc.Say(dcGuild, dcChannel, dcAlice, "<@"+dc.BotID()+"> delete the cake task")
	q := dcWaitButton(t, dc, ask, "Delete 1 task")
	yes := dcButton(q, "Delete 1 task")
	wrong := dc.Press(dcBob, ask, q.ID, yes)
	dcWantRefused(t, dc, wrong, "Only the person who asked")
	if n := len(e.todo.Tasks()); n != 10 {
		t.Errorf("Bob's press changed the account: %d tasks", n)
	}
	right := dc.Press(dcAlice, ask, q.ID, yes)
	waitFor(t, "the deletion", func() bool { return dcLast(dc, ask) == "Deleted the cake task." })
	if n := len(e.todo.Tasks()); n != 9 {
		t.Errorf("tasks after the yes: %d", n)
	}
	for _, id := range []string{wrong, right} {
		if st := dc.Interaction(id); st.Callback != 6 || len(st.Refused) != 0 {
			t.Errorf("press %+v: want one deferred update (6)", st)
		}
	}
	if n := dcCount(dc, ask, "Deleted the cake task."); n != 1 {
		t.Errorf("the answer was posted %d times", n)
	}

}

// TestDiscordNoSecretInTheLog: at log level debug, with Discord's calls
// failing on the routes whose paths carry an interaction's token, the
// log holds neither the bot token nor any interaction token.
func TestDiscordNoSecretInTheLog(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	e.cfg.LogLevel = "debug"
	dc, r := dcServe(t, e)
	dm := dc.DMChannel(dcAlice)
	dc.Fail("PATCH /webhooks/{app}/{token}/messages/{id}", http.StatusInternalServerError, 3)
	dc.Fail("POST /interactions/{id}/{token}/callback", http.StatusInternalServerError, 1)
	first := dc.Command(dcAlice, "", "", "help", nil)
	id := dc.Command(dcAlice, "", "", "tidy-inbox", nil)
	waitFor(t, "the tidy's answer", func() bool { return dcCount(dc, dm, "Moved 9 tasks: ") == 1 })
	dc.GlobalRateLimit(1)
	ms := dc.Messages(dm)
	press := dc.Press(dcAlice, dm, ms[len(ms)-1].ID, dcButton(ms[len(ms)-1], "↩️ Undo"))
	waitFor(t, "the undo", func() bool { return len(e.layout()["Inbox"]) == 9 })
	dc.Dispatch("INTERACTION_CREATE", []byte(fmt.Sprintf(`{"id":"9","type":3,"token":"aW50ZXJhY3Rpb246leaked","channel_id":%q,"user":{"id":%q},"data":"x"}`, dm, dcAlice)))
	dc.DM(dcAlice, "last one")
	waitFor(t, "the last answer", func() bool { return dcLast(dc, dm) == "You said: last one" })
	r.stop()
	logs := r.logs.String()
	if !strings.Contains(logs, "level=DEBUG") {
		t.Fatalf("no debug log to check:\n%s", logs)
	}
	secrets := []string{discordtest.Token, "aW50ZXJhY3Rpb246leaked"}
	for _, in := range []string{first, id, press} {
		secrets = append(secrets, dc.Interaction(in).Token)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(logs, s) {
			t.Errorf("a secret (%.12s…) in the log:\n%s", s, logs)
		}
	}
}
