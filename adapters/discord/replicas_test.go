package discord_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/discord"
	"github.com/tidybot/tidybot/adapters/discord/discordtest"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/postgres"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

var _ discord.Hooks = (*postgres.Store)(nil)

// sharedStores opens two stores on one PostgreSQL schema: two serve
// replicas.
func sharedStores(t *testing.T) (a, b *postgres.Store) {
	t.Helper()
	u := pgtest.URL(t)
	open := func() *postgres.Store {
		st, err := postgres.Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	return open(), open()
}

// hooked is an adapter's configuration against srv that keeps the
// interactions' tokens in hooks.
func hooked(srv *discordtest.Server, hooks discord.Hooks) discord.Config {
	cfg := config(srv, nil)
	cfg.Hooks = hooks
	return cfg
}

// TestAnotherReplicaAnswersTheCommand: a slash command received by
// replica A (its gateway session) is answered by replica B, which finds
// the interaction's token in the shared store: B's first message to the
// person replaces A's "thinking…" (issue 35). Another person's message
// in the same channel never takes it (issue 33), and the wrong person's
// press received by A is answered by B through that press's token.
func TestAnotherReplicaAnswersTheCommand(t *testing.T) {
	srv := discordtest.New(t)
	stA, stB := sharedStores(t)
	_, h := start(t, srv, hooked(srv, stA))
	b := newAdapter(t, hooked(srv, stB)) // no gateway: it only posts, as the replica running the conversation
	ctx := context.Background()
	id := srv.Command(alice, guild, chanA, "tidy-inbox", nil)
	deferred(t, srv, h, id)

	// Bob's answer, in the same channel, is not alice's to replace.
	if _, err := b.Send(ctx, bot.Outgoing{ChatID: chanA, UserID: bob, RunID: "r-bob", Text: "Bob's answer"}); err != nil {
		t.Fatal(err)
	}
	if st := srv.Interaction(id); st.Original == nil || st.Original.Content != "" {
		t.Fatalf("bob's answer touched alice's interaction: %+v", st)
	}
	status, err := b.Send(ctx, bot.Outgoing{ChatID: chanA, UserID: alice, RunID: "r1", EventID: "i" + id, Text: "🤔 Working on it…"})
	if err != nil {
		t.Fatal(err)
	}
	if st := srv.Interaction(id); st.Original == nil || st.Original.ID != status || st.Original.Content != "🤔 Working on it…" || len(st.Refused) != 0 {
		t.Fatalf("replica B's answer did not replace the thinking: %+v", st)
	}
	if err := b.Edit(ctx, status, bot.Outgoing{ChatID: chanA, UserID: alice, RunID: "r1", Text: "Moved 9 tasks."}); err != nil {
		t.Fatal(err)
	}
	if st := srv.Interaction(id); st.Original == nil || st.Original.Content != "Moved 9 tasks." {
		t.Fatalf("interaction after the edit %+v", st)
	}
	// The token replaced its thinking once: the run's next message goes
	// to the channel.
	next, err := b.Send(ctx, bot.Outgoing{ChatID: chanA, UserID: alice, RunID: "r1", Text: "Anything else?"})
	if err != nil {
		t.Fatal(err)
	}
	if st := srv.Interaction(id); len(st.Followups) != 0 || st.Original.Content != "Moved 9 tasks." || next == status {
		t.Fatalf("the run's second message went through the token: %+v", st)
	}

	// Bob presses alice's question's button on replica A; replica B says
	// it is not his to answer, seen only by him.
	q, err := b.Send(ctx, bot.Outgoing{ChatID: chanA, UserID: alice, RunID: "r1", Text: "Delete 3 tasks?", Question: true,
		Buttons: []bot.Button{{Label: "Yes", Data: "c:k1:yes"}}})
	if err != nil {
		t.Fatal(err)
	}
	wrong := srv.Press(bob, chanA, q, "c:k1:yes")
	in := h.wait(t, 2)[1]
	waitFor(t, "the deferred update", func() bool { return srv.Interaction(wrong).Callback == 6 })
	if err := b.AnswerButton(ctx, in.ButtonRef, "Only the person who asked can answer."); err != nil {
		t.Fatal(err)
	}
	if st := srv.Interaction(wrong); len(st.Followups) != 1 || st.Followups[0].Content != "Only the person who asked can answer." || st.Followups[0].Flags&64 == 0 {
		t.Fatalf("bob's press %+v", st)
	}
	if err := b.AnswerButton(ctx, in.ButtonRef, "Only the person who asked can answer."); err != nil {
		t.Fatal(err)
	}
	if st := srv.Interaction(wrong); len(st.Followups) != 1 || len(st.Refused) != 0 {
		t.Fatalf("a press answered twice: %+v", st)
	}
}

// TestInMemoryTokensArePerProcess: without a shared store (bbolt, one
// process) another adapter does not know the token — why replicas need
// Hooks: its answer is a message in the channel, the thinking stays.
func TestInMemoryTokensArePerProcess(t *testing.T) {
	srv := discordtest.New(t)
	_, h := start(t, srv, config(srv, nil))
	b := newAdapter(t, config(srv, nil))
	id := srv.Command(alice, guild, chanA, "help", nil)
	deferred(t, srv, h, id)
	if _, err := b.Send(context.Background(), bot.Outgoing{ChatID: chanA, UserID: alice, RunID: "r1", EventID: "i" + id, Text: "What I can do"}); err != nil {
		t.Fatal(err)
	}
	if st := srv.Interaction(id); st.Original == nil || st.Original.Content != "" {
		t.Fatalf("another process answered through a token it never had: %+v", st)
	}
}

// slowSave is replica A's store, whose first SaveHook returns only when
// the test lets it: the interaction's response waits meanwhile.
type slowSave struct {
	discord.Hooks
	saved, release chan struct{}
	once           sync.Once
}

func (s *slowSave) SaveHook(ctx context.Context, channel, person, url string, expires time.Time) error {
	err := s.Hooks.SaveHook(ctx, channel, person, url, expires)
	s.once.Do(func() {
		close(s.saved)
		<-s.release
	})
	return err
}

// TestATokenTakenBeforeTheResponseIsTriedAgain: replica B takes the
// token before replica A made the deferred response; Discord refuses
// it, so B gives it back and asks its send queue to try again; once A
// responded, B's retry replaces the "thinking…".
func TestATokenTakenBeforeTheResponseIsTriedAgain(t *testing.T) {
	srv := discordtest.New(t)
	stA, stB := sharedStores(t)
	slow := &slowSave{Hooks: stA, saved: make(chan struct{}), release: make(chan struct{})}
	_, h := start(t, srv, hooked(srv, slow))
	b := newAdapter(t, hooked(srv, stB))
	ctx := context.Background()
	id := srv.Command(alice, guild, chanA, "help", nil)
	h.wait(t, 1)
	<-slow.saved
	out := bot.Outgoing{ChatID: chanA, UserID: alice, RunID: "r1", EventID: "i" + id, Text: "What I can do"}
	_, err := b.Send(ctx, out)
	var rl bot.RateLimited
	if !errors.As(err, &rl) || rl.RetryAfter() <= 0 || rl.RetryAfter() > time.Second {
		t.Fatalf("a token taken before the response: %v, want a retry within a second", err)
	}
	if ms := srv.Messages(chanA); len(ms) != 0 {
		t.Fatalf("messages %+v, want none before the response", ms)
	}
	close(slow.release)
	waitFor(t, "the deferred response", func() bool { return srv.Interaction(id).Callback == 5 })
	if _, err := b.Send(ctx, out); err != nil {
		t.Fatal(err)
	}
	if st := srv.Interaction(id); st.Original == nil || st.Original.Content != "What I can do" {
		t.Fatalf("interaction %+v", st)
	}
}

// TestARefusedTokenAnswersInTheChannel: a token Discord no longer takes
// (15 minutes passed) is not tried again: the answer is a message in
// the channel.
func TestARefusedTokenAnswersInTheChannel(t *testing.T) {
	srv := discordtest.New(t)
	stA, stB := sharedStores(t)
	_, h := start(t, srv, hooked(srv, stA))
	cfgB := hooked(srv, stB)
	cfgB.Now = func() time.Time { return time.Now().Add(time.Minute) } // well past the acknowledgement
	b := newAdapter(t, cfgB)
	id := srv.Command(alice, guild, chanA, "help", nil)
	deferred(t, srv, h, id)
	srv.AgeInteraction(id, 16*time.Minute)
	if _, err := b.Send(context.Background(), bot.Outgoing{ChatID: chanA, UserID: alice, RunID: "r1", EventID: "i" + id, Text: "What I can do"}); err != nil {
		t.Fatal(err)
	}
	ms := srv.Messages(chanA)
	if len(ms) != 2 || ms[1].Content != "What I can do" {
		t.Fatalf("messages %+v, want the answer in the channel", ms)
	}
	if st := srv.Interaction(id); st.Original == nil || st.Original.Content != "" {
		t.Fatalf("interaction %+v", st)
	}
}

// TestATokenRateLimitedIsKeptForTheRetry: the answer that would replace
// the thinking gets a 429; the token is given back, and the send
// queue's retry of the same run replaces the thinking.
func TestATokenRateLimitedIsKeptForTheRetry(t *testing.T) {
	srv := discordtest.New(t)
	a, h := start(t, srv, config(srv, nil))
	id := srv.Command(alice, guild, chanA, "help", nil)
	deferred(t, srv, h, id)
	srv.RateLimit("PATCH /webhooks/{app}/{token}/messages/{message}", 1)
	out := bot.Outgoing{ChatID: chanA, UserID: alice, RunID: "r1", EventID: "i" + id, Text: "What I can do"}
	_, err := a.Send(context.Background(), out)
	var rl bot.RateLimited
	if !errors.As(err, &rl) {
		t.Fatalf("Send = %v, want a rate limit", err)
	}
	time.Sleep(rl.RetryAfter()) // the send queue holds the chat back so long
	if _, err := a.Send(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	if st := srv.Interaction(id); st.Original == nil || st.Original.Content != "What I can do" {
		t.Fatalf("interaction %+v", st)
	}
	if ms := srv.Messages(chanA); len(ms) != 1 {
		t.Fatalf("messages %+v, want the answer in place of the thinking only", ms)
	}
}

// TestResendAfterARestartAnswersInPlace: the answer that replaced a
// command's thinking is posted again by a new process (a crash before
// the outbox recorded it) that shares the tokens in PostgreSQL: it is
// the same edit again, not a second copy in the channel.
func TestResendAfterARestartAnswersInPlace(t *testing.T) {
	srv := discordtest.New(t)
	stA, stB := sharedStores(t)
	a, h := start(t, srv, hooked(srv, stA))
	resendCommandAnswer(t, srv, a, h, func() *discord.Adapter { return newAdapter(t, hooked(srv, stB)) })
}
