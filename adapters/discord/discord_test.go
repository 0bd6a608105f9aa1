package discord_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/discord"
	"github.com/tidybot/tidybot/adapters/discord/discordtest"
	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

const (
	guild = "900000000000000001"
	chanA = "900000000000000002"
	chanB = "900000000000000003"
	alice = "800000000000000001"
	bob   = "800000000000000002"
)

// handler stands in for the bot: it keeps every event, drops one seen
// before by its event id (as the store does), and fails the next fail
// calls (a store that is down).
type handler struct {
	mu    sync.Mutex
	got   []bot.Incoming
	seen  map[string]bool
	fail  int
	calls int
}

func (h *handler) Handle(_ context.Context, in bot.Incoming) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if h.fail > 0 {
		h.fail--
		return errors.New("store down")
	}
	if h.seen == nil {
		h.seen = map[string]bool{}
	}
	if h.seen[in.EventID] {
		return nil
	}
	h.seen[in.EventID] = true
	h.got = append(h.got, in)
	return nil
}

func (h *handler) events() []bot.Incoming {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]bot.Incoming(nil), h.got...)
}

func (h *handler) setFail(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fail = n
}

func (h *handler) callCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

// wait waits for n events and returns them.
func (h *handler) wait(t *testing.T, n int) []bot.Incoming {
	t.Helper()
	waitFor(t, "events", func() bool { return len(h.events()) >= n })
	return h.events()
}

func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// counter counts the adapter's events by outcome.
type counter struct {
	mu  sync.Mutex
	got map[string]int
}

func (c *counter) Event(platform, outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.got == nil {
		c.got = map[string]int{}
	}
	if platform == discord.Platform {
		c.got[outcome]++
	}
}

func (c *counter) n(outcome string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got[outcome]
}

// syncBuf is a log buffer safe for the adapter's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// config is an adapter's configuration against srv.
func config(srv *discordtest.Server, logs io.Writer) discord.Config {
	if logs == nil {
		logs = io.Discard
	}
	return discord.Config{Token: discordtest.Token, APIURL: srv.URL(), Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
}

// start connects an adapter to srv and runs its intake until the test
// ends, once the gateway is open and the commands are registered.
func start(t *testing.T, srv *discordtest.Server, cfg discord.Config) (*discord.Adapter, *handler) {
	t.Helper()
	a := newAdapter(t, cfg)
	h := run(t, a)
	if !srv.WaitReady() {
		t.Fatal("the adapter did not open the gateway")
	}
	waitFor(t, "the commands", func() bool { return len(srv.Commands()) > 0 })
	return a, h
}

// deferred waits for the adapter to take interaction id (the handler's
// event "i"+id) and to make its deferred response (type 5), and
// returns the event.
func deferred(t *testing.T, srv *discordtest.Server, h *handler, id string) bot.Incoming {
	t.Helper()
	var in bot.Incoming
	waitFor(t, "the interaction's event", func() bool {
		for _, ev := range h.events() {
			if ev.EventID == "i"+id {
				in = ev
				return true
			}
		}
		return false
	})
	waitFor(t, "the deferred response", func() bool { return srv.Interaction(id).Callback == 5 })
	return in
}

// newAdapter is an adapter with cfg, not yet running: alone it only
// posts, as a replica that runs a conversation another took in.
func newAdapter(t *testing.T, cfg discord.Config) *discord.Adapter {
	t.Helper()
	a, err := discord.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

// run runs a's intake into a new handler until the test ends.
func run(t *testing.T, a *discord.Adapter) *handler {
	t.Helper()
	h := &handler{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return h
}

func mention(srv *discordtest.Server, text string) string { return "<@" + srv.BotID() + "> " + text }

// A DM reaches the bot as a direct conversation, its answer goes back
// to the DM channel, and the message is acknowledged with the typing
// indicator.
func TestDMIsADirectConversation(t *testing.T) {
	srv := discordtest.New(t)
	a, h := start(t, srv, config(srv, nil))
	dm, id := srv.DM(alice, "tidy my inbox")
	in := h.wait(t, 1)[0]
	if !in.DM || in.ChatID != dm || in.UserID != alice || in.Text != "tidy my inbox" || in.MessageID != id || in.EventID != "m"+id || in.ThreadID != "" {
		t.Fatalf("incoming %+v", in)
	}
	if err := a.Ack(context.Background(), in.ChatID, in.MessageID); err != nil || srv.Typing(dm) != 1 {
		t.Fatalf("Ack: %v, typing %d", err, srv.Typing(dm))
	}
	got, err := a.Send(context.Background(), bot.Outgoing{ChatID: dm, UserID: alice, Text: "Moved 3 tasks."})
	if err != nil {
		t.Fatal(err)
	}
	ms := srv.Messages(dm)
	if len(ms) != 1 || ms[0].ID != got || ms[0].Content != "Moved 3 tasks." {
		t.Fatalf("messages %+v", ms)
	}
	if after, ok := a.After(got, id); !ok || !after {
		t.Errorf("After(answer, message) = %v, %v", after, ok)
	}
}

// In a server channel only a mention reaches the bot; it is answered in
// a thread started from it, and a mention inside that thread belongs to
// the same conversation. Without the Message Content intent the same
// holds: the unaddressed message's text is empty anyway.
func TestChannelsAnswerOnlyWhatIsAddressedToTheBot(t *testing.T) {
	for _, content := range []bool{true, false} {
		t.Run(map[bool]string{true: "content", false: "no content"}[content], func(t *testing.T) {
			srv := discordtest.New(t)
			if !content {
				srv.WithoutMessageContent()
			}
			a, h := start(t, srv, config(srv, nil))
			srv.Say(guild, chanA, alice, "lunch anyone?")
			id := srv.Say(guild, chanA, alice, mention(srv, "what's due today?"))
			in := h.wait(t, 1)[0]
			if in.DM || in.ChatID != chanA || in.ThreadID != id || in.Text != "what's due today?" || in.TeamID != guild || in.UserID != alice {
				t.Fatalf("incoming %+v", in)
			}
			ans, err := a.Send(context.Background(), bot.Outgoing{ChatID: in.ChatID, ThreadID: in.ThreadID, UserID: alice, Text: "Two tasks."})
			if err != nil {
				t.Fatal(err)
			}
			th := srv.Threads()
			if len(th) != 1 || th[0].ID != id || th[0].ParentID != chanA || th[0].Name != "what's due today?" {
				t.Fatalf("threads %+v", th)
			}
			if ms := srv.Messages(id); len(ms) != 1 || ms[0].ID != ans {
				t.Fatalf("thread messages %+v", ms)
			}
			if ms := srv.Messages(chanA); len(ms) != 0 {
				t.Fatalf("channel messages %+v, want none (the answer is in the thread)", ms)
			}
			// In the thread: unaddressed is ignored, a mention continues the conversation.
			srv.Say(guild, id, alice, "thanks all")
			srv.Say(guild, id, bob, mention(srv, "and mine?"))
			ev := h.wait(t, 2)
			if len(ev) != 2 || ev[1].ChatID != chanA || ev[1].ThreadID != id || ev[1].UserID != bob || ev[1].Text != "and mine?" {
				t.Fatalf("events %+v", ev)
			}
			if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, ThreadID: id, UserID: bob, Text: "Yours too."}); err != nil {
				t.Fatal(err)
			}
			if len(srv.Threads()) != 1 || len(srv.Messages(id)) != 2 {
				t.Fatalf("threads %+v, messages %+v", srv.Threads(), srv.Messages(id))
			}
		})
	}
}

// A reply to one of the bot's messages addresses it (the reply pings
// the bot): it reaches the bot without a written mention.
func TestGroupQuestionAsksForAReply(t *testing.T) {
	srv := discordtest.New(t)
	a, h := start(t, srv, config(srv, nil))
	srv.AddChannel(guild, chanA)
	q, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, Text: "Which project?", Question: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Reply(guild, chanA, alice, "Home", q)
	in := h.wait(t, 1)[0]
	if in.Text != "Home" || in.ChatID != chanA || in.UserID != alice {
		t.Fatalf("incoming %+v", in)
	}
}

// The bot's own messages and other bots' never reach it.
func TestOwnMessagesAreDropped(t *testing.T) {
	srv := discordtest.New(t)
	a, h := start(t, srv, config(srv, nil))
	dm, _ := srv.DM(alice, "one")
	h.wait(t, 1)
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: dm, Text: "answer"}); err != nil {
		t.Fatal(err)
	}
	srv.DM(alice, "two")
	h.wait(t, 2)
	time.Sleep(100 * time.Millisecond) // nothing more comes
	if ev := h.events(); len(ev) != 2 || ev[1].Text != "two" {
		t.Fatalf("events %+v", ev)
	}
}

// A slash command is stored, answered with a deferred response, and the
// bot's first message for that event (Outgoing.EventID) replaces the
// "thinking"; its edits go through the interaction's token, and later
// messages to the channel. A message of another event to the same
// person there (a run already going) does not take it.
func TestSlashCommand(t *testing.T) {
	srv := discordtest.New(t)
	a, h := start(t, srv, config(srv, nil))
	id := srv.Command(alice, guild, chanA, "tidy-inbox", map[string]string{"text": "only work"})
	in := h.wait(t, 1)[0]
	if in.Command != "tidy-inbox" || in.Text != "only work" || in.ChatID != chanA || in.ThreadID != "" || in.EventID != "i"+id || in.UserID != alice || in.DM {
		t.Fatalf("incoming %+v", in)
	}
	waitFor(t, "the deferred response", func() bool { return srv.Interaction(id).Callback == 5 })
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, UserID: alice, EventID: "m1", Text: "An earlier run's answer"}); err != nil {
		t.Fatal(err)
	}
	if st := srv.Interaction(id); st.Original != nil && st.Original.Content != "" {
		t.Fatalf("another event's message answered the command: %+v", st.Original)
	}
	status, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, UserID: alice, EventID: in.EventID, Text: "🤔 Working on it…"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Edit(context.Background(), status, bot.Outgoing{ChatID: chanA, UserID: alice, Text: "Moved 9 tasks."}); err != nil {
		t.Fatal(err)
	}
	st := srv.Interaction(id)
	if st.Original == nil || st.Original.ID != status || st.Original.Content != "Moved 9 tasks." || len(st.Refused) != 0 || st.Ephemeral {
		t.Fatalf("interaction %+v", st)
	}
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, UserID: alice, EventID: in.EventID, Text: "Anything else?"}); err != nil {
		t.Fatal(err)
	}
	if st := srv.Interaction(id); len(st.Refused) != 0 {
		t.Fatalf("refused %v", st.Refused)
	}
	// A command typed in the channel that acts on a conversation in a
	// thread (/undo): its answer, naming the thread, replaces its "thinking".
	uid := srv.Command(alice, guild, chanA, "undo", nil)
	deferred(t, srv, h, uid)
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, ThreadID: "900000000000000099", UserID: alice, EventID: "i" + uid, Text: "Undid the last run."}); err != nil {
		t.Fatal(err)
	}
	if st := srv.Interaction(uid); st.Original == nil || st.Original.Content != "Undid the last run." {
		t.Fatalf("/undo's interaction %+v", st)
	}
	// A command in a DM.
	cid := srv.Command(bob, "", "", "help", nil)
	in = deferred(t, srv, h, cid)
	if in.Command != "help" || !in.DM || in.ChatID != srv.DMChannel(bob) {
		t.Fatalf("incoming %+v", in)
	}
	answersInPlace(t, a, srv, cid, in, "What I can do: …")
}

// answersInPlace sends text for command in (interaction id) and checks
// that it replaced the command's "thinking".
func answersInPlace(t *testing.T, a *discord.Adapter, srv *discordtest.Server, id string, in bot.Incoming, text string) {
	t.Helper()
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: in.ChatID, UserID: in.UserID, EventID: in.EventID, Text: text}); err != nil {
		t.Fatal(err)
	}
	if st := srv.Interaction(id); st.Original == nil || st.Original.Content != text {
		t.Fatalf("interaction %+v, want %q in place of the thinking", st, text)
	}
}

// Every command the bot has, in both modes, is registered under the name
// CommandName spells, and read back as that command.
func TestCommandNamesRoundTrip(t *testing.T) {
	srv := discordtest.New(t)
	cfg := config(srv, nil)
	cfg.Team = true
	a, h := start(t, srv, cfg)
	registered := map[string]bool{}
	for _, c := range srv.Commands() {
		registered[c.Name] = true
		if c.Type != 1 || c.Description == "" {
			t.Errorf("command %+v", c)
		}
	}
	for i, c := range bot.Commands(true) {
		typed := strings.TrimPrefix(a.CommandName(c.Name), "/")
		if !registered[typed] {
			t.Errorf("%s is not registered as %q", c.Name, typed)
			continue
		}
		srv.Command(alice, "", "", typed, nil)
		if in := h.wait(t, i+1)[i]; in.Command != c.Name {
			t.Errorf("%q read back as %q", typed, in.Command)
		}
	}
	if len(registered) != len(bot.Commands(true)) {
		t.Errorf("registered %v, want the %d commands", registered, len(bot.Commands(true)))
	}
}

// DISCORD_GUILD_ID registers the commands in that server only.
func TestSetupRegistersCommandsInTheGuild(t *testing.T) {
	srv := discordtest.New(t)
	cfg := config(srv, nil)
	cfg.GuildID = guild
	start(t, srv, cfg)
	for _, c := range srv.Commands() {
		if c.GuildID != guild {
			t.Fatalf("command %+v registered outside %s", c, guild)
		}
	}
}

// Buttons go under the last part; the right person's press is stored
// and answered with a deferred update; the wrong person's press gets
// the bot's text as a message only they see.
func TestButtonsByTheRightAndTheWrongPerson(t *testing.T) {
	srv := discordtest.New(t)
	a, h := start(t, srv, config(srv, nil))
	srv.AddChannel(guild, chanA)
	q, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, UserID: alice, Text: "Delete 3 tasks?", Question: true,
		Buttons: []bot.Button{{Label: "Yes, delete", Data: "c:k1:yes"}, {Label: "No", Data: "c:k1:no"}}})
	if err != nil {
		t.Fatal(err)
	}
	ms := srv.Messages(chanA)
	if len(ms) != 1 || len(ms[0].Rows) != 1 || len(ms[0].Rows[0]) != 2 || ms[0].Rows[0][0].CustomID != "c:k1:yes" || ms[0].Rows[0][0].Label != "Yes, delete" {
		t.Fatalf("message %+v", ms)
	}
	right := srv.Press(alice, chanA, q, "c:k1:yes")
	in := h.wait(t, 1)[0]
	if in.Button != "c:k1:yes" || in.ButtonRef != right+"/"+alice || in.UserID != alice || in.MessageID != q || in.ChatID != chanA || in.EventID != "i"+right {
		t.Fatalf("incoming %+v", in)
	}
	waitFor(t, "the deferred update", func() bool { return srv.Interaction(right).Callback == 6 })
	if err := a.AnswerButton(context.Background(), in.ButtonRef, ""); err != nil {
		t.Fatal(err)
	}
	wrong := srv.Press(bob, chanA, q, "c:k1:no")
	in = h.wait(t, 2)[1]
	if err := a.AnswerButton(context.Background(), in.ButtonRef, "Only the person who asked can answer."); err != nil {
		t.Fatal(err)
	}
	st := srv.Interaction(wrong)
	if st.Callback != 6 || len(st.Followups) != 1 || st.Followups[0].Content != "Only the person who asked can answer." || st.Followups[0].Flags&64 == 0 {
		t.Fatalf("wrong person's press %+v", st)
	}
	if st := srv.Interaction(right); len(st.Followups) != 0 || len(st.Refused) != 0 {
		t.Fatalf("right person's press %+v", st)
	}
	// The bot settles the question: the buttons go.
	if err := a.Edit(context.Background(), q, bot.Outgoing{ChatID: chanA, Text: "Deleted 3 tasks."}); err != nil {
		t.Fatal(err)
	}
	if ms := srv.Messages(chanA); ms[0].Content != "Deleted 3 tasks." || len(ms[0].Rows) != 0 {
		t.Fatalf("message %+v", ms[0])
	}
}

// An answer press whose token this process never had (a restart) has
// nothing to answer: no error, no call.
func TestAnswerButtonWithoutItsPress(t *testing.T) {
	srv := discordtest.New(t)
	a := newAdapter(t, config(srv, nil))
	for _, ref := range []string{"123/" + alice, "123"} {
		if err := a.AnswerButton(context.Background(), ref, "Only the person who asked can answer."); err != nil {
			t.Fatal(err)
		}
	}
}

// A long answer is split at 2,000 characters on line or word
// boundaries, its buttons under the last part.
func TestSendSplitsAndPutsButtonsLast(t *testing.T) {
	srv := discordtest.New(t)
	a := newAdapter(t, config(srv, nil))
	dm := srv.DMChannel(alice)
	text := strings.Repeat("word ", 600) // 3,000 characters
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: dm, Text: text, Buttons: []bot.Button{{Label: "↩️ Undo", Data: "u:r1", Command: "undo"}}}); err != nil {
		t.Fatal(err)
	}
	ms := srv.Messages(dm)
	if len(ms) != 2 {
		t.Fatalf("%d messages, want 2", len(ms))
	}
	var joined []string
	for i, m := range ms {
		if n := len([]rune(m.Content)); n > 2000 || n == 0 {
			t.Errorf("part %d has %d characters", i, n)
		}
		if (len(m.Rows) > 0) != (i == len(ms)-1) {
			t.Errorf("part %d rows %v", i, m.Rows)
		}
		joined = append(joined, m.Content)
	}
	if strings.Join(strings.Fields(strings.Join(joined, " ")), " ") != strings.TrimSpace(text) {
		t.Error("the parts do not make the text")
	}
	if a.MaxText() != 6000 {
		t.Errorf("MaxText %d", a.MaxText())
	}
}

// The longest answer the bot gives (MaxText) is at most three messages,
// and an edit longer than one keeps its end.
func TestEditLongerThanOnePartKeepsTheEnd(t *testing.T) {
	srv := discordtest.New(t)
	a := newAdapter(t, config(srv, nil))
	dm := srv.DMChannel(alice)
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: dm, Text: strings.Repeat("é", a.MaxText())}); err != nil || len(srv.Messages(dm)) != 3 {
		t.Fatalf("send: %v, %d messages", err, len(srv.Messages(dm)))
	}
	id, err := a.Send(context.Background(), bot.Outgoing{ChatID: dm, Text: "start"})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("line of progress\n", 200) + "the end"
	if err := a.Edit(context.Background(), id, bot.Outgoing{ChatID: dm, Text: long}); err != nil {
		t.Fatal(err)
	}
	ms := srv.Messages(dm)
	last := ms[len(ms)-1]
	if !strings.HasSuffix(last.Content, "the end") || len([]rune(last.Content)) > 2000 {
		t.Fatalf("edited to %d characters ending %q", len([]rune(last.Content)), last.Content[max(0, len(last.Content)-20):])
	}
}

// A 429 is returned to the send queue as bot.RateLimited at once; the
// same channel's next call is held back without a request, while
// another channel goes on.
func TestRateLimitGoesToTheQueue(t *testing.T) {
	srv := discordtest.New(t)
	a := newAdapter(t, config(srv, nil))
	srv.AddChannel(guild, chanA)
	srv.AddChannel(guild, chanB)
	srv.RateLimit("POST /channels/"+chanA+"/messages", 1)
	_, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, Text: "one"})
	var rl bot.RateLimited
	if !errors.As(err, &rl) || rl.RetryAfter() <= 0 {
		t.Fatalf("err = %v, want bot.RateLimited", err)
	}
	before := srv.Requests("POST /channels/" + chanA + "/messages")
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, Text: "two"}); !errors.As(err, &rl) {
		t.Fatalf("second send: %v, want bot.RateLimited while the bucket is spent", err)
	}
	if n := srv.Requests("POST /channels/" + chanA + "/messages"); n != before {
		t.Errorf("%d requests while the bucket was spent, want none", n-before)
	}
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanB, Text: "other"}); err != nil {
		t.Fatalf("another channel: %v", err)
	}
	if ms := srv.Messages(chanB); len(ms) != 1 {
		t.Fatalf("channel B %+v", ms)
	}
	time.Sleep(rl.RetryAfter())
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, Text: "one"}); err != nil {
		t.Fatalf("after the wait: %v", err)
	}
}

// A refused token names DISCORD_BOT_TOKEN and never shows it; Discord
// out of reach is agent.ErrUnreachable, which serve waits out.
func TestTokenNeverInErrors(t *testing.T) {
	srv := discordtest.New(t)
	cfg := config(srv, nil)
	cfg.Token = "not-the-token-0123456789"
	_, err := discord.New(cfg)
	if err == nil || !strings.Contains(err.Error(), "DISCORD_BOT_TOKEN") || strings.Contains(err.Error(), cfg.Token) {
		t.Fatalf("err = %v", err)
	}
	if unreachable(err) {
		t.Errorf("a refused token is not the network: %v", err)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	cfg.APIURL = closed.URL
	_, err = discord.New(cfg)
	if !unreachable(err) || strings.Contains(err.Error(), cfg.Token) {
		t.Fatalf("err = %v, want agent.ErrUnreachable", err)
	}
}

// The gateway does not redeliver: an event whose Handle failed is tried
// again until stored, and the chat's later events wait behind it, in
// order.
func TestAnEventItCouldNotStoreIsTriedAgain(t *testing.T) {
	srv := discordtest.New(t)
	_, h := start(t, srv, config(srv, nil))
	h.setFail(3)
	srv.DM(alice, "first")
	srv.DM(alice, "second")
	ev := h.wait(t, 2)
	if ev[0].Text != "first" || ev[1].Text != "second" {
		t.Fatalf("events %+v", ev)
	}
	if h.callCount() != 5 {
		t.Errorf("%d calls, want 3 failures and 2 stores", h.callCount())
	}
}

// After a dropped connection the adapter RESUMEs and gets what was sent
// meanwhile; an event delivered twice has one event id, so it is stored
// once.
func TestReconnectResumesAndLosesNothing(t *testing.T) {
	srv := discordtest.New(t)
	_, h := start(t, srv, config(srv, nil))
	srv.DM(alice, "before")
	h.wait(t, 1)
	srv.Drop()
	_, during := srv.DM(alice, "during")
	waitFor(t, "the resume", func() bool { return srv.Resumes() >= 1 })
	ev := h.wait(t, 2)
	if ev[1].Text != "during" {
		t.Fatalf("events %+v", ev)
	}
	if !srv.Redeliver(during) {
		t.Fatal("nothing to redeliver")
	}
	srv.Reconnect()
	srv.DM(alice, "after")
	ev = h.wait(t, 3)
	if len(ev) != 3 || ev[2].Text != "after" || srv.Identifies() != 1 {
		t.Fatalf("events %+v, identifies %d", ev, srv.Identifies())
	}
	if h.callCount() != 4 {
		t.Errorf("Handle called %d times, want 4 (the redelivered message once more, dropped by its id)", h.callCount())
	}
}

// An interaction the gateway sends twice is answered once.
func TestAnInteractionIsAnsweredOnce(t *testing.T) {
	srv := discordtest.New(t)
	_, h := start(t, srv, config(srv, nil))
	id := srv.Command(alice, "", "", "usage", nil)
	deferred(t, srv, h, id)
	srv.Redeliver(id)
	srv.DM(alice, "next")
	h.wait(t, 2)
	if st := srv.Interaction(id); len(st.Refused) != 0 {
		t.Fatalf("answered again: %v", st.Refused)
	}
}

// An interaction that cannot be stored within Discord's 3 s gets an
// ephemeral "try again" and nothing is kept of it.
func TestAnInteractionItCouldNotStoreAsksToTryAgain(t *testing.T) {
	srv := discordtest.New(t)
	_, h := start(t, srv, config(srv, nil))
	h.setFail(1000)
	id := srv.Command(alice, "", "", "help", nil)
	waitFor(t, "the answer", func() bool { return srv.Interaction(id).Callback != 0 })
	st := srv.Interaction(id)
	if st.Callback != 4 || !st.Ephemeral || st.Original == nil || !strings.Contains(st.Original.Content, "try again") {
		t.Fatalf("interaction %+v", st)
	}
	if len(h.events()) != 0 {
		t.Fatalf("events %+v", h.events())
	}
}

// Interactions over HTTP: a request whose signature does not verify is
// 401 and reaches nobody; a PING gets its PONG; a command is stored and
// answered with the deferred response.
func TestSignatureIsCheckedBeforeTheBody(t *testing.T) {
	srv := discordtest.New(t)
	cfg := config(srv, nil)
	cfg.PublicKey = hexKey(srv)
	a, h := start(t, srv, cfg)
	mux := http.NewServeMux()
	if err := a.Routes(mux, h); err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(mux)
	defer web.Close()
	url := web.URL + "/discord/interactions"
	if status, err := srv.PostForged(url, []byte(`{"type":2,"id":"1"}`)); err != nil || status != http.StatusUnauthorized {
		t.Fatalf("forged: %d, %v", status, err)
	}
	if status, err := srv.PostForged(url, []byte(`not json`)); err != nil || status != http.StatusUnauthorized {
		t.Fatalf("forged garbage: %d, %v", status, err)
	}
	if ok, err := srv.Ping(url); err != nil || !ok {
		t.Fatalf("ping: %v, %v", ok, err)
	}
	srv.SetInteractionsEndpoint(url)
	id := srv.Command(alice, "", "", "help", nil)
	in := h.wait(t, 1)[0]
	if in.Command != "help" || in.EventID != "i"+id {
		t.Fatalf("incoming %+v", in)
	}
	if st := srv.Interaction(id); st.Callback != 5 {
		t.Fatalf("interaction %+v", st)
	}
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: in.ChatID, UserID: alice, EventID: in.EventID, Text: "Help text"}); err != nil {
		t.Fatal(err)
	}
	if st := srv.Interaction(id); st.Original == nil || st.Original.Content != "Help text" {
		t.Fatalf("interaction %+v", st)
	}
	resp, err := srv.PostInteraction(url, []byte(`{"type":`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("signed garbage: %d, want 400", resp.StatusCode)
	}
}

// A bad DISCORD_PUBLIC_KEY is refused when routes are registered.
func TestRoutesRefuseABadPublicKey(t *testing.T) {
	srv := discordtest.New(t)
	cfg := config(srv, nil)
	cfg.PublicKey = "not-hex"
	a := newAdapter(t, cfg)
	if err := a.Routes(http.NewServeMux(), &handler{}); err == nil || !strings.Contains(err.Error(), "DISCORD_PUBLIC_KEY") {
		t.Fatalf("err = %v", err)
	}
}

func unreachable(err error) bool {
	var ae *agent.Error
	return errors.As(err, &ae) && ae.Code == agent.ErrUnreachable
}

func hexKey(srv *discordtest.Server) string { return hex.EncodeToString(srv.PublicKey()) }

func TestAfterOrdersBySnowflake(t *testing.T) {
	var a discord.Adapter
	for _, c := range []struct {
		x, y      string
		after, ok bool
	}{
		{"175928847299117063", "175928847299117062", true, true},
		{"175928847299117062", "1175928847299117063", false, true},
		{"", "1", false, false},
		{"abc", "1", false, false},
	} {
		if after, ok := a.After(c.x, c.y); after != c.after || ok != c.ok {
			t.Errorf("After(%s, %s) = %v, %v", c.x, c.y, after, ok)
		}
	}
}

func TestAllowedID(t *testing.T) {
	for _, c := range []struct {
		id   string
		team bool
		ok   bool
	}{
		{"123456789012345678", false, true},
		{"alice", false, false},
		{"@alice", false, false},
		{"12", false, false},
		{"*", false, false},
		{"*", true, true},
		{"team:123456789012345678", true, true},
		{"team:123456789012345678", false, false},
		{"team:abc", true, false},
		{"guild:123456789012345678", true, false},
	} {
		if err := discord.AllowedID(c.id, c.team); (err == nil) != c.ok {
			t.Errorf("AllowedID(%q, %v) = %v", c.id, c.team, err)
		}
	}
}

// Events the adapter cannot read (a malformed MESSAGE_CREATE, one with
// no author, an unknown event) are skipped, logged, and hold up nothing.
func TestUndecodableEventsAreSkipped(t *testing.T) {
	srv := discordtest.New(t)
	logs := &syncBuf{}
	cfg := config(srv, logs)
	counted := &counter{}
	cfg.Events = counted
	_, h := start(t, srv, cfg)
	srv.Dispatch("MESSAGE_CREATE", []byte(`{"id":"1","channel_id":42,"content":{"not":"text"}}`))
	srv.Dispatch("INTERACTION_CREATE", []byte(`{"id":"5","type":"two"}`))
	srv.Dispatch("MESSAGE_CREATE", []byte(`{"id":"2","channel_id":"3","content":"no author"}`))
	srv.Dispatch("SOMETHING_NEW", []byte(`{"id":"4"}`))
	srv.DM(alice, "still here")
	h.wait(t, 1)
	time.Sleep(50 * time.Millisecond) // nothing more comes
	if ev := h.events(); len(ev) != 1 || ev[0].Text != "still here" {
		t.Fatalf("events %+v", ev)
	}
	if !strings.Contains(logs.String(), "does not decode") {
		t.Errorf("the malformed event was not logged:\n%s", logs.String())
	}
	if n := counted.n("undecodable"); n != 2 {
		t.Errorf("%d undecodable events counted, want 2", n)
	}
	if strings.Contains(logs.String(), discordtest.Token) {
		t.Errorf("the logs show the token:\n%s", logs.String())
	}
}

// An outbox entry posted again (its first answer lost, a restart) within
// Discord's nonce window is not posted twice: each part carries a nonce
// with enforce_nonce, and Discord returns the first post.
func TestResendPostsAnEntryOnce(t *testing.T) {
	srv := discordtest.New(t)
	a := newAdapter(t, config(srv, nil))
	dm := srv.DMChannel(alice)
	m := bot.Outgoing{ChatID: dm, Ref: "outbox-entry-1", Text: strings.Repeat("word ", 600)}
	first, err := a.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.Resend(context.Background(), m, time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if ms := srv.Messages(dm); len(ms) != 2 || again != first {
		t.Fatalf("%d messages, ids %s and %s: want the two parts once", len(ms), first, again)
	}
	other := m
	other.Ref, other.Text = "outbox-entry-2", "another answer"
	if _, err := a.Resend(context.Background(), other, time.Now()); err != nil || len(srv.Messages(dm)) != 3 {
		t.Fatalf("another entry: %v, %d messages", err, len(srv.Messages(dm)))
	}
}

// A voice message or a photo reaches the bot as an attachment, which
// Download fetches from its CDN address (the fake's here), within the
// limit.
func TestIncomingMediaAndDownload(t *testing.T) {
	srv := discordtest.New(t)
	srv.AttachmentsOnFake()
	a, h := start(t, srv, config(srv, nil))
	voice := []byte("OggS fake voice")
	srv.DMFiles(alice, "", discordtest.File{Name: "voice-message.ogg", ContentType: "audio/ogg", Data: voice})
	srv.SayFiles(guild, chanA, alice, mention(srv, "file this"), discordtest.File{Name: "receipt.png", ContentType: "image/png", Data: []byte("png")})
	srv.DMFiles(alice, "", discordtest.File{Name: "notes.pdf", ContentType: "application/pdf", Data: []byte("pdf")})
	// The DM and the server channel are two chats, handled side by side:
	// their events may reach the bot in either order.
	ev := h.wait(t, 2)
	if !ev[0].DM {
		ev[0], ev[1] = ev[1], ev[0]
	}
	if at := ev[0].Attachment; at == nil || at.Kind != bot.AttachVoice || at.MIME != "audio/ogg" || at.Name != "voice-message.ogg" {
		t.Fatalf("voice %+v", ev[0])
	}
	if at := ev[1].Attachment; at == nil || at.Kind != bot.AttachImage || ev[1].Text != "file this" {
		t.Fatalf("image %+v", ev[1])
	}
	got, err := a.Download(context.Background(), *ev[0].Attachment, bot.MaxFileBytes)
	if err != nil || string(got) != string(voice) {
		t.Fatalf("Download: %q, %v", got, err)
	}
	if _, err := a.Download(context.Background(), *ev[0].Attachment, 4); !errors.Is(err, bot.ErrFileTooLarge) {
		t.Fatalf("Download over the limit: %v", err)
	}
	if _, err := a.Download(context.Background(), bot.Attachment{Ref: "https://example.com/x.ogg", Name: "x.ogg"}, 100); err == nil {
		t.Fatal("Download fetched from a host that is not Discord's")
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(h.events()); n != 2 {
		t.Fatalf("%d events: a PDF alone is no message for the bot", n)
	}
}

// After a restart (an adapter that learnt nothing yet) the bot's posts
// and edits of a conversation still go to its thread.
func TestThreadAfterARestart(t *testing.T) {
	srv := discordtest.New(t)
	_, h := start(t, srv, config(srv, nil))
	id := srv.Say(guild, chanA, alice, mention(srv, "hello"))
	in := h.wait(t, 1)[0]
	fresh := newAdapter(t, config(srv, nil))
	first, err := fresh.Send(context.Background(), bot.Outgoing{ChatID: in.ChatID, ThreadID: in.ThreadID, Text: "one"})
	if err != nil {
		t.Fatal(err)
	}
	again := newAdapter(t, config(srv, nil))
	if _, err := again.Send(context.Background(), bot.Outgoing{ChatID: in.ChatID, ThreadID: in.ThreadID, Text: "two"}); err != nil {
		t.Fatal(err)
	}
	if err := again.Edit(context.Background(), first, bot.Outgoing{ChatID: in.ChatID, ThreadID: in.ThreadID, Text: "one, edited"}); err != nil {
		t.Fatal(err)
	}
	ms := srv.Messages(id)
	if len(srv.Threads()) != 1 || len(ms) != 2 || ms[0].Content != "one, edited" || ms[1].Content != "two" {
		t.Fatalf("threads %+v, messages %+v", srv.Threads(), ms)
	}
}

// Slash commands Discord refuses to register (a server the bot is not
// in) are logged with what to check, and messages are still taken.
func TestCommandsRefusedStillServesMessages(t *testing.T) {
	srv := discordtest.New(t)
	logs := &syncBuf{}
	cfg := config(srv, logs)
	srv.Fail("PUT /applications/{app}/commands", 403, 1)
	h := run(t, newAdapter(t, cfg))
	waitFor(t, "the log line", func() bool { return strings.Contains(logs.String(), "slash commands are not registered") })
	srv.DM(alice, "hello")
	if in := h.wait(t, 1)[0]; in.Text != "hello" {
		t.Fatalf("incoming %+v", in)
	}
}

// The Details link is a link button for its person in their DM; in a
// server channel, where anyone could open it, it is left out.
func TestDetailsLinkOnlyForTheAsker(t *testing.T) {
	srv := discordtest.New(t)
	a, h := start(t, srv, config(srv, nil))
	dm, _ := srv.DM(alice, "hi")
	h.wait(t, 1)
	link := &bot.Link{Label: "Details", URL: "https://tidybot.example.com/runs/r1?sig=x", UserID: alice}
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: dm, UserID: alice, Text: "Done.", Link: link,
		Buttons: []bot.Button{{Label: "👍", Data: "f:r1:g", Feedback: "good"}}}); err != nil {
		t.Fatal(err)
	}
	m := srv.Messages(dm)[0]
	if len(m.Rows) != 1 || len(m.Rows[0]) != 2 || m.Rows[0][1].URL != link.URL || m.Rows[0][1].Style != 5 {
		t.Fatalf("DM message rows %+v", m.Rows)
	}
	srv.AddChannel(guild, chanA)
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, UserID: alice, Text: "Done.", Link: link}); err != nil {
		t.Fatal(err)
	}
	if m := srv.Messages(chanA)[0]; len(m.Rows) != 0 || strings.Contains(m.Content, link.URL) {
		t.Fatalf("channel message %+v shows the link", m)
	}
}

// In team mode a DM names the servers its sender shares with the bot
// (bot.Incoming.SharedTeams: a DM carries no server, and a whole server
// may be allowed), asked of Discord (GET /guilds/{id}/members/{user});
// a server the person is not in is not named, and personal mode asks
// nothing.
func TestDMNamesTheServersItsSenderShares(t *testing.T) {
	srv := discordtest.New(t)
	const other = "200000000000000009"
	srv.Join(guild, alice)
	srv.AddChannel(other, "300000000000000009")
	cfg := config(srv, nil)
	cfg.Team = true
	_, h := start(t, srv, cfg)
	srv.DM(alice, "hi")
	srv.DM(bob, "hi")
	ev := h.wait(t, 2) // two chats: in either order
	if ev[0].UserID != alice {
		ev[0], ev[1] = ev[1], ev[0]
	}
	if !ev[0].DM || len(ev[0].SharedTeams) != 1 || ev[0].SharedTeams[0] != guild {
		t.Errorf("Alice's DM names servers %v, want [%s]", ev[0].SharedTeams, guild)
	}
	if len(ev[1].SharedTeams) != 0 {
		t.Errorf("Bob's DM names servers %v, want none", ev[1].SharedTeams)
	}

	srv2 := discordtest.New(t)
	srv2.Join(guild, alice)
	_, h2 := start(t, srv2, config(srv2, nil))
	srv2.DM(alice, "hi")
	if ev := h2.wait(t, 1); len(ev[0].SharedTeams) != 0 {
		t.Errorf("personal mode: the DM names servers %v", ev[0].SharedTeams)
	}
}

// An edit's 429 holds back the next edit of that channel, and a command
// answer's 429 the next webhook edit, at once as bot.RateLimited:
// discordgo keeps one bucket per channel for message edits and one for
// every webhook message edit (discordgo restapi.go,
// ChannelMessageEditComplex and WebhookMessageEdit), and would sleep in
// its rate limiter, inside the send queue, until that bucket resets.
func TestEditRateLimitGoesToTheQueue(t *testing.T) {
	srv := discordtest.New(t)
	srv.SetRetryAfter(3 * time.Second)
	a, h := start(t, srv, config(srv, nil))
	srv.AddChannel(guild, chanA)
	one, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, Text: "one"})
	if err != nil {
		t.Fatal(err)
	}
	two, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, Text: "two"})
	if err != nil {
		t.Fatal(err)
	}
	srv.RateLimit("PATCH /channels/"+chanA+"/messages/"+one, 1)
	var rl bot.RateLimited
	if err := a.Edit(context.Background(), one, bot.Outgoing{ChatID: chanA, Text: "one, edited"}); !errors.As(err, &rl) {
		t.Fatalf("edit: %v, want bot.RateLimited", err)
	}
	if err := a.Edit(context.Background(), two, bot.Outgoing{ChatID: chanA, Text: "two, edited"}); !errors.As(err, &rl) {
		t.Fatalf("the channel's next edit: %v, want bot.RateLimited while its bucket is spent (not a wait)", err)
	}

	// A command's answer (the edit of its @original) and an edit through
	// another command's token share discordgo's webhook-edit bucket.
	first := srv.Command(alice, guild, chanA, "help", nil)
	second := srv.Command(bob, guild, chanA, "help", nil)
	byUser := map[string]bot.Incoming{alice: deferred(t, srv, h, first), bob: deferred(t, srv, h, second)}
	srv.RateLimit("PATCH /webhooks/{app}/{token}/messages/{message}", 1)
	in := byUser[alice]
	_, err = a.Send(context.Background(), bot.Outgoing{ChatID: in.ChatID, UserID: alice, EventID: in.EventID, Text: "help for alice"})
	if !errors.As(err, &rl) {
		t.Fatalf("answer: %v, want bot.RateLimited", err)
	}
	// discordgo's RateLimitError names the URL, the interaction's token in it.
	if tok := srv.Interaction(first).Token; tok == "" || strings.Contains(err.Error(), tok) || !strings.Contains(err.Error(), "<token>") {
		t.Errorf("the 429's error shows the interaction's token: %v", err)
	}
	in = byUser[bob]
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: in.ChatID, UserID: bob, EventID: in.EventID, Text: "help for bob"}); !errors.As(err, &rl) {
		t.Fatalf("the next webhook edit: %v, want bot.RateLimited while its bucket is spent (not a wait)", err)
	}
}

// A command's answer that went in place of its "thinking" and is posted
// again (its record lost: the outbox's delivery after a restart, with
// the tokens in PostgreSQL) edits that reply again, the same edit, and
// is not posted a second time in the channel: the token already used by
// that run is taken once more for its Resend.
func TestResendAnswersTheCommandInPlace(t *testing.T) {
	srv := discordtest.New(t)
	a, h := start(t, srv, config(srv, nil))
	id, m := resendCommandAnswer(t, srv, a, h, func() *discord.Adapter { return a })
	if st := srv.Interaction(id); st.Original == nil || st.Original.Content != "Moved 9 tasks." {
		t.Fatalf("interaction %+v", st)
	}
	// Another run of alice's never takes that token.
	other := m
	other.RunID, other.Ref, other.Text = "r2", "outbox-entry-2", "Another run's answer"
	if _, err := a.Resend(context.Background(), other, time.Now()); err != nil {
		t.Fatal(err)
	}
	if st := srv.Interaction(id); st.Original.Content != "Moved 9 tasks." {
		t.Fatalf("another run's answer replaced the command's: %+v", st.Original)
	}
}

// resendCommandAnswer: a (its events in h) answers alice's /tidy-inbox
// in place of its thinking; then the adapter resender gives (a itself,
// or the process after a restart) posts that answer again, its record
// lost: the same message must come back, not a second copy. It returns
// the interaction's id and the answer.
func resendCommandAnswer(t *testing.T, srv *discordtest.Server, a *discord.Adapter, h *handler, resender func() *discord.Adapter) (string, bot.Outgoing) {
	t.Helper()
	id := srv.Command(alice, guild, chanA, "tidy-inbox", nil)
	in := deferred(t, srv, h, id)
	m := bot.Outgoing{ChatID: chanA, UserID: alice, RunID: "r1", EventID: in.EventID, Ref: "outbox-entry-1", Text: "Moved 9 tasks."}
	first, err := a.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	again, err := resender().Resend(context.Background(), m, time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if ms := srv.Messages(chanA); len(ms) != 1 || again != first {
		t.Fatalf("messages %+v, ids %s and %s: want the answer once, in place of the thinking", ms, first, again)
	}
	return id, m
}

// Text the model or a task wrote never notifies anyone: every post and
// edit carries allowed_mentions with nothing allowed (a message in the
// channel, a reply where no thread may start, with a nonce, an edit, a
// command's answer and its follow-ups, an edit through the token, the
// ephemeral answer to a press).
func TestNoTextPingsAnyone(t *testing.T) {
	const loud = "@everyone @here <@900000000000000077> <@&900000000000000078> look"
	srv := discordtest.New(t)
	a, h := start(t, srv, config(srv, nil))
	srv.AddChannel(guild, chanA)
	ctx := context.Background()
	q, err := a.Send(ctx, bot.Outgoing{ChatID: chanA, UserID: alice, Text: loud, Question: true, Buttons: []bot.Button{{Label: "Yes", Data: "c:k1:yes"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, bot.Outgoing{ChatID: chanA, Ref: "outbox-1", Text: loud}); err != nil {
		t.Fatal(err)
	}
	press := srv.Press(bob, chanA, q, "c:k1:yes")
	in := h.wait(t, 1)[0]
	waitFor(t, "the deferred update", func() bool { return srv.Interaction(press).Callback == 6 })
	if err := a.AnswerButton(ctx, in.ButtonRef, loud); err != nil {
		t.Fatal(err)
	}
	if err := a.Edit(ctx, q, bot.Outgoing{ChatID: chanA, Text: loud + " edited"}); err != nil {
		t.Fatal(err)
	}
	cmd := srv.Command(alice, guild, chanA, "help", nil)
	in = deferred(t, srv, h, cmd)
	long := loud + "\n" + strings.Repeat("word ", 500) + loud
	answer, err := a.Send(ctx, bot.Outgoing{ChatID: chanA, UserID: alice, EventID: in.EventID, Text: long})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Edit(ctx, answer, bot.Outgoing{ChatID: chanA, Text: loud + " edited"}); err != nil {
		t.Fatal(err)
	}
	var all []discordtest.Message
	all = append(all, srv.Messages(chanA)...)
	for _, id := range []string{cmd, press} {
		st := srv.Interaction(id)
		if st.Original != nil {
			all = append(all, *st.Original)
		}
		all = append(all, st.Followups...)
	}
	loudOnes := 0
	for _, m := range all {
		if strings.Contains(m.Content, "@everyone") {
			loudOnes++
		}
		if len(m.Pings) != 0 {
			t.Errorf("message %q notified %v", m.Content, m.Pings)
		}
	}
	if loudOnes < 6 {
		t.Fatalf("%d messages with the text, want every path: %+v", loudOnes, all)
	}
}

// What does not name the bot does not reach it, however loud: @everyone
// and @here, a role's mention (the bot's own managed role among them),
// a reply to another person in the bot's thread; the mention after them
// does, alone.
func TestEveryoneRolesAndOthersRepliesDoNotAddressTheBot(t *testing.T) {
	srv := discordtest.New(t)
	cfg := config(srv, nil)
	cfg.MessageContent = true // every text arrives: the adapter alone decides
	a, h := start(t, srv, cfg)
	srv.AddChannel(guild, chanA)
	id := srv.Say(guild, chanA, alice, mention(srv, "start"))
	h.wait(t, 1)
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, ThreadID: id, UserID: alice, Text: "Started."}); err != nil {
		t.Fatal(err)
	}
	srv.Say(guild, chanA, alice, "@everyone standup now")
	srv.Say(guild, chanA, alice, "@here anyone?")
	srv.Say(guild, chanA, alice, "<@&900000000000000055> please tidy")
	other := srv.Say(guild, id, bob, "what about lunch?")
	srv.Reply(guild, id, alice, "<@"+bob+"> at noon", other)
	last := srv.Say(guild, id, alice, mention(srv, "done"))
	// One chat's events reach the bot in order: anything wrongly taken
	// would come before the last mention.
	if ev := h.wait(t, 2); ev[1].MessageID != last {
		t.Fatalf("events %+v, want the two mentions only", ev)
	}
}

// "Interaction endpoints are not bound to the bot's Global Rate Limit"
// (discord.com/developers/docs/interactions/receiving-and-responding#endpoints):
// while a global 429 holds back the bot's posts, a slash command still
// gets its deferred response within Discord's 3 s, and its answer goes
// out. (A global 429 carries no X-RateLimit-Reset-After, so discordgo's
// rate limiter does not keep it: each call meets it on its own.)
func TestGlobalRateLimitLeavesInteractionsAlone(t *testing.T) {
	srv := discordtest.New(t)
	srv.SetRetryAfter(8 * time.Second)
	a, h := start(t, srv, config(srv, nil))
	srv.AddChannel(guild, chanA)
	srv.GlobalRateLimit(1)
	var rl bot.RateLimited
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, Text: "one"}); !errors.As(err, &rl) {
		t.Fatalf("send: %v, want the global bot.RateLimited", err)
	}
	id := srv.Command(alice, guild, chanA, "help", nil)
	in := deferred(t, srv, h, id)
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, UserID: alice, EventID: in.EventID, Text: "What I can do"}); err != nil {
		t.Fatalf("the command's answer during a global limit: %v", err)
	}
	if st := srv.Interaction(id); st.Original == nil || st.Original.Content != "What I can do" || len(st.Refused) != 0 {
		t.Fatalf("interaction %+v", st)
	}
}

// The sign of life shows where the person wrote: for a mention inside
// the bot's thread, in the thread, not in its parent channel (the
// conversation's chat, which Ack is handed).
func TestTypingShowsInTheThread(t *testing.T) {
	srv := discordtest.New(t)
	a, h := start(t, srv, config(srv, nil))
	srv.AddChannel(guild, chanA)
	id := srv.Say(guild, chanA, alice, mention(srv, "start"))
	in := h.wait(t, 1)[0]
	if err := a.Ack(context.Background(), in.ChatID, in.MessageID); err != nil || srv.Typing(chanA) != 1 {
		t.Fatalf("Ack of the first mention: %v, typing in the channel %d", err, srv.Typing(chanA))
	}
	if _, err := a.Send(context.Background(), bot.Outgoing{ChatID: chanA, ThreadID: id, UserID: alice, Text: "Started."}); err != nil {
		t.Fatal(err)
	}
	srv.Say(guild, id, alice, mention(srv, "more"))
	in = h.wait(t, 2)[1]
	if in.ChatID != chanA || in.ThreadID != id {
		t.Fatalf("incoming %+v", in)
	}
	if err := a.Ack(context.Background(), in.ChatID, in.MessageID); err != nil {
		t.Fatal(err)
	}
	if srv.Typing(id) != 1 || srv.Typing(chanA) != 1 {
		t.Fatalf("typing in the thread %d, in the channel %d: want the thread's", srv.Typing(id), srv.Typing(chanA))
	}
}

// memberRoute is the member lookup a DM's sender costs in team mode.
const memberRoute = "GET /guilds/{guild.id}/members/{user.id}"

// teamConfig is a team mode adapter's configuration against srv, where
// members are in guild.
func teamConfig(srv *discordtest.Server, members ...string) discord.Config {
	for _, m := range members {
		srv.Join(guild, m)
	}
	cfg := config(srv, nil)
	cfg.Team = true
	return cfg
}

// A slash command in a DM whose sender's servers are not known yet
// (team mode asks GET /guilds/{id}/members/{user}) gets its deferred
// response within Discord's 3 s however long that lookup takes, over
// the gateway and over HTTP: only the response stands between the
// interaction and its deferral. The command is stored once Discord
// answers, naming the server, and its answer replaces the "thinking".
func TestCommandIsDeferredBeforeASlowLookup(t *testing.T) {
	for _, overHTTP := range []bool{false, true} {
		name := map[bool]string{false: "gateway", true: "interactions endpoint"}[overHTTP]
		t.Run(name, func(t *testing.T) {
			srv := discordtest.New(t)
			cfg := teamConfig(srv, alice)
			if overHTTP {
				cfg.PublicKey = hexKey(srv)
			}
			a, h := start(t, srv, cfg)
			if overHTTP {
				mux := http.NewServeMux()
				if err := a.Routes(mux, h); err != nil {
					t.Fatal(err)
				}
				web := httptest.NewServer(mux)
				t.Cleanup(web.Close)
				srv.SetInteractionsEndpoint(web.URL + "/discord/interactions")
			}
			release := srv.Hold(memberRoute)
			id := srv.Command(alice, "", "", "usage", nil)
			waitFor(t, "the deferred response", func() bool { return srv.Interaction(id).Callback != 0 })
			if st := srv.Interaction(id); st.Callback != 5 || len(st.Refused) != 0 {
				t.Fatalf("interaction %+v, want the deferred response (5)", st)
			}
			waitFor(t, "the lookup", func() bool { return srv.Requests(memberRoute) > 0 })
			if ev := h.events(); len(ev) != 0 {
				t.Fatalf("events %+v before Discord answered the lookup", ev)
			}
			release()
			in := h.wait(t, 1)[0]
			if in.Command != "usage" || !in.AwaitsAnswer || len(in.SharedTeams) != 1 || in.SharedTeams[0] != guild {
				t.Fatalf("incoming %+v, want /usage naming %s", in, guild)
			}
			answersInPlace(t, a, srv, id, in, "Usage")
		})
	}
}

// When Discord does not answer a member lookup (a 5xx), a DM's sender
// whose servers were learnt before is taken as in them still, and one
// of whom nothing was learnt waits for Discord's answer rather than
// reaching the bot as a stranger.
func TestUnansweredLookupGoesByWhatWasLearnt(t *testing.T) {
	srv := discordtest.New(t)
	cfg := teamConfig(srv, alice, bob)
	var ahead atomic.Int64 // how far the adapter's clock is ahead
	cfg.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	_, h := start(t, srv, cfg)
	srv.DM(alice, "one")
	h.wait(t, 1)
	ahead.Store(int64(11 * time.Minute)) // what was learnt is stale: asked again
	srv.Fail(memberRoute, 500, 1)
	srv.DM(alice, "two")
	if ev := h.wait(t, 2)[1]; ev.Text != "two" || len(ev.SharedTeams) != 1 || ev.SharedTeams[0] != guild {
		t.Fatalf("Alice's second DM %+v, want it naming %s", ev, guild)
	}
	asked := srv.Requests(memberRoute)
	srv.Fail(memberRoute, 500, 2)
	srv.DM(bob, "hi")
	ev := h.wait(t, 3)[2]
	if ev.UserID != bob || len(ev.SharedTeams) != 1 || ev.SharedTeams[0] != guild {
		t.Fatalf("Bob's DM %+v, want it naming %s", ev, guild)
	}
	if n := srv.Requests(memberRoute) - asked; n != 3 {
		t.Errorf("Bob's DM asked %d times, want 3 (two failures, then the answer)", n)
	}
}

// A member lookup Discord is slow to answer (a DM in team mode) holds
// up that DM only: another chat's message reaches the bot meanwhile,
// and the DM follows once Discord answers.
func TestSlowLookupHoldsUpItsChatOnly(t *testing.T) {
	srv := discordtest.New(t)
	srv.AddChannel(guild, chanA)
	_, h := start(t, srv, teamConfig(srv, alice))
	release := srv.Hold(memberRoute)
	srv.DM(alice, "first")
	waitFor(t, "the lookup", func() bool { return srv.Requests(memberRoute) > 0 })
	srv.Say(guild, chanA, bob, mention(srv, "meanwhile"))
	if ev := h.wait(t, 1); ev[0].UserID != bob || ev[0].Text != "meanwhile" {
		t.Fatalf("events %+v, want Bob's mention first", ev)
	}
	release()
	ev := h.wait(t, 2)
	if ev[1].UserID != alice || len(ev[1].SharedTeams) != 1 || ev[1].SharedTeams[0] != guild {
		t.Fatalf("events %+v, want Alice's DM naming %s", ev, guild)
	}
}
