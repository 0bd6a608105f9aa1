package main

import (
	"fmt"
	"strings"
	"testing"

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
