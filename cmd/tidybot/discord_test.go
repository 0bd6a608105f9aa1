package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/adapters/discord/discordtest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// The helpers every Discord end-to-end test shares (discord_*_test.go;
// team mode's dcServeTeam is in discord_team_test.go), and the tests of
// this file.

// Discord people and places of these tests: ids are snowflakes (15 to
// 20 digits), as TIDYBOT_ALLOWED_USERS requires of discord: entries.
const (
	dcAlice    = "100000000000000001"
	dcBob      = "100000000000000002"
	dcStranger = "100000000000000666"
	dcGuild    = "200000000000000001"
	dcChannel  = "300000000000000001"
	dcOther    = "300000000000000002"
)

// dcServe runs `tidybot serve` with the fake Discord (gateway and REST
// through DISCORD_API_URL) for Alice and Bob, and returns the fake once
// the gateway session is up and the slash commands are registered.
func dcServe(t *testing.T, e *env) (*discordtest.Server, *running) {
	t.Helper()
	dc := dcFake(t, e)
	return dc, dcStart(t, e, dc)
}

// dcFake is the fake Discord, e's config pointing at it, Alice and Bob
// allowed.
func dcFake(t *testing.T, e *env) *discordtest.Server {
	t.Helper()
	dc := discordtest.New(t)
	e.cfg.DiscordToken, e.cfg.DiscordURL = discordtest.Token, dc.URL()
	e.cfg.AllowedUsers = []string{"discord:" + dcAlice, "discord:" + dcBob}
	return dc
}

// dcStart runs `tidybot serve` with e's config until the test ends,
// and waits for its gateway session and commands on dc; a failed test
// shows the serve's logs.
func dcStart(t *testing.T, e *env, dc *discordtest.Server) *running {
	t.Helper()
	r := startServe(t, e, nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", r.logs.String())
		}
	})
	dcReady(t, dc, r)
	return r
}

// dcReady waits for the gateway session and the registered commands.
func dcReady(t *testing.T, dc *discordtest.Server, r *running) {
	t.Helper()
	if !dc.WaitReady() {
		t.Fatalf("the bot never opened the gateway; logs:\n%s", r.logs.String())
	}
	waitFor(t, "the slash commands registered", func() bool { return len(dc.Commands()) > 0 })
}

// dcLastMessage is the bot's last message in a channel (the zero
// Message when there is none).
func dcLastMessage(dc *discordtest.Server, channel string) discordtest.Message {
	ms := dc.Messages(channel)
	if len(ms) == 0 {
		return discordtest.Message{}
	}
	return ms[len(ms)-1]
}

// dcLast is the text of the bot's last message in a channel.
func dcLast(dc *discordtest.Server, channel string) string {
	return dcLastMessage(dc, channel).Content
}

// dcCount is how many of the bot's messages in a channel say want.
func dcCount(dc *discordtest.Server, channel, want string) int {
	n := 0
	for _, m := range dc.Messages(channel) {
		if strings.Contains(m.Content, want) {
			n++
		}
	}
	return n
}

// dcExact is how many of the bot's messages in a channel say text.
func dcExact(dc *discordtest.Server, channel, text string) int {
	n := 0
	for _, m := range dc.Messages(channel) {
		if m.Content == text {
			n++
		}
	}
	return n
}

// dcTexts is every text the bot showed in channel: its messages there
// and the answers to slash commands given in it.
func dcTexts(dc *discordtest.Server, channel string, interactions ...string) string {
	var out []string
	for _, id := range interactions {
		if st := dc.Interaction(id); st.Original != nil {
			out = append(out, st.Original.Content)
		}
	}
	for _, m := range dc.Messages(channel) {
		if len(interactions) == 0 || m.Interaction == "" {
			out = append(out, m.Content)
		}
	}
	return strings.Join(out, "\n")
}

// dcDump logs a channel's messages, for a failing test.
func dcDump(t *testing.T, dc *discordtest.Server, channel string) {
	t.Helper()
	for _, m := range dc.AllMessages(channel) {
		t.Logf("%s by %s: %q edits=%d rows=%v deleted=%v", m.ID, m.AuthorID, m.Content, len(m.Edits), m.Rows, m.Deleted)
	}
}

// dcButton is the custom id of the button labelled label on message m.
func dcButton(m discordtest.Message, label string) string {
	for _, row := range m.Rows {
		for _, b := range row {
			if b.Label == label {
				return b.CustomID
			}
		}
	}
	return ""
}

// dcWaitButton waits for the bot's last message in channel to have a
// button labelled label, and returns that message.
func dcWaitButton(t *testing.T, dc *discordtest.Server, channel, label string) discordtest.Message {
	t.Helper()
	var q discordtest.Message
	waitFor(t, "the button "+label, func() bool {
		q = dcLastMessage(dc, channel)
		return dcButton(q, label) != ""
	})
	return q
}

// dcWantRefused waits for the press's follow-up and checks that it says
// want and only the presser sees it (flag 64, EPHEMERAL).
func dcWantRefused(t *testing.T, dc *discordtest.Server, press, want string) {
	t.Helper()
	waitFor(t, "the refusal of the press", func() bool { return len(dc.Interaction(press).Followups) > 0 })
	if f := dc.Interaction(press).Followups[0]; !strings.Contains(f.Content, want) || f.Flags&(1<<6) == 0 {
		t.Errorf("the press was answered %q (flags %d), want %q only the presser sees", f.Content, f.Flags, want)
	}
}

// A delete in a DM is confirmed with buttons: a stranger's press there
// is refused to them alone (a deferred update, one ephemeral follow-up),
// Alice's deletes, and the buttons give way to the choice.
func TestDiscordConfirmWithButtonsInADM(t *testing.T) {
	e := newEnv(t)
	dc, _ := dcServe(t, e)
	e.todo.AddTask(todoisttest.Task{Content: "Buy cake for the office"})
	dm, asked := dc.DM(dcAlice, "delete the cake task")
	question := dcWaitButton(t, dc, dm, "Delete 1 task")
	if len(question.Rows[0]) != 2 || question.Rows[0][0].Label != "Delete 1 task" || question.Rows[0][1].Label != "Cancel" {
		t.Fatalf("buttons %+v", question.Rows)
	}
	if dc.Typing(dm) == 0 {
		t.Errorf("no typing indicator for message %s", asked)
	}
	yes := dcButton(question, "Delete 1 task")
	stranger := dc.Press(dcStranger, dm, question.ID, yes)
	dcWantRefused(t, dc, stranger, "not allowed")
	if st := dc.Interaction(stranger); st.Callback != 6 || len(st.Followups) != 1 {
		t.Errorf("the stranger's press %+v: want a deferred update (6) and one follow-up", st)
	}
	dc.Press(dcAlice, dm, question.ID, yes)
	waitFor(t, "the deletion", func() bool { return dcLast(dc, dm) == "Deleted the cake task." })
	if n := len(e.todo.Tasks()); n != 0 {
		t.Errorf("tasks = %d, want 0", n)
	}
	for _, m := range dc.Messages(dm) {
		if m.ID == question.ID && (len(m.Rows) != 0 || !strings.Contains(m.Content, "→ yes")) {
			t.Errorf("the buttons did not give way to the choice: %+v", m)
		}
	}
}

// Strangers flooding a server channel with mentions get one notice
// there (in one thread), not one each; chatter that does not address
// the bot gets nothing; an allowed person is answered.
func TestDiscordStrangerFloodInAChannel(t *testing.T) {
	e := newEnv(t)
	dc, _ := dcServe(t, e)
	mention := "<@" + dc.BotID() + "> "
	dc.Say(dcGuild, dcChannel, "700000000000000001", "just chatting, no bot here")
	for i := range 50 {
		dc.Say(dcGuild, dcChannel, fmt.Sprintf("7000000000000%05d", 100+i), mention+"tidy my inbox")
	}
	id := dc.Say(dcGuild, dcChannel, dcAlice, mention+"hello")
	waitFor(t, "the allowed person's answer", func() bool { return dcLast(dc, id) == "You said: hello" })
	notices := 0
	var texts []string
	for _, th := range dc.Threads() {
		for _, m := range dc.Messages(th.ID) {
			texts = append(texts, m.Content)
			if strings.Contains(m.Content, "only work for the people my owner allowed") {
				notices++
			}
		}
	}
	if notices != 1 || len(dc.Threads()) != 2 {
		t.Errorf("%d notices in %d threads, want 1 notice and the allowed person's thread: %q", notices, len(dc.Threads()), texts)
	}
}

// Team mode on Discord: a person allowed by their server
// (discord:guild:ID) who has not connected a Todoist is asked to, in a
// DM; /connect there gives a link button for them alone, and once
// connected their request runs on their own Todoist.
func TestDiscordTeamModeConnect(t *testing.T) {
	dc, alice := dcServeTeam(t, "discord:guild:"+dcGuild, "discord:"+dcAlice)
	names := map[string]bool{}
	for _, c := range dc.Commands() {
		names[c.Name] = true
	}
	if !names["connect"] || !names["disconnect"] {
		t.Fatalf("team mode's commands are not registered: %v", names)
	}

	// In the server: told to connect in a DM, no link in the channel.
	id := dc.Say(dcGuild, dcChannel, dcAlice, "<@"+dc.BotID()+"> /tidy-inbox")
	waitFor(t, "the prompt in the thread", func() bool { return strings.Contains(dcLast(dc, id), "direct message") })
	for _, m := range dc.Messages(id) {
		if connectLink(m.Content) != "" {
			t.Fatalf("a Connect link in the server: %q", m.Content)
		}
	}
	// Another member of the server, listed by no id of his own, is
	// served there too (discord:guild:ID): told to connect.
	other := dc.Say(dcGuild, dcChannel, dcBob, "<@"+dc.BotID()+"> hello")
	waitFor(t, "the member's prompt", func() bool { return strings.Contains(dcLast(dc, other), "to connect your account") })
	// In the DM: /connect gives the link, as text and a link button.
	cmd := dc.Command(dcAlice, "", "", "connect", nil)
	var link string
	waitFor(t, "the link", func() bool {
		st := dc.Interaction(cmd)
		if st.Original == nil {
			return false
		}
		link = connectLink(st.Original.Content)
		return link != ""
	})
	if code, body := open(t, alice.Browser(), link); code != http.StatusOK || !strings.Contains(body, "Connected — back to Discord") {
		t.Fatalf("connect: HTTP %d %q", code, body)
	}
	dm := dc.DMChannel(dcAlice)
	waitFor(t, "the connected message", func() bool {
		texts := dcTexts(dc, dm)
		return strings.Contains(texts, "Todoist is connected") || strings.Contains(texts, "Connected the Todoist account")
	})
	dc.Command(dcAlice, "", "", "tidy-inbox", nil)
	waitFor(t, "the tidy on Alice's own Todoist", func() bool { return len(alice.TasksIn(alice.InboxID())) == 0 })
}

// An event that does not decode is logged, counted in /metrics and
// skipped; the messages after it are answered.
func TestDiscordPoisonEventIsSkipped(t *testing.T) {
	e := newEnv(t)
	e.cfg.MetricsAddr = freeAddr(t)
	dc, _ := dcServe(t, e)
	dc.Dispatch("MESSAGE_CREATE", []byte(`{"id":"1","channel_id":12345,"content":12345}`))
	dm, _ := dc.DM(dcAlice, "hello")
	waitFor(t, "the answer after the poison event", func() bool { return dcLast(dc, dm) == "You said: hello" })
	metric := `tidybot_events_total{outcome="undecodable",platform="discord"} 1`
	if _, body := get(t, "http://"+e.cfg.MetricsAddr+"/metrics"); !strings.Contains(body, metric) {
		t.Errorf("/metrics lacks %s", metric)
	}
}
