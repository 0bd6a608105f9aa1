package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/accounts"
	"github.com/tidybot/tidybot/adapters/discord/discordtest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

const (
	discordAlice    = "800000000000000042"
	discordStranger = "800000000000000666"
	discordGuild    = "900000000000000001"
	discordChannel  = "900000000000000002"
)

// serveDiscord runs `tidybot serve` with the fake Discord (the gateway)
// until the test ends, once its commands are registered.
func serveDiscord(t *testing.T, e *env) *discordtest.Server {
	t.Helper()
	dc := discordtest.New(t)
	e.cfg.DiscordToken, e.cfg.DiscordURL = discordtest.Token, dc.URL()
	e.cfg.AllowedUsers = append(e.cfg.AllowedUsers, "discord:"+discordAlice)
	serve(t, e)
	if !dc.WaitReady() {
		t.Fatal("serve did not open Discord's gateway")
	}
	waitFor(t, "the slash commands", func() bool { return len(dc.Commands()) > 0 })
	return dc
}

// discordTexts is every text the bot showed in channel: its messages
// there and the answers to slash commands given in it.
func discordTexts(dc *discordtest.Server, channel string, interactions ...string) []string {
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
	return out
}

func lastDiscord(dc *discordtest.Server, channel string) (discordtest.Message, bool) {
	ms := dc.Messages(channel)
	if len(ms) == 0 {
		return discordtest.Message{}, false
	}
	return ms[len(ms)-1], true
}

// A DM tidy through the slash command, a delete confirmed with buttons
// (a stranger's press refused), and a stranger told their id: through
// serve, the real discordgo, and the fake Discord.
func TestDiscordTidyAndConfirmWithButtons(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	dc := serveDiscord(t, e)
	dm := dc.DMChannel(discordAlice)

	cmd := dc.Command(discordAlice, "", "", "tidy-inbox", nil)
	waitFor(t, "the tidy's answer", func() bool {
		return strings.Contains(strings.Join(discordTexts(dc, dm, cmd), "\n"), "Moved 9 tasks")
	})
	st := dc.Interaction(cmd)
	if st.Callback != 5 || st.Original == nil || len(st.Refused) != 0 {
		t.Fatalf("the command's interaction %+v: want a deferred response, then the bot's first message in its place", st)
	}
	if len(e.layout()["Inbox"]) != 0 {
		t.Errorf("layout: %v", e.layout())
	}

	e.todo.AddTask(todoisttest.Task{Content: "Buy cake for the office"})
	_, asked := dc.DM(discordAlice, "delete the cake task")
	var question discordtest.Message
	waitFor(t, "the confirmation", func() bool {
		m, ok := lastDiscord(dc, dm)
		question = m
		return ok && len(m.Rows) > 0 && len(m.Rows[0]) == 2
	})
	if question.Rows[0][0].Label != "Delete 1 task" || question.Rows[0][1].Label != "Cancel" {
		t.Fatalf("buttons %+v", question.Rows)
	}
	if dc.Typing(dm) == 0 {
		t.Errorf("no typing indicator for message %s", asked)
	}
	stranger := dc.Press(discordStranger, dm, question.ID, question.Rows[0][0].CustomID)
	waitFor(t, "the stranger's refusal", func() bool {
		st := dc.Interaction(stranger)
		return st.Callback == 6 && len(st.Followups) == 1
	})
	if f := dc.Interaction(stranger).Followups[0]; f.Flags&64 == 0 || !strings.Contains(f.Content, "not allowed") {
		t.Errorf("the stranger's press got %+v, want an ephemeral refusal", f)
	}
	dc.Press(discordAlice, dm, question.ID, question.Rows[0][0].CustomID)
	waitFor(t, "the deletion", func() bool { m, _ := lastDiscord(dc, dm); return m.Content == "Deleted the cake task." })
	if n := len(e.todo.Tasks()); n != 9 {
		t.Errorf("tasks = %d, want 9", n)
	}
	for _, m := range dc.Messages(dm) {
		if m.ID == question.ID && (len(m.Rows) != 0 || !strings.Contains(m.Content, "→ yes")) {
			t.Errorf("the buttons did not give way to the choice: %+v", m)
		}
	}

	strangerDM, _ := dc.DM(discordStranger, "hi")
	waitFor(t, "the refusal", func() bool {
		m, ok := lastDiscord(dc, strangerDM)
		return ok && strings.Contains(m.Content, "discord:"+discordStranger)
	})
}

// A mention in a server channel is answered in a thread started from
// it; other messages there are not the bot's.
func TestDiscordMentionIsAnsweredInAThread(t *testing.T) {
	e := newEnv(t)
	dc := serveDiscord(t, e)
	dc.Say(discordGuild, discordChannel, discordAlice, "lunch anyone?")
	id := dc.Say(discordGuild, discordChannel, discordAlice, "<@"+dc.BotID()+"> what's due today?")
	waitFor(t, "the answer in the thread", func() bool {
		m, ok := lastDiscord(dc, id)
		return ok && m.Content == "You said: what's due today?"
	})
	if th := dc.Threads(); len(th) != 1 || th[0].ID != id || th[0].ParentID != discordChannel {
		t.Errorf("threads %+v", th)
	}
	if ms := dc.Messages(discordChannel); len(ms) != 0 {
		t.Errorf("the channel got %+v, want nothing outside the thread", ms)
	}
}

// The gateway drops mid-run: the adapter resumes, the message sent
// meanwhile arrives, and one delivered twice is answered once.
func TestDiscordReconnectLosesNothingAndRunsNothingTwice(t *testing.T) {
	e := newEnv(t)
	dc := serveDiscord(t, e)
	dm, first := dc.DM(discordAlice, "first")
	dc.Drop()
	dc.DM(discordAlice, "second")
	waitFor(t, "the resume", func() bool { return dc.Resumes() >= 1 })
	dc.Redeliver(first)
	waitFor(t, "both answers", func() bool {
		texts := strings.Join(discordTexts(dc, dm), "\n")
		return strings.Contains(texts, "You said: first") && strings.Contains(texts, "You said: second")
	})
	dc.DM(discordAlice, "third")
	waitFor(t, "the third answer", func() bool { return strings.Contains(strings.Join(discordTexts(dc, dm), "\n"), "You said: third") })
	for _, want := range []string{"You said: first", "You said: second", "You said: third"} {
		if n := strings.Count(strings.Join(discordTexts(dc, dm), "\n"), want); n != 1 {
			t.Errorf("%q posted %d times, want once: %q", want, n, discordTexts(dc, dm))
		}
	}
	if dc.Identifies() != 1 {
		t.Errorf("%d IDENTIFYs, want 1 (then RESUME)", dc.Identifies())
	}
}

// Strangers flooding a server channel with mentions get one notice
// there (in one thread), not one each; chatter that does not address
// the bot gets nothing; an allowed person is answered.
func TestDiscordStrangerFloodInAChannel(t *testing.T) {
	e := newEnv(t)
	dc := serveDiscord(t, e)
	mention := "<@" + dc.BotID() + "> "
	dc.Say(discordGuild, discordChannel, "700000000000000001", "just chatting, no bot here")
	for i := range 50 {
		dc.Say(discordGuild, discordChannel, fmt.Sprintf("7000000000000%05d", 100+i), mention+"tidy my inbox")
	}
	id := dc.Say(discordGuild, discordChannel, discordAlice, mention+"hello")
	waitFor(t, "the allowed person's answer", func() bool { m, ok := lastDiscord(dc, id); return ok && m.Content == "You said: hello" })
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
	e := newEnv(t)
	svc := todoisttest.NewService(t)
	addr := freeAddr(t)
	base := "http://" + addr
	svc.RegisterApp(todoisttest.App{ClientID: "tidy-client", ClientSecret: "tidy-client-secret-0123", RedirectURL: base + accounts.CallbackPath})
	alice := svc.NewAccount()
	alice.SeedTalkInbox()
	dc := discordtest.New(t)
	e.cfg.DiscordToken, e.cfg.DiscordURL = discordtest.Token, dc.URL()
	e.cfg.TodoistToken, e.cfg.TodoistURL, e.cfg.TodoistAuth = "", svc.URL, svc.AuthURL
	e.cfg.ClientID, e.cfg.ClientSecret = "tidy-client", "tidy-client-secret-0123"
	e.cfg.PublicURL, e.cfg.SecretKey = base, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, 32))
	e.cfg.AllowedUsers, e.cfg.HTTPAddr = []string{"discord:guild:" + discordGuild, "discord:" + discordAlice}, addr
	serveTeam(t, e, &syncBuffer{})
	if !dc.WaitReady() {
		t.Fatal("serve did not open Discord's gateway")
	}
	waitFor(t, "the slash commands", func() bool { return len(dc.Commands()) > 0 })
	names := map[string]bool{}
	for _, c := range dc.Commands() {
		names[c.Name] = true
	}
	if !names["connect"] || !names["disconnect"] {
		t.Fatalf("team mode's commands are not registered: %v", names)
	}

	// In the server: told to connect in a DM, no link in the channel.
	id := dc.Say(discordGuild, discordChannel, discordAlice, "<@"+dc.BotID()+"> /tidy-inbox")
	waitFor(t, "the prompt in the thread", func() bool { m, ok := lastDiscord(dc, id); return ok && strings.Contains(m.Content, "direct message") })
	for _, m := range dc.Messages(id) {
		if connectLink(m.Content) != "" {
			t.Fatalf("a Connect link in the server: %q", m.Content)
		}
	}
	// Another member of the server, listed by no id of his own, is
	// served there too (discord:guild:ID): told to connect.
	other := dc.Say(discordGuild, discordChannel, "800000000000000043", "<@"+dc.BotID()+"> hello")
	waitFor(t, "the member's prompt", func() bool {
		m, ok := lastDiscord(dc, other)
		return ok && strings.Contains(m.Content, "to connect your account")
	})
	// In the DM: /connect gives the link, as text and a link button.
	cmd := dc.Command(discordAlice, "", "", "connect", nil)
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
	dm := dc.DMChannel(discordAlice)
	waitFor(t, "the connected message", func() bool {
		return strings.Contains(strings.Join(discordTexts(dc, dm), "\n"), "Todoist is connected") ||
			strings.Contains(strings.Join(discordTexts(dc, dm), "\n"), "Connected the Todoist account")
	})
	dc.Command(discordAlice, "", "", "tidy-inbox", nil)
	waitFor(t, "the tidy on Alice's own Todoist", func() bool { return len(alice.TasksIn(alice.InboxID())) == 0 })
}

// With DISCORD_PUBLIC_KEY, interactions come to serve's
// /discord/interactions, signed: a forged one is refused, a slash
// command is answered as over the gateway.
func TestDiscordInteractionsOverHTTP(t *testing.T) {
	e := newEnv(t)
	dc := discordtest.New(t)
	e.cfg.DiscordToken, e.cfg.DiscordURL = discordtest.Token, dc.URL()
	e.cfg.DiscordPublicKey = hex.EncodeToString(dc.PublicKey())
	e.cfg.AllowedUsers = append(e.cfg.AllowedUsers, "discord:"+discordAlice)
	base := serve(t, e)
	if !dc.WaitReady() {
		t.Fatal("serve did not open Discord's gateway")
	}
	waitFor(t, "the slash commands", func() bool { return len(dc.Commands()) > 0 })
	url := base + "/discord/interactions"
	if status, err := dc.PostForged(url, []byte(`{"type":1}`)); err != nil || status != http.StatusUnauthorized {
		t.Fatalf("a forged request: %d, %v; want 401", status, err)
	}
	dc.SetInteractionsEndpoint(url)
	id := dc.Command(discordAlice, "", "", "help", nil)
	waitFor(t, "the help", func() bool {
		st := dc.Interaction(id)
		return st.Original != nil && strings.Contains(st.Original.Content, "/tidy-inbox")
	})
}

// An event that does not decode is logged, counted in /metrics and
// skipped; the messages after it are answered.
func TestDiscordPoisonEventIsSkipped(t *testing.T) {
	e := newEnv(t)
	e.cfg.MetricsAddr = freeAddr(t)
	dc := serveDiscord(t, e)
	dc.Dispatch("MESSAGE_CREATE", []byte(`{"id":"1","channel_id":12345,"content":12345}`))
	dm, _ := dc.DM(discordAlice, "hello")
	waitFor(t, "the answer after the poison event", func() bool { m, _ := lastDiscord(dc, dm); return m.Content == "You said: hello" })
	metric := `tidybot_events_total{outcome="undecodable",platform="discord"} 1`
	if _, body := get(t, "http://"+e.cfg.MetricsAddr+"/metrics"); !strings.Contains(body, metric) {
		t.Errorf("/metrics lacks %s", metric)
	}
}
