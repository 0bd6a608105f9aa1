package discordtest_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/tidybot/tidybot/adapters/discord/discordtest"
)

// bot is a discordgo session on the fake with its events collected.
type bot struct {
	*discordgo.Session
	mu       sync.Mutex
	messages []*discordgo.MessageCreate
	inters   []*discordgo.InteractionCreate
	seen     chan struct{}
}

// newSession is a discordgo session whose REST calls reach the fake.
func newSession(t *testing.T, srv *discordtest.Server, token string) *bot {
	t.Helper()
	dg, err := discordgo.New(token)
	if err != nil {
		t.Fatal(err)
	}
	dg.Client = &http.Client{Transport: srv.Transport(), Timeout: 10 * time.Second}
	dg.LogLevel = -1
	dg.SyncEvents = true // handlers in arrival order
	b := &bot{Session: dg, seen: make(chan struct{}, 100)}
	dg.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) {
		b.mu.Lock()
		b.messages = append(b.messages, m)
		b.mu.Unlock()
		b.seen <- struct{}{}
	})
	dg.AddHandler(func(_ *discordgo.Session, i *discordgo.InteractionCreate) {
		b.mu.Lock()
		b.inters = append(b.inters, i)
		b.mu.Unlock()
		b.seen <- struct{}{}
	})
	return b
}

// open connects a session to the gateway; t.Cleanup closes it.
func open(t *testing.T, srv *discordtest.Server, intents discordgo.Intent) *bot {
	t.Helper()
	b := newSession(t, srv, "Bot "+discordtest.Token)
	b.Identify.Intents = intents
	if err := b.Open(); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	if !srv.WaitReady() { // its first heartbeat: a fault before it races inside discordgo
		t.Fatal("no heartbeat after Open")
	}
	return b
}

// openClosedWith opens b, which the gateway must close with code.
func openClosedWith(t *testing.T, b *bot, code int) {
	t.Helper()
	err := b.Open()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("Open = %v, want close %d", err, code)
	}
}

// waitMessages waits for the session to have seen n messages from
// people (the bot's own are skipped) and returns them.
func (b *bot) waitMessages(t *testing.T, n int) []*discordgo.MessageCreate {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		b.mu.Lock()
		var got []*discordgo.MessageCreate
		for _, m := range b.messages {
			if !m.Author.Bot {
				got = append(got, m)
			}
		}
		b.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-b.seen:
		case <-deadline:
			t.Fatalf("saw %d messages, want %d", len(got), n)
		}
	}
}

func (b *bot) waitInteraction(t *testing.T, id string) *discordgo.InteractionCreate {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		b.mu.Lock()
		for _, i := range b.inters {
			if i.ID == id {
				b.mu.Unlock()
				return i
			}
		}
		b.mu.Unlock()
		select {
		case <-b.seen:
		case <-deadline:
			t.Fatalf("no interaction %s", id)
		}
	}
}

const allIntents = discordgo.IntentsAllWithoutPrivileged | discordgo.IntentMessageContent

func TestDMArrivesAndTheAnswerIsKept(t *testing.T) {
	srv := discordtest.New(t)
	b := open(t, srv, allIntents)
	if got := srv.Identifies(); got != 1 {
		t.Errorf("Identifies() = %d, want 1", got)
	}
	ch, id := srv.DM("42", "tidy my inbox")
	m := b.waitMessages(t, 1)[0]
	if m.ID != id || m.ChannelID != ch || m.Content != "tidy my inbox" || m.Author.ID != "42" || m.GuildID != "" {
		t.Errorf("MESSAGE_CREATE = %+v", m.Message)
	}
	if b.State.User == nil || b.State.User.ID != srv.BotID() || b.State.SessionID == "" {
		t.Errorf("READY user %+v, session %q", b.State.User, b.State.SessionID)
	}
	sent, err := b.ChannelMessageSend(ch, "done")
	if err != nil {
		t.Fatal(err)
	}
	if sent.Author.ID != srv.BotID() || !sent.Author.Bot {
		t.Errorf("author = %+v, want the bot", sent.Author)
	}
	got := srv.Messages(ch)
	if len(got) != 1 || got[0].Content != "done" || got[0].ID != sent.ID {
		t.Errorf("Messages = %+v", got)
	}
	// The bot's own message comes back over the gateway, as on Discord.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		own := false
		for _, m := range b.messages {
			own = own || m.ID == sent.ID
		}
		b.mu.Unlock()
		if own {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the bot's own MESSAGE_CREATE never came")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestIdentifyWithABadTokenIsClosed4004(t *testing.T) {
	srv := discordtest.New(t)
	b := newSession(t, srv, "Bot wrong")
	openClosedWith(t, b, 4004)
}

func TestResumeAfterADropReplaysMissedEvents(t *testing.T) {
	srv := discordtest.New(t)
	b := open(t, srv, allIntents)
	srv.DM("7", "one")
	b.waitMessages(t, 1)
	srv.Drop()
	srv.DM("7", "two")
	srv.DM("7", "three")
	got := b.waitMessages(t, 3)
	var texts []string
	for _, m := range got {
		texts = append(texts, m.Content)
	}
	if len(texts) != 3 || texts[1] != "two" || texts[2] != "three" {
		t.Errorf("messages = %q, want one two three", texts)
	}
	if srv.Resumes() != 1 || srv.Identifies() != 1 {
		t.Errorf("resumes %d identifies %d, want 1 1", srv.Resumes(), srv.Identifies())
	}
	srv.DM("7", "four")
	if got := b.waitMessages(t, 4); got[3].Content != "four" {
		t.Errorf("after resume: %q", got[3].Content)
	}
}

func TestReconnectResumes(t *testing.T) {
	srv := discordtest.New(t)
	b := open(t, srv, allIntents)
	srv.Reconnect()
	srv.DM("7", "after op 7")
	if got := b.waitMessages(t, 1); got[0].Content != "after op 7" {
		t.Errorf("got %q", got[0].Content)
	}
	waitFor(t, func() bool { return srv.Resumes() == 1 && srv.Connected() == 1 })
	if srv.Identifies() != 1 {
		t.Errorf("Identifies() = %d, want 1", srv.Identifies())
	}
}

func TestInvalidSessionIdentifiesAgain(t *testing.T) {
	srv := discordtest.New(t)
	b := open(t, srv, allIntents)
	srv.InvalidSession(false)
	waitFor(t, func() bool { return srv.Identifies() == 2 })
	srv.DM("7", "new session")
	if got := b.waitMessages(t, 1); got[0].Content != "new session" {
		t.Errorf("got %q", got[0].Content)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWithoutMessageContentOnlyMentionsAndDMsCarryText(t *testing.T) {
	srv := discordtest.New(t)
	srv.WithoutMessageContent()
	b := open(t, srv, allIntents)
	srv.Say("G1", "C1", "7", "hello all")
	srv.Say("G1", "C1", "7", "<@"+srv.BotID()+"> tidy")
	srv.DM("7", "private")
	got := b.waitMessages(t, 3)
	if got[0].Content != "" || got[1].Content == "" || got[2].Content != "private" {
		t.Errorf("contents = %q %q %q, want empty, mention, DM", got[0].Content, got[1].Content, got[2].Content)
	}
	if got[1].GuildID != "G1" || len(got[1].Mentions) != 1 || got[1].Mentions[0].ID != srv.BotID() {
		t.Errorf("mention = %+v", got[1].Message)
	}
}

func TestWithoutTheIntentRequestedContentIsEmpty(t *testing.T) {
	srv := discordtest.New(t)
	b := open(t, srv, discordgo.IntentsAllWithoutPrivileged)
	srv.Say("G1", "C1", "7", "hello all")
	if got := b.waitMessages(t, 1); got[0].Content != "" {
		t.Errorf("content = %q without MESSAGE_CONTENT", got[0].Content)
	}
}

func TestDisallowedIntentIsClosed4014(t *testing.T) {
	srv := discordtest.New(t)
	srv.WithoutMessageContent()
	srv.RefuseDisallowedIntents()
	b := newSession(t, srv, "Bot "+discordtest.Token)
	b.Identify.Intents = allIntents
	openClosedWith(t, b, 4014)
}

func TestHeartbeatsAreAcked(t *testing.T) {
	srv := discordtest.New(t)
	b := open(t, srv, allIntents)
	waitFor(t, func() bool { return srv.Heartbeats() == 1 }) // discordgo beats once at open
	srv.RequestHeartbeat()
	waitFor(t, func() bool { return srv.Heartbeats() == 2 })
	// discordgo records the op 11 under its lock.
	waitFor(t, func() bool {
		b.RLock()
		defer b.RUnlock()
		return !b.LastHeartbeatAck.IsZero() && !b.LastHeartbeatAck.Before(b.LastHeartbeatSent)
	})
}

func TestReplyMentionsTheRepliedAuthor(t *testing.T) {
	srv := discordtest.New(t)
	b := open(t, srv, discordgo.IntentsAllWithoutPrivileged)
	srv.AddChannel("G1", "C1")
	q, err := b.ChannelMessageSend("C1", "Which project?")
	if err != nil {
		t.Fatal(err)
	}
	srv.Reply("G1", "C1", "7", "Work", q.ID)
	m := b.waitMessages(t, 1)[0]
	if m.Type != discordgo.MessageTypeReply || m.MessageReference == nil || m.MessageReference.MessageID != q.ID ||
		m.ReferencedMessage == nil || m.ReferencedMessage.ID != q.ID || m.Content != "Work" {
		t.Errorf("reply = %+v", m.Message)
	}
}

func TestGuildsAreCreatedForTheState(t *testing.T) {
	srv := discordtest.New(t)
	srv.AddChannel("G1", "C1")
	b := open(t, srv, allIntents)
	waitFor(t, func() bool { _, err := b.State.Guild("G1"); return err == nil })
	srv.Say("G2", "C2", "7", "hi")
	b.waitMessages(t, 1)
	if _, err := b.State.Guild("G2"); err != nil {
		t.Errorf("GUILD_CREATE for a new guild: %v", err)
	}
}

func TestRedeliverSendsAnEventTwice(t *testing.T) {
	srv := discordtest.New(t)
	b := open(t, srv, allIntents)
	_, id := srv.DM("7", "once")
	b.waitMessages(t, 1)
	if !srv.Redeliver(id) {
		t.Fatal("Redeliver found nothing")
	}
	if got := b.waitMessages(t, 2); got[1].ID != id {
		t.Errorf("second delivery %+v", got[1].Message)
	}
	if srv.Redeliver("nope") {
		t.Error("Redeliver of an unknown id")
	}
}

func TestCloseCodeResumes(t *testing.T) {
	srv := discordtest.New(t)
	b := open(t, srv, allIntents)
	srv.CloseGateway(4000) // unknown error: reconnect and resume
	srv.DM("7", "after 4000")
	if got := b.waitMessages(t, 1); got[0].Content != "after 4000" {
		t.Errorf("got %q", got[0].Content)
	}
	waitFor(t, func() bool { return srv.Resumes() == 1 })
}

func TestResumableInvalidSession(t *testing.T) {
	srv := discordtest.New(t)
	b := open(t, srv, allIntents)
	srv.InvalidSession(true)
	// discordgo answers any op 9 with IDENTIFY (discordgo wsapi.go, onEvent).
	waitFor(t, func() bool { return srv.Identifies() == 2 && srv.Connected() == 1 })
	srv.DM("7", "x")
	b.waitMessages(t, 1)
}

func TestDispatchRawEvents(t *testing.T) {
	srv := discordtest.New(t)
	b := open(t, srv, allIntents)
	srv.Dispatch("SOMETHING_NEW", []byte(`{"x":1}`))
	srv.Dispatch("MESSAGE_CREATE", []byte(`{"id":"5","channel_id":"6","content":"raw","author":{"id":"7"},"timestamp":"2026-11-28T20:00:00.000000+00:00"}`))
	if got := b.waitMessages(t, 1); got[0].ID != "5" || got[0].Content != "raw" {
		t.Errorf("got %+v", got[0].Message)
	}
	// An unknown event does not end the session: a later DM arrives.
	srv.DM("7", "after")
	if got := b.waitMessages(t, 2); got[1].Content != "after" {
		t.Errorf("got %q", got[1].Content)
	}
}
