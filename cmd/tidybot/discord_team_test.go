package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/adapters/discord/discordtest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// TestDiscordTeamModeConnectFromAServer: team mode with a whole server
// allowed (discord:team:SERVER_ID). Alice asks in a channel of it before
// connecting and is told to send /connect in a direct message (a link in
// the channel could be opened by anyone); she does, gets her Connect
// link there, connects, and what she asked runs on her account. The
// same with everyone allowed (discord:*).
func TestDiscordTeamModeConnectFromAServer(t *testing.T) {
	for _, allow := range []string{"discord:guild:" + dcGuild, "discord:team:" + dcGuild, "discord:*"} {
		t.Run(allow, func(t *testing.T) { dcTeamConnect(t, allow) })
	}
}

func dcTeamConnect(t *testing.T, allow string) {
	dc, alice := dcServeTeam(t, allow)

	ask := dc.Say(dcGuild, dcChannel, dcAlice, "<@"+dc.BotID()+"> /tidy-inbox")
	waitFor(t, "the word to connect", func() bool { return strings.Contains(dcLast(dc, ask), "/connect") })
	if link := connectLink(dcLast(dc, ask)); link != "" {
		t.Errorf("a Connect link posted in a server thread: %q", dcLast(dc, ask))
	}
	dm, _ := dc.DM(dcAlice, "/connect")
	waitFor(t, "Alice's answer in her DM", func() bool { return dcLast(dc, dm) != "" })
	link := connectLink(dcLast(dc, dm))
	if link == "" {
		t.Fatalf("Alice, a member of the allowed server, asked for /connect in a DM and was told %q", dcLast(dc, dm))
	}
	var button string
	ms := dc.Messages(dm)
	for _, row := range ms[len(ms)-1].Rows {
		for _, b := range row {
			if b.Label == "Connect Todoist" {
				button = b.URL
			}
		}
	}
	if button != link {
		t.Errorf("the Connect message's link button goes to %q, want %s", button, link)
	}
	if code, body := open(t, alice.Browser(), link); code != http.StatusOK || !strings.Contains(body, "Connected") {
		t.Fatalf("connect: HTTP %d %q", code, body)
	}
	waitFor(t, "Alice's tidy", func() bool { return strings.HasPrefix(dcLast(dc, ask), "Moved ") })
	if n := len(alice.TasksIn(alice.InboxID())); n != 0 {
		t.Errorf("Alice's inbox has %d tasks after her tidy", n)
	}
}

// dcServeTeam serves team mode on the fake Discord and a fake Todoist
// with OAuth, allowing allow; alice is a Todoist account not yet
// connected, its inbox seeded.
func dcServeTeam(t *testing.T, allow ...string) (*discordtest.Server, *todoisttest.Account) {
	t.Helper()
	e := newEnv(t)
	svc, base := teamTodoist(t, e, 9)
	alice := svc.NewAccount()
	alice.SeedTalkInbox()
	dc := discordtest.New(t)
	e.cfg.DiscordToken, e.cfg.DiscordURL = discordtest.Token, dc.URL()
	e.cfg.AllowedUsers = allow
	logs := &syncBuffer{}
	serveTeam(t, e, logs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	dcReady(t, dc, &running{base: base, logs: logs})
	return dc, alice
}

// TestDiscordTeamModeSlashCommandsBeforeConnecting: a person not yet
// connected is prompted to connect once an hour, however much they
// ask; but each slash command was deferred ("tidybot is thinking…") and
// must be answered, or it shows thinking until Discord gives up.
func TestDiscordTeamModeSlashCommandsBeforeConnecting(t *testing.T) {
	dc, _ := dcServeTeam(t, "discord:*")
	first := dc.Command(dcAlice, "", "", "tidy-inbox", nil)
	waitFor(t, "the Connect link", func() bool {
		o := dc.Interaction(first).Original
		return o != nil && connectLink(o.Content) != ""
	})
	second := dc.Command(dcAlice, "", "", "tidy-inbox", nil)
	waitFor(t, "the second command's answer", func() bool {
		o := dc.Interaction(second).Original
		return o != nil && o.Content != ""
	})
}
