package bot

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tidybot/tidybot/agent"
)

// fakeAccounts gives each connected person their own mockAgent.
type fakeAccounts struct {
	mu     sync.Mutex
	agents map[string]*mockAgent // by platform:user; absent: not connected
}

func (f *fakeAccounts) Agent(_ context.Context, platform, userID string) (Agent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a, ok := f.agents[PersonID(platform, userID)]; ok {
		return a, nil
	}
	return nil, ErrNotConnected
}

func (f *fakeAccounts) ConnectURL(_ context.Context, in Incoming) (string, error) {
	return "https://todoist.example/oauth/authorize?for=" + in.UserID, nil
}

func (f *fakeAccounts) Disconnect(ctx context.Context, platform, userID string) error {
	return f.Forget(ctx, platform, userID)
}

func (f *fakeAccounts) Forget(_ context.Context, platform, userID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.agents, PersonID(platform, userID))
	return nil
}

func newTeamHarness(t *testing.T, acc *fakeAccounts, cfg Config) *harness {
	t.Helper()
	shared := &mockAgent{} // the personal-mode agent: never used in team mode
	h := &harness{store: newMemStore(), agent: shared, plat: &fakePlatform{name: "slack", interval: time.Second}}
	cfg.Workers, cfg.Accounts = 2, acc
	h.bot = New(h.store, shared, cfg)
	h.bot.AddPlatform(h.plat)
	if err := h.bot.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.bot.Stop)
	return h
}

func TestTeamRunsUseTheAskersAccount(t *testing.T) {
	alice, bob := &mockAgent{}, &mockAgent{}
	acc := &fakeAccounts{agents: map[string]*mockAgent{"slack:U1": alice, "slack:U2": bob}}
	h := newTeamHarness(t, acc, Config{AllowedUsers: []string{"slack:team:T1"}})
	// Two people in one channel thread.
	h.handle(t, Incoming{Platform: "slack", ChatID: "C1", ThreadID: "1.1", UserID: "U1", TeamID: "T1", Text: "alice's request", EventID: "e1"})
	h.idle(t)
	h.handle(t, Incoming{Platform: "slack", ChatID: "C1", ThreadID: "1.1", UserID: "U2", TeamID: "T1", Text: "bob's request", EventID: "e2"})
	h.idle(t)
	if got := joined(alice.startedList()); got != "alice's request" {
		t.Errorf("Alice's account ran %q", got)
	}
	if got := joined(bob.startedList()); got != "bob's request" {
		t.Errorf("Bob's account ran %q", got)
	}
	if got := h.agent.startedList(); len(got) != 0 {
		t.Errorf("the personal-mode agent ran %v in team mode", got)
	}
	// Someone of another workspace is refused.
	h.handle(t, Incoming{Platform: "slack", ChatID: "D9", UserID: "U9", TeamID: "T2", Text: "hi", EventID: "e3", DM: true})
	h.idle(t)
	if !strings.Contains(h.plat.last().Text, "slack:U9") {
		t.Errorf("another workspace: %q, want the refusal", h.plat.last().Text)
	}
}

func TestTeamNotConnectedGetsOneConnectMessageAndTheRequestRunsAfter(t *testing.T) {
	acc := &fakeAccounts{agents: map[string]*mockAgent{}}
	h := newTeamHarness(t, acc, Config{AllowedUsers: []string{"telegram:*"}})
	h.plat.name = "telegram"
	h.bot = New(h.store, h.agent, Config{Workers: 1, Accounts: acc, AllowedUsers: []string{"telegram:*"}})
	h.bot.AddPlatform(h.plat)
	if err := h.bot.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.bot.Stop)
	h.handle(t, msg("file my receipts", "e1"))
	h.idle(t)
	if n := len(h.plat.texts()); n != 1 || !strings.Contains(h.plat.last().Text, "https://todoist.example/oauth/authorize?for=42") {
		t.Fatalf("before connecting: %q, want one message with the Connect link", h.plat.texts())
	}
	carol := &mockAgent{}
	acc.mu.Lock()
	acc.agents["telegram:42"] = carol
	acc.mu.Unlock()
	if err := h.bot.Connected(t.Context(), Incoming{Platform: "telegram", ChatID: "c1", UserID: "42", DM: true}, ""); err != nil {
		t.Fatal(err)
	}
	h.idle(t)
	if got := joined(carol.startedList()); got != "file my receipts" {
		t.Errorf("after connecting, Carol's account ran %q, want the kept request", got)
	}
}

func TestEveryoneEntriesOnlyInTeamMode(t *testing.T) {
	entries := []string{"telegram:*", "slack:team:T1"}
	people := []Incoming{{Platform: "telegram", UserID: "7"}, {Platform: "slack", UserID: "U7", TeamID: "T1"}}
	b := New(newMemStore(), &mockAgent{}, Config{AllowedUsers: entries})
	for _, in := range people {
		if b.allowedIn(in) {
			t.Errorf("%s:%s let in in personal mode", in.Platform, in.UserID)
		}
	}
	b = New(newMemStore(), &mockAgent{}, Config{AllowedUsers: entries, Accounts: &fakeAccounts{}})
	for _, in := range people {
		if !b.allowedIn(in) {
			t.Errorf("%s:%s refused in team mode", in.Platform, in.UserID)
		}
	}
	if b.allowedIn(Incoming{Platform: "slack", UserID: "U8", TeamID: "T2"}) {
		t.Error("another Slack workspace let in")
	}
}

// spender is an agent whose run spends tokens, saves, and goes on until
// stopped.
func spender(tokens int) *mockAgent {
	return &mockAgent{StartFn: func(ctx context.Context, in agent.Input, h agent.Hooks) agent.Outcome {
		tr := &agent.Transcript{V: agent.TranscriptVersion, Instruction: in.Instruction, Usage: agent.Usage{PromptTokens: tokens - 100, CompletionTokens: 100, Calls: 1}}
		if err := h.Save(ctx, tr); err != nil {
			return agent.Outcome{Status: agent.StatusFailed, Transcript: tr, Err: err}
		}
		<-ctx.Done()
		tr.Status = agent.StatusInterrupted
		return agent.Outcome{Status: agent.StatusInterrupted, Transcript: tr}
	}}
}

func TestDailyCapStopsTheRunAndUsageShowsDayAndMonth(t *testing.T) {
	alice := spender(600)
	acc := &fakeAccounts{agents: map[string]*mockAgent{}}
	h := newTeamHarness(t, acc, Config{AllowedUsers: []string{"slack:U1"}, UserDailyTokens: 500})
	h.bot.cfg.Accounts = spenderAccounts{alice}
	dm := func(text, ev string) Incoming {
		return Incoming{Platform: "slack", ChatID: "D1", UserID: "U1", Text: text, EventID: ev, DM: true}
	}
	h.handle(t, dm("tidy everything", "e1"))
	h.idle(t)
	if got := h.plat.last().Text; !strings.HasPrefix(got, "You have used your 500 model tokens for today") {
		t.Fatalf("at the cap: %q, want the plain cap message", got)
	}
	h.handle(t, dm("and again", "e2"))
	h.idle(t)
	if got := alice.startedList(); len(got) != 1 {
		t.Errorf("runs started over the cap: %v", got)
	}
	if got := h.plat.last().Text; !strings.Contains(got, "500 model tokens") {
		t.Errorf("a request over the cap: %q", got)
	}
	h.handle(t, Incoming{Platform: "slack", ChatID: "D1", UserID: "U1", Command: "usage", EventID: "e3", DM: true})
	h.idle(t)
	if got := h.plat.last().Text; !strings.Contains(got, "You used 600 tokens today and 600 tokens in") {
		t.Errorf("/usage: %q, want the person's day and month", got)
	}
}

// spenderAccounts connects everyone to one spender.
type spenderAccounts struct{ a *mockAgent }

func (s spenderAccounts) Agent(context.Context, string, string) (Agent, error) { return s.a, nil }
func (s spenderAccounts) ConnectURL(context.Context, Incoming) (string, error) { return "", nil }
func (s spenderAccounts) Disconnect(context.Context, string, string) error     { return nil }
func (s spenderAccounts) Forget(context.Context, string, string) error         { return nil }

// writer is an agent whose runs each apply one write, and which records
// what it is asked to undo.
type writer struct {
	*mockAgent
	undone []string // guarded by mockAgent.mu
}

func newWriter() *writer {
	w := &writer{mockAgent: &mockAgent{}}
	w.StartFn = func(_ context.Context, in agent.Input, _ agent.Hooks) agent.Outcome {
		tr := &agent.Transcript{V: agent.TranscriptVersion, Instruction: in.Instruction, Status: agent.StatusDone,
			Journal: []agent.Applied{{Write: agent.Write{Kind: agent.CloseTask, ID: in.Instruction}, Summary: "completed " + in.Instruction}}}
		return agent.Outcome{Status: agent.StatusDone, Answer: "done", Transcript: tr}
	}
	w.UndoFn = func(_ context.Context, j []agent.Applied) (agent.UndoReport, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		var rep agent.UndoReport
		for _, x := range j {
			w.undone = append(w.undone, x.Summary)
			rep.Undone = append(rep.Undone, x.Summary)
		}
		return rep, nil
	}
	return w
}

type writerAccounts map[string]*writer

func (w writerAccounts) Agent(_ context.Context, platform, userID string) (Agent, error) {
	if a, ok := w[PersonID(platform, userID)]; ok {
		return a, nil
	}
	return nil, ErrNotConnected
}
func (writerAccounts) ConnectURL(context.Context, Incoming) (string, error) { return "", nil }
func (writerAccounts) Disconnect(context.Context, string, string) error     { return nil }
func (writerAccounts) Forget(context.Context, string, string) error         { return nil }

// TestTeamUndoRevertsOnlyOnesOwnRun: in a shared thread, /undo reverts
// the latest run of the person asking (each person has their own
// conversation there), through their own account.
func TestTeamUndoRevertsOnlyOnesOwnRun(t *testing.T) {
	alice, bob := newWriter(), newWriter()
	h := newTeamHarness(t, &fakeAccounts{}, Config{AllowedUsers: []string{"slack:team:T1"}})
	h.bot.cfg.Accounts = writerAccounts{"slack:U1": alice, "slack:U2": bob}
	in := func(user, text, cmd, ev string) Incoming {
		return Incoming{Platform: "slack", ChatID: "C1", ThreadID: "1.1", UserID: user, TeamID: "T1", Text: text, Command: cmd, EventID: ev}
	}
	h.handle(t, in("U2", "bob-task", "", "e1"))
	h.idle(t)
	h.handle(t, in("U1", "alice-task", "", "e2"))
	h.idle(t)
	h.handle(t, in("U2", "", "undo", "e3"))
	h.idle(t)
	if got := joined(bob.undone); got != "completed bob-task" {
		t.Errorf("Bob's /undo reverted %q on his account, want his own run", got)
	}
	if len(alice.undone) != 0 {
		t.Errorf("Bob's /undo reverted Alice's writes: %v", alice.undone)
	}
}

// TestTeamConnectLinkNeverPostedInASharedChat: anyone in a channel could
// open it and tie their account to the asker.
func TestTeamConnectLinkNeverPostedInASharedChat(t *testing.T) {
	acc := &fakeAccounts{agents: map[string]*mockAgent{}}
	h := newTeamHarness(t, acc, Config{AllowedUsers: []string{"slack:team:T1"}})
	h.handle(t, Incoming{Platform: "slack", ChatID: "C1", ThreadID: "1.1", UserID: "U1", TeamID: "T1", Text: "tidy up", EventID: "e1"})
	h.idle(t)
	got := h.plat.last()
	if strings.Contains(got.Text, "https://") || got.Link != nil || !strings.Contains(got.Text, "/connect in a direct message") {
		t.Errorf("in a channel: %+v, want a pointer to /connect in a DM and no link", got)
	}
	h.handle(t, Incoming{Platform: "slack", ChatID: "D1", UserID: "U1", TeamID: "T1", Command: "connect", EventID: "e2", DM: true})
	h.idle(t)
	if got := h.plat.last(); got.Link == nil || got.Link.Label != "Connect Todoist" || got.Link.UserID != "U1" {
		t.Errorf("/connect in a DM: %+v, want a Connect Todoist button for U1", got)
	}
}

// A request kept until its person connects is cut to MaxMessage like any
// message (it was kept whole, 100 KB), and runs cut, with the note.
func TestPendingRequestIsCut(t *testing.T) {
	acc := &fakeAccounts{agents: map[string]*mockAgent{}}
	h := &harness{store: newMemStore(), agent: &mockAgent{}, plat: &fakePlatform{name: "telegram", interval: time.Second}}
	h.bot = New(h.store, h.agent, Config{Workers: 1, Accounts: acc, AllowedUsers: []string{"telegram:*"}})
	h.bot.AddPlatform(h.plat)
	if err := h.bot.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.bot.Stop)
	long := strings.Repeat("receipt ", 100_000/8)
	h.handle(t, msg(long, "e1"))
	h.idle(t)
	raw, err := h.store.Setting(t.Context(), pendingKey("telegram", "42"))
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > MaxMessage+1000 {
		t.Errorf("the pending request is kept with %d bytes, want it cut to about %d characters", len(raw), MaxMessage)
	}
	carol := &mockAgent{}
	acc.mu.Lock()
	acc.agents["telegram:42"] = carol
	acc.mu.Unlock()
	if err := h.bot.Connected(t.Context(), Incoming{Platform: "telegram", ChatID: "c1", UserID: "42", DM: true}, ""); err != nil {
		t.Fatal(err)
	}
	h.idle(t)
	got := carol.startedList()
	if len(got) != 1 || utf8.RuneCountInString(got[0]) > MaxMessage {
		t.Fatalf("after connecting the account ran %d requests; want the kept one, cut", len(got))
	}
	if !strings.Contains(strings.Join(h.plat.texts(), "\n"), "I only read the first") {
		t.Errorf("no word that the message was cut: %q", h.plat.texts())
	}
}

// TestSharedTeamsLetInDirectMessages: in team mode a direct message
// whose platform names the sender's teams (Discord: the servers a DM's
// sender shares with the bot) is let in by a platform:team:ID entry for
// one of them; not by another team's, and never in personal mode.
func TestSharedTeamsLetInDirectMessages(t *testing.T) {
	entries := []string{"discord:team:G1"}
	dm := Incoming{Platform: "discord", UserID: "7", DM: true, SharedTeams: []string{"G9", "G1"}}
	if b := New(newMemStore(), &mockAgent{}, Config{AllowedUsers: entries}); b.allowedIn(dm) {
		t.Error("a server member let in by the server's entry in personal mode")
	}
	b := New(newMemStore(), &mockAgent{}, Config{AllowedUsers: entries, Accounts: &fakeAccounts{}})
	if !b.allowedIn(dm) {
		t.Error("a member of an allowed server refused in a direct message")
	}
	dm.SharedTeams = []string{"G9"}
	if b.allowedIn(dm) {
		t.Error("a member of another server let in")
	}
}
