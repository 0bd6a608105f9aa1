package main

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/discord/discordtest"
	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

func TestDiscordDMTidyAndSlashCommand(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	dc, _ := dcServe(t, e)

	// A DM in, the answer out: progress in one status message edited in
	// place, the answer after it, the typing indicator meanwhile.
	dm, _ := dc.DM(dcAlice, "/tidy-inbox")
	waitFor(t, "the tidy's answer", func() bool { return strings.HasPrefix(dcLast(dc, dm), "Moved ") })
	if len(e.layout()["Inbox"]) != 0 {
		t.Errorf("layout: %v", e.layout())
	}
	msgs := dc.Messages(dm)
	if status := msgs[0]; len(status.Edits) == 0 || !strings.Contains(status.Content, "➡️ Moved 9 tasks into 3 projects") {
		t.Errorf("status message %+v: want progress edited in place", status)
	}
	if n := dcCount(dc, dm, "Moved 9 tasks: "); n != 1 {
		t.Errorf("the answer was posted %d times", n)
		dcDump(t, dc, dm)
	}
	if dc.Typing(dm) == 0 {
		t.Error("no typing indicator while the model worked")
	}

	// Undo through the slash command /undo: deferred at once, then the
	// answer replaces the deferred response; answered exactly once.
	start := time.Now()
	id := dc.Command(dcAlice, "", "", "undo", nil)
	waitFor(t, "the deferred response", func() bool { return dc.Interaction(id).Callback != 0 })
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the command was acknowledged after %v: Discord wants 3 s", d)
	}
	waitFor(t, "the undo", func() bool { return len(e.layout()["Inbox"]) == 9 })
	waitFor(t, "the undo's answer", func() bool {
		o := dc.Interaction(id).Original
		return o != nil && strings.Contains(o.Content, "Undid")
	})
	if st := dc.Interaction(id); st.Callback != 5 || len(st.Refused) != 0 {
		t.Errorf("/undo's interaction %+v: want one deferred response (5), nothing refused", st)
	}

	// /tidy-inbox as a slash command: the deferred response ("…is
	// thinking") becomes the run's first message, the status; the answer
	// follows in the DM.
	id = dc.Command(dcAlice, "", "", "tidy-inbox", nil)
	waitFor(t, "the command's answer", func() bool { return dcCount(dc, dm, "Moved 9 tasks: ") == 2 })
	st := dc.Interaction(id)
	if st.Callback != 5 || len(st.Refused) != 0 {
		t.Errorf("interaction %+v: want one deferred response (5), nothing refused", st)
	}
	if st.Original == nil || !strings.Contains(st.Original.Content, "Moved 9 tasks into 3 projects") {
		t.Errorf("the deferred response %+v was not replaced by the run's progress", st.Original)
	}
	if len(e.layout()["Inbox"]) != 0 {
		t.Errorf("layout after the slash command: %v", e.layout())
	}
	if n := dcCount(dc, dm, "Moved 9 tasks: "); n != 2 {
		t.Errorf("two tidies, %d answers in the DM", n)
		dcDump(t, dc, dm)
	}
}

// dcThreadOf is the thread started from message id, if any.
func dcThreadOf(dc *discordtest.Server, id string) (discordtest.Thread, bool) {
	for _, th := range dc.Threads() {
		if th.ID == id {
			return th, true
		}
	}
	return discordtest.Thread{}, false
}

func TestDiscordMentionAnsweredInAThreadAndButtons(t *testing.T) {
	e := newEnv(t)
	dc, _ := dcServe(t, e)
	mention := "<@" + dc.BotID() + "> "

	// People talking in the channel start nothing and get no refusal;
	// a mention is answered in a thread started from its message.
	dc.Say(dcGuild, dcChannel, dcAlice, "I'll be late today")
	dc.Say(dcGuild, dcChannel, dcStranger, "lunch anyone?")
	asked := dc.Say(dcGuild, dcChannel, dcAlice, mention+"what's due today?")
	waitFor(t, "the answer in the thread", func() bool { return dcLast(dc, asked) == "You said: what's due today?" })
	th, ok := dcThreadOf(dc, asked)
	if !ok || th.ParentID != dcChannel || th.GuildID != dcGuild {
		t.Errorf("threads %+v: want one started from message %s in channel %s", dc.Threads(), asked, dcChannel)
	}
	if n := len(dc.Threads()); n != 1 {
		t.Errorf("%d threads, want the mention's alone: %+v", n, dc.Threads())
	}
	if ms := dc.Messages(dcChannel); len(ms) != 0 {
		t.Errorf("the bot posted in the channel itself: %+v", ms)
	}
	if n := dcCount(dc, asked, "You said: what's due today?"); n != 1 {
		t.Errorf("the answer was posted %d times", n)
	}

	// A gated delete asked by Alice in the channel: the confirmation's
	// buttons are in the thread; Bob's press is refused to him alone
	// and changes nothing; Alice's yes deletes.
	e.todo.AddTask(todoisttest.Task{Content: "Buy cake for the office"})
	ask := dc.Say(dcGuild, dcChannel, dcAlice, mention+"delete the cake task")
	q := dcWaitButton(t, dc, ask, "Delete 1 task")
	if dcButton(q, "Cancel") == "" {
		t.Errorf("question %+v: want Delete 1 task and Cancel", q)
	}
	yes := dcButton(q, "Delete 1 task")
	wrong := dc.Press(dcBob, ask, q.ID, yes)
	waitFor(t, "Bob's press answered", func() bool {
		st := dc.Interaction(wrong)
		return len(st.Followups) > 0 || (st.Original != nil && st.Original.Content != "")
	})
	st := dc.Interaction(wrong)
	var said string
	if st.Original != nil && st.Original.Content != "" {
		said = st.Original.Content
		if !st.Ephemeral {
			t.Errorf("the refusal is seen by all: %+v", st)
		}
	}
	for _, f := range st.Followups {
		said += f.Content
		if f.Flags&(1<<6) == 0 {
			t.Errorf("the refusal is seen by all: %+v", f)
		}
	}
	if !strings.Contains(said, "Only the person who asked") {
		t.Errorf("Bob was told %q, want Only the person who asked…", said)
	}
	if len(st.Refused) != 0 {
		t.Errorf("Bob's press answered twice: %+v", st)
	}
	if n := len(e.todo.Tasks()); n != 1 {
		t.Errorf("Bob's press changed the account: %d tasks", n)
	}
	for _, m := range dc.Messages(ask) {
		if strings.Contains(m.Content, "Deleted") {
			t.Errorf("Bob's press ran the delete: %q", m.Content)
		}
	}

	right := dc.Press(dcAlice, ask, q.ID, yes)
	waitFor(t, "the deletion", func() bool { return dcLast(dc, ask) == "Deleted the cake task." })
	if n := len(e.todo.Tasks()); n != 0 {
		t.Errorf("tasks after the yes: %d, want 0", n)
	}
	if n := dcCount(dc, ask, "Deleted the cake task."); n != 1 {
		t.Errorf("the answer was posted %d times", n)
		dcDump(t, dc, ask)
	}
	if st := dc.Interaction(right); st.Callback == 0 || len(st.Refused) != 0 {
		t.Errorf("Alice's press %+v: want answered once", st)
	}
	for _, m := range dc.Messages(ask) {
		if m.ID == q.ID && (dcButton(m, "Delete 1 task") != "" || !strings.Contains(m.Content, "→ yes")) {
			t.Errorf("the buttons did not give way to the choice: %+v", m)
		}
	}
	for _, id := range []string{dcChannel} {
		for _, m := range dc.Messages(id) {
			t.Errorf("the bot answered chatter in the channel: %+v", m)
		}
	}
}

// dcGate makes e's model wait, for a request whose instruction says
// "slowly", until release is called; asked receives each such request.
func dcGate(t *testing.T, e *env) (asked <-chan string, release func()) {
	t.Helper()
	ask := make(chan string, 16)
	open := make(chan struct{})
	var once sync.Once
	e.model.Close()
	e.model = openaitest.New(openaitest.FromAgent(func(req agent.Request) agent.Response {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == agent.RoleUser && strings.Contains(last.Content, "slowly") {
			ask <- last.Content
			select {
			case <-open:
			case <-time.After(30 * time.Second):
			}
		}
		return e.scen.reply(req)
	}))
	t.Cleanup(e.model.Close)
	e.cfg.OpenAIBaseURL = e.model.URL
	release = func() { once.Do(func() { close(open) }) }
	t.Cleanup(release)
	return ask, release
}

// TestDiscordResumeMidRun: the gateway goes away while the model is
// answering (a dropped TCP connection; Discord's op 7 RECONNECT); the
// bot resumes the session (RESUME with its session id and sequence, no
// new IDENTIFY), the messages sent meanwhile arrive by the replay, and
// every message is answered once, the one in flight included, though
// the resumed session delivers it again.
func TestDiscordResumeMidRun(t *testing.T) {
	for _, fault := range []string{"drop", "reconnect"} {
		t.Run(fault, func(t *testing.T) {
			e := newEnv(t)
			asked, release := dcGate(t, e)
			dc, _ := dcServe(t, e)
			mention := "<@" + dc.BotID() + "> "
			dm, slow := dc.DM(dcAlice, "slowly say hi")
			select {
			case <-asked:
			case <-time.After(15 * time.Second):
				t.Fatal("the model was never asked")
			}
			if fault == "drop" {
				dc.Drop()
			} else {
				dc.Reconnect()
			}
			dc.DM(dcAlice, "and this too")
			inServer := dc.Say(dcGuild, dcChannel, dcBob, mention+"and from the server")
			waitFor(t, "the RESUME", func() bool { return dc.Resumes() >= 1 && dc.Connected() == 1 })
			// The message in flight delivered again on the resumed
			// session (the gateway promises no exactly-once delivery).
			if !dc.Redeliver(slow) {
				t.Fatal("the fake had no such message to send again")
			}
			release()
			waitFor(t, "the answers", func() bool {
				return dcCount(dc, dm, "You said: slowly say hi") >= 1 && dcCount(dc, dm, "You said: and this too") >= 1 &&
					dcLast(dc, inServer) == "You said: and from the server"
			})
			// One more message after them: each chat's messages run in
			// order, so a second run of any would show by now.
			dc.DM(dcAlice, "last one")
			dc.Say(dcGuild, inServer, dcBob, mention+"and the last")
			waitFor(t, "the last answers", func() bool {
				return dcLast(dc, dm) == "You said: last one" && dcLast(dc, inServer) == "You said: and the last"
			})
			for _, want := range []string{"You said: slowly say hi", "You said: and this too", "You said: last one"} {
				if n := dcCount(dc, dm, want); n != 1 {
					t.Errorf("%q posted %d times", want, n)
				}
			}
			if n := dcCount(dc, inServer, "You said: and from the server"); n != 1 {
				t.Errorf("the server's answer posted %d times", n)
			}
			if n := dc.Identifies(); n != 1 {
				t.Errorf("%d IDENTIFYs, want 1: the session was not resumed", n)
			}
		})
	}
}

// TestDiscordRedeliveredEventsRunOnce: the gateway promises no
// exactly-once delivery; a message or an interaction seen twice (the
// fake's Redeliver, under a new sequence number) runs once and is
// answered once.
func TestDiscordRedeliveredEventsRunOnce(t *testing.T) {
	e := newEnv(t)
	dc, _ := dcServe(t, e)
	dm, msg := dc.DM(dcAlice, "add task Buy oat milk")
	waitFor(t, "the answer", func() bool { return dcLast(dc, dm) == "Added: Buy oat milk" })
	if !dc.Redeliver(msg) {
		t.Fatal("the fake had no such message to send again")
	}
	id := dc.Command(dcAlice, "", "", "help", nil)
	waitFor(t, "the help", func() bool {
		o := dc.Interaction(id).Original
		return o != nil && strings.Contains(o.Content, "/undo")
	})
	if !dc.Redeliver(id) {
		t.Fatal("the fake had no such interaction to send again")
	}
	dc.DM(dcAlice, "last one")
	waitFor(t, "the last answer", func() bool { return dcLast(dc, dm) == "You said: last one" })
	if n := dcCount(dc, dm, "Added: Buy oat milk"); n != 1 {
		t.Errorf("the message ran %d times", n)
		dcDump(t, dc, dm)
	}
	n := 0
	for _, task := range e.todo.Tasks() {
		if task.Content == "Buy oat milk" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d tasks Buy oat milk, want 1", n)
	}
	if st := dc.Interaction(id); st.Callback != 5 || len(st.Refused) != 0 || len(st.Followups) != 0 {
		t.Errorf("the redelivered command %+v: want answered once", st)
	}
	if n := dcCount(dc, dm, "/undo"); n != 1 {
		t.Errorf("the help was posted %d times", n)
	}
}

// TestDiscordLongAnswerIsSplit: a runaway 1 MB answer is cut by the bot
// to about three Discord messages, each within Discord's 2,000
// characters, the last ending in "…".
func TestDiscordLongAnswerIsSplit(t *testing.T) {
	e := newEnv(t)
	// Room for the runaway answer at the model API (the fake cuts a reply
	// at max_tokens as the real one does).
	e.cfg.MaxTokens, e.cfg.TokenBudget = 400_000, 2_000_000
	dc, _ := dcServe(t, e)
	dm, _ := dc.DM(dcAlice, "say a lot")
	defer func() {
		if t.Failed() {
			dcDump(t, dc, dm)
		}
	}()
	// The answer's parts go out in one Send, so once the last (cut) part
	// is there, all are.
	waitFor(t, "the cut answer", func() bool {
		last := dcLast(dc, dm)
		return strings.HasPrefix(last, "blah") && strings.HasSuffix(last, "…")
	})
	n := 0
	for _, m := range dc.Messages(dm) {
		if c := len([]rune(m.Content)); c > 2000 {
			t.Errorf("a message of %d characters", c)
		}
		if strings.Contains(m.Content, "blah") {
			n++
		}
	}
	if n < 2 || n > 4 {
		t.Errorf("the answer took %d messages, want about three", n)
	}
}

// TestDiscordWithoutMessageContent: without the privileged
// MESSAGE_CONTENT intent (DISCORD_MESSAGE_CONTENT unset and not granted)
// a mention still reaches the bot with its text, chatter does not, and
// a slash command in a server channel is deferred and answered there.
func TestDiscordWithoutMessageContent(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	dc := dcFake(t, e)
	dc.WithoutMessageContent()
	dc.RefuseDisallowedIntents()
	dcStart(t, e, dc)
	dc.Say(dcGuild, dcChannel, dcAlice, "lunch anyone?")
	asked := dc.Say(dcGuild, dcChannel, dcAlice, "<@"+dc.BotID()+"> what's due today?")
	waitFor(t, "the answer in the thread", func() bool { return dcLast(dc, asked) == "You said: what's due today?" })

	id := dc.Command(dcAlice, dcGuild, dcOther, "tidy-inbox", nil)
	waitFor(t, "the tidy's answer", func() bool { return dcCount(dc, dcOther, "Moved 9 tasks: ") == 1 })
	if st := dc.Interaction(id); st.Callback != 5 || len(st.Refused) != 0 || st.Original == nil || st.Original.Content == "" {
		t.Errorf("interaction %+v: want deferred once, then replaced", st)
	}
	if ms := dc.Messages(dcChannel); len(ms) != 0 {
		t.Errorf("the bot posted in the channel: %+v", ms)
	}
}

// TestDiscordSlashCommandWhileARunIsGoing: a slash command typed while
// an earlier message's run is still going gets its own answer in its
// reply ("Alice used /help" above it), not the earlier run's answer.
func TestDiscordSlashCommandWhileARunIsGoing(t *testing.T) {
	e := newEnv(t)
	asked, release := dcGate(t, e)
	dc, _ := dcServe(t, e)
	dm, _ := dc.DM(dcAlice, "slowly say hi")
	select {
	case <-asked:
	case <-time.After(15 * time.Second):
		t.Fatal("the model was never asked")
	}
	id := dc.Command(dcAlice, "", "", "tidy-inbox", nil)
	waitFor(t, "the deferred response", func() bool { return dc.Interaction(id).Callback != 0 })
	release()
	waitFor(t, "both answers", func() bool {
		return dcCount(dc, dm, "You said: slowly say hi") == 1 && dcCount(dc, dm, "inbox is already empty") == 1
	})
	if o := dc.Interaction(id).Original; o == nil || strings.Contains(o.Content, "You said") {
		t.Errorf("the reply to /tidy-inbox is %+v: the earlier message's answer shown as the command's", o)
		dcDump(t, dc, dm)
	}
}

// TestDiscordSessionInvalidated: Discord ends the session (op 9, not
// resumable); the bot identifies anew and answers the next message.
func TestDiscordSessionInvalidated(t *testing.T) {
	e := newEnv(t)
	dc, _ := dcServe(t, e)
	dc.InvalidSession(false)
	waitFor(t, "the new session", func() bool { return dc.Identifies() == 2 && dc.Connected() == 1 })
	dm, _ := dc.DM(dcAlice, "still there?")
	waitFor(t, "the answer", func() bool { return dcLast(dc, dm) == "You said: still there?" })
}

// TestDiscordUndoAndChoicesInAThread: in a server thread the answer's
// Undo is the asker's alone (Bob's press is refused to him, Alice's
// reverts), and an ask_user question's options are buttons the asker
// answers with.
func TestDiscordUndoAndChoicesInAThread(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	dc, _ := dcServe(t, e)
	mention := "<@" + dc.BotID() + "> "
	ask := dc.Say(dcGuild, dcChannel, dcAlice, mention+"/tidy-inbox")
	waitFor(t, "the tidy's answer", func() bool { return strings.HasPrefix(dcLast(dc, ask), "Moved 9 tasks") })
	ms := dc.Messages(ask)
	if status := ms[0]; len(status.Edits) == 0 || !strings.Contains(status.Content, "Moved 9 tasks into 3 projects") {
		t.Errorf("status message %+v: want progress edited in place in the thread", status)
	}
	answer := ms[len(ms)-1]
	undo := dcButton(answer, "↩️ Undo")
	if undo == "" {
		t.Fatalf("no Undo under the answer: %+v", answer)
	}
	dcWantRefused(t, dc, dc.Press(dcBob, ask, answer.ID, undo), "Only the person who asked")
	if n := len(e.layout()["Inbox"]); n != 0 {
		t.Errorf("Bob's press reverted the tidy: inbox %d", n)
	}
	dc.Press(dcAlice, ask, answer.ID, undo)
	waitFor(t, "the undo", func() bool { return len(e.layout()["Inbox"]) == 9 && dcCount(dc, ask, "Undid") > 0 })
	if n := dcCount(dc, ask, "Undid"); n != 1 {
		t.Errorf("the undo was reported %d times", n)
		dcDump(t, dc, ask)
	}

	e.todo.AddTask(todoisttest.Task{Content: "Call the dentist"})
	ask = dc.Say(dcGuild, dcChannel, dcAlice, mention+"file the dentist task")
	q := dcWaitButton(t, dc, ask, "Health")
	dc.Press(dcAlice, ask, q.ID, dcButton(q, "Health"))
	waitFor(t, "the filing", func() bool { return dcLast(dc, ask) == "Filed the dentist task." })
	if got := e.layout()["Health"]; len(got) != 1 || got[0] != "Call the dentist" {
		t.Errorf("Health = %v", got)
	}
}

// TestDiscordLateInteractionAfterResume: a slash command sent while the
// gateway was down reaches the bot by the RESUME's replay after its 3 s
// to answer; the deferred response is refused (10062), yet the command
// runs once and its answer is posted in the channel.
func TestDiscordLateInteractionAfterResume(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	dc, _ := dcServe(t, e)
	dm := dc.DMChannel(dcAlice)
	dc.Drop()
	id := dc.Command(dcAlice, "", "", "tidy-inbox", nil)
	dc.AgeInteraction(id, 10*time.Second)
	waitFor(t, "the RESUME", func() bool { return dc.Resumes() >= 1 && dc.Connected() == 1 })
	waitFor(t, "the tidy's answer", func() bool { return dcCount(dc, dm, "Moved 9 tasks: ") >= 1 })
	dc.DM(dcAlice, "last one")
	waitFor(t, "the last answer", func() bool { return dcLast(dc, dm) == "You said: last one" })
	if n := dcCount(dc, dm, "Moved 9 tasks: "); n != 1 {
		t.Errorf("the command's answer was posted %d times", n)
		dcDump(t, dc, dm)
	}
	if st := dc.Interaction(id); st.Callback != 0 || len(st.Refused) != 1 {
		t.Errorf("interaction %+v: want the one late answer refused", st)
	}
}

// TestDiscordThreadReplies: in the thread a mention started, a reply to
// the bot's message reaches it without a mention and is answered there;
// talk in the thread that addresses no one gets nothing.
func TestDiscordThreadReplies(t *testing.T) {
	e := newEnv(t)
	dc, _ := dcServe(t, e)
	asked := dc.Say(dcGuild, dcChannel, dcAlice, "<@"+dc.BotID()+"> what's due today?")
	waitFor(t, "the answer in the thread", func() bool { return dcLast(dc, asked) == "You said: what's due today?" })
	ms := dc.Messages(asked)
	dc.Say(dcGuild, asked, dcBob, "nice bot")
	dc.Reply(dcGuild, asked, dcAlice, "and tomorrow?", ms[len(ms)-1].ID)
	waitFor(t, "the answer to the reply", func() bool { return dcLast(dc, asked) == "You said: and tomorrow?" })
	dc.Say(dcGuild, asked, dcAlice, "<@"+dc.BotID()+"> last one")
	waitFor(t, "the last answer", func() bool { return dcLast(dc, asked) == "You said: last one" })
	for _, m := range dc.Messages(asked) {
		if strings.Contains(m.Content, "nice bot") {
			t.Errorf("the bot answered talk in its thread: %q", m.Content)
		}
	}
	if n := len(dc.Threads()); n != 1 {
		t.Errorf("%d threads, want the first mention's alone: %+v", n, dc.Threads())
	}
	if ms := dc.Messages(dcChannel); len(ms) != 0 {
		t.Errorf("the bot posted in the channel: %+v", ms)
	}
}
