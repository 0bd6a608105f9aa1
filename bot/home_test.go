package bot

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// homePlatform is a fakePlatform with a Home tab (HomePublisher).
type homePlatform struct {
	*fakePlatform
	bot *Bot // whose queue publishes the Homes
	// gate, when set, holds every publish until it is closed (a slow
	// views.publish).
	gate  chan struct{}
	hmu   sync.Mutex
	homes map[string][]Home // by user, every one published
}

func (p *homePlatform) PublishHome(_ context.Context, userID string, h Home) error {
	if p.gate != nil {
		<-p.gate
	}
	p.hmu.Lock()
	defer p.hmu.Unlock()
	if p.homes == nil {
		p.homes = map[string][]Home{}
	}
	p.homes[userID] = append(p.homes[userID], h)
	return nil
}

func (p *homePlatform) home(t *testing.T, userID string, n int) Home {
	t.Helper()
	idle(t, p.bot) // the Homes queued are published
	p.hmu.Lock()
	defer p.hmu.Unlock()
	if len(p.homes[userID]) != n {
		t.Fatalf("%d Homes published for %s, want %d: %+v", len(p.homes[userID]), userID, n, p.homes[userID])
	}
	return p.homes[userID][n-1]
}

func startHomeBot(t *testing.T, cfg Config) (*Bot, *homePlatform) {
	t.Helper()
	plat := &homePlatform{fakePlatform: &fakePlatform{name: "slack", interval: time.Second}}
	cfg.Workers = 2
	b := New(newMemStore(), &mockAgent{}, cfg)
	plat.bot = b
	b.AddPlatform(plat)
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return b, plat
}

// TestHomeTeamModeAccount: in team mode the Home shows the person's
// Todoist connection; its Disconnect press disconnects as /disconnect
// does. A person with no Todoist connected still changes their
// settings there (the Connect gate is for work on Todoist).
func TestHomeTeamModeAccount(t *testing.T) {
	acc := &fakeAccounts{agents: map[string]*mockAgent{"slack:U1": {}}}
	b, plat := startHomeBot(t, Config{Accounts: acc, AllowedUsers: []string{"slack:team:T1"}})
	if err := b.OpenHome(t.Context(), "slack", "U1", "T1"); err != nil {
		t.Fatal(err)
	}
	h := plat.home(t, "U1", 1)
	if !h.Allowed || h.Account == nil || !h.Account.Connected || h.Account.Disconnect == nil || h.Account.Disconnect.Data != homeDisconnect {
		t.Fatalf("the Home of a connected person: %+v", h)
	}
	if err := b.Handle(t.Context(), Incoming{Platform: "slack", UserID: "U1", TeamID: "T1", Button: homeDisconnect, EventID: "act:1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.Agent(t.Context(), "slack", "U1"); err == nil {
		t.Error("still connected after Disconnect")
	}
	h = plat.home(t, "U1", 2)
	if !strings.HasPrefix(h.Notice, "Disconnected") || h.Account == nil || h.Account.Connected || h.Account.Disconnect != nil {
		t.Errorf("the Home after Disconnect: %+v", h)
	}
	// Connect posts the Connect flow's link in the person's DM.
	if h.Account.Connect == nil || h.Account.Connect.Data != homeConnect {
		t.Fatalf("no Connect on the Home: %+v", h.Account)
	}
	if err := b.Handle(t.Context(), Incoming{Platform: "slack", ChatID: "D1", DM: true, UserID: "U1", TeamID: "T1", Button: homeConnect, EventID: "act:3"}); err != nil {
		t.Fatal(err)
	}
	idle(t, b)
	if m := plat.last(); m.ChatID != "D1" || !strings.Contains(m.Link.URL, "for=U1") {
		t.Errorf("the Connect link: %+v", m)
	}
	if h := plat.home(t, "U1", 3); !strings.Contains(h.Notice, "Connect link") {
		t.Errorf("the Home after Connect: %+v", h)
	}
	// Not connected: the settings change all the same.
	if err := b.Handle(t.Context(), Incoming{Platform: "slack", UserID: "U2", TeamID: "T1", Button: HomePrefix + "set:confirm:writes", EventID: "act:2"}); err != nil {
		t.Fatal(err)
	}
	if ps, err := b.Settings(t.Context(), "slack", "U2"); err != nil || ps.Confirm != "writes" {
		t.Errorf("settings after confirm writes from the Home: %+v, %v", ps, err)
	}
	if h := plat.home(t, "U2", 1); !strings.Contains(h.Notice, "before every change") || !strings.Contains(h.Account.Text, "No Todoist is connected") {
		t.Errorf("the Home: %+v", h)
	}
	if sent := plat.texts(); len(sent) != 1 {
		t.Errorf("Home presses posted %q; want the Connect link alone", sent)
	}
}

// TestHomeAndKeyboardShareOneTable: the Home's buttons are /settings'
// buttons (Telegram's keyboard), the model tiers' too, setting the same
// values.
func TestHomeAndKeyboardShareOneTable(t *testing.T) {
	b, plat := startHomeBot(t, Config{AllowedUsers: []string{"slack:U1"}, UserDailyTokens: 1000, ModelTiers: testTiers})
	if err := b.OpenHome(t.Context(), "slack", "U1", "T1"); err != nil {
		t.Fatal(err)
	}
	h := plat.home(t, "U1", 1)
	var home []string
	for _, s := range h.Settings {
		for _, bt := range s.Buttons {
			home = append(home, bt.Label+"="+strings.TrimPrefix(bt.Data, HomePrefix))
		}
	}
	var keyboard []string
	for _, bt := range append(settingsButtons(PersonSettings{}), b.modelButtons(PersonSettings{})...) {
		keyboard = append(keyboard, bt.Label+"="+bt.Data)
	}
	if strings.Join(home, "\n") != strings.Join(keyboard, "\n") || len(keyboard) == 0 {
		t.Errorf("the Home's buttons:\n%s\n/settings' buttons:\n%s", strings.Join(home, "\n"), strings.Join(keyboard, "\n"))
	}
	if h.Usage != "Today you used 0 of your 1000 model tokens." {
		t.Errorf("usage %q", h.Usage)
	}
	if err := b.Handle(t.Context(), Incoming{Platform: "slack", UserID: "U1", Button: HomePrefix + "set:model:best", EventID: "act:1"}); err != nil {
		t.Fatal(err)
	}
	if ps, _ := b.Settings(t.Context(), "slack", "U1"); ps.ModelTier != "best" {
		t.Errorf("model tier %q after the Home's press, want best", ps.ModelTier)
	}
	if h := plat.home(t, "U1", 2); h.Settings[len(h.Settings)-1].Value != "best (m-large)" {
		t.Errorf("the Home's model after the press: %+v", h.Settings)
	}
}

// TestHomeBadPressChangesNothing: a Home press naming a value /settings
// refuses says why and changes nothing.
func TestHomeBadPressChangesNothing(t *testing.T) {
	b, plat := startHomeBot(t, Config{AllowedUsers: []string{"slack:U1"}})
	if err := b.Handle(t.Context(), Incoming{Platform: "slack", UserID: "U1", Button: HomePrefix + "set:confirm:sometimes", EventID: "act:1"}); err != nil {
		t.Fatal(err)
	}
	if h := plat.home(t, "U1", 1); !strings.HasPrefix(h.Notice, "Confirm is destructive") {
		t.Errorf("notice %q", h.Notice)
	}
	if ps, _ := b.Settings(t.Context(), "slack", "U1"); ps != (PersonSettings{}) {
		t.Errorf("settings changed: %+v", ps)
	}
}

// TestHomeAnsweredBeforeItIsPublished: opening the Home and pressing
// on it return (Slack is acknowledged) while the Home's publish is
// still under way: the build and views.publish are queued, not made in
// the platform's request, which Slack wants answered within 3 seconds.
func TestHomeAnsweredBeforeItIsPublished(t *testing.T) {
	b, plat := startHomeBot(t, Config{AllowedUsers: []string{"slack:U1"}})
	plat.gate = make(chan struct{})
	returned := func(what string, f func() error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-time.After(10 * time.Second): // a deadlock, not a speed: the publish is held until gate closes
			close(plat.gate)
			t.Fatalf("%s waited for the Home's publish", what)
		}
	}
	returned("OpenHome", func() error { return b.OpenHome(t.Context(), "slack", "U1", "T1") })
	returned("a press on the Home", func() error {
		return b.Handle(t.Context(), Incoming{Platform: "slack", UserID: "U1", Button: HomePrefix + "set:confirm:writes", EventID: "act:1"})
	})
	close(plat.gate)
	if h := plat.home(t, "U1", 2); !strings.Contains(h.Notice, "before every change") {
		t.Errorf("the Home after the press, published second: %+v", h)
	}
}

// idle waits until b has nothing queued or posting.
func idle(t *testing.T, b *Bot) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := b.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

// auditCountingStore counts the journals read (RunAudit) and the reads
// of a conversation's runs (ThreadRuns).
type auditCountingStore struct {
	*memStore
	audits, threadRuns atomic.Int32
}

func (s *auditCountingStore) RunAudit(ctx context.Context, runID string) ([]AuditEntry, error) {
	s.audits.Add(1)
	return s.memStore.RunAudit(ctx, runID)
}

func (s *auditCountingStore) ThreadRuns(ctx context.Context, key string) ([]*Run, error) {
	s.threadRuns.Add(1)
	return s.memStore.ThreadRuns(ctx, key)
}

// TestLastFilingsReadsBounded: the settings' last filings read the
// conversation's runs once and at most filingJournals journals, however
// many autopilot runs of the person filed nothing (each /settings and
// each Home publish reads them); the newest filings come first.
func TestLastFilingsReadsBounded(t *testing.T) {
	for _, c := range []struct {
		name          string
		empty, filed  int // newest runs that filed nothing, then older ones that filed
		wantFilings   int
		wantMaxAudits int32
	}{
		{"many empty", 100, 3, 0, filingJournals},
		{"filings first", 0, 100, shownFilings, shownFilings},
		{"few empty", 2, 3, 3, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &auditCountingStore{memStore: newMemStore()}
			b := New(st, &mockAgent{}, Config{AllowedUsers: []string{"slack:U1"}})
			const key = "slack:D1:"
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			n := c.filed + c.empty
			for i := range n {
				r := &Run{ID: fmt.Sprintf("r%03d", i), ThreadKey: key, Platform: "slack", ChatID: "D1", UserID: "U1",
					Status: RunDone, Autopilot: true, Answer: fmt.Sprintf("🤖 filed %d", i), Created: at.Add(time.Duration(i) * time.Minute)}
				ch := Change{Run: r}
				if i < c.filed { // the older runs filed a task
					ch.Audit = []AuditEntry{{RunID: r.ID, ThreadKey: key, Write: agent.Write{Kind: agent.MoveTask, ID: "t"},
						Inverse: []agent.Write{{Kind: agent.MoveTask, ID: "t"}}, Summary: "moved", At: r.Created}}
				}
				if err := st.Commit(t.Context(), ch); err != nil {
					t.Fatal(err)
				}
			}
			fs, err := b.lastFilings(t.Context(), "slack", "U1", PersonSettings{Conversation: key})
			if err != nil {
				t.Fatal(err)
			}
			if len(fs) != c.wantFilings {
				t.Errorf("%d filings, want %d: %+v", len(fs), c.wantFilings, fs)
			}
			if len(fs) > 0 && fs[0].RunID != fmt.Sprintf("r%03d", c.filed-1) {
				t.Errorf("first filing %s, want the newest that filed, r%03d", fs[0].RunID, c.filed-1)
			}
			if got := st.audits.Load(); got > c.wantMaxAudits {
				t.Errorf("%d journals read, want at most %d", got, c.wantMaxAudits)
			}
			if got := st.threadRuns.Load(); got != 1 {
				t.Errorf("the runs read %d times, want once", got)
			}
		})
	}
}

// lookupCounter is fakeAccounts counting the lookups of a connection.
type lookupCounter struct {
	*fakeAccounts
	lookups atomic.Int32
}

func (c *lookupCounter) Agent(ctx context.Context, platform, userID string) (Agent, error) {
	c.lookups.Add(1)
	return c.fakeAccounts.Agent(ctx, platform, userID)
}

// TestHomeUndoLooksUpTheAccountOnce: an Undo pressed on the Home (team
// mode) looks up the person's Todoist connection once in the press (the
// Home saying "Undoing…" shows what it found) and once in the undo's
// job (whose Home report shows what the undo used), not again for each
// Home; and it undoes.
func TestHomeUndoLooksUpTheAccountOnce(t *testing.T) {
	ag := &mockAgent{}
	acc := &lookupCounter{fakeAccounts: &fakeAccounts{agents: map[string]*mockAgent{"slack:U1": ag}}}
	b, plat := startHomeBot(t, Config{Accounts: acc, AllowedUsers: []string{"slack:U1"}})
	const key = "slack:D1:"
	r := &Run{ID: "r1", ThreadKey: key, Platform: "slack", ChatID: "D1", UserID: "U1", DM: true, Status: RunDone, Autopilot: true,
		Answer: "🤖 Filed 1 new task", Created: time.Now(), Updated: time.Now()}
	move := agent.Write{Kind: agent.MoveTask, ID: "t1", ProjectID: "p2"}
	if err := b.store.Commit(t.Context(), Change{Run: r, Audit: []AuditEntry{{RunID: "r1", ThreadKey: key, Write: move,
		Inverse: []agent.Write{{Kind: agent.MoveTask, ID: "t1", ProjectID: "inbox"}}, Summary: "moved", At: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Handle(t.Context(), Incoming{Platform: "slack", UserID: "U1", Button: HomePrefix + undoButtonPrefix + "r1", EventID: "act:1"}); err != nil {
		t.Fatal(err)
	}
	idle(t, b)
	if got, err := b.store.Run(t.Context(), "r1"); err != nil || !got.Undone {
		t.Fatalf("the run after the Home's Undo: %+v, %v", got, err)
	}
	if h := plat.home(t, "U1", 2); !strings.HasPrefix(h.Notice, "↩️ Undid") || h.Account == nil || !h.Account.Connected {
		t.Errorf("the Home after the undo: %+v", h)
	}
	if n := acc.lookups.Load(); n != 2 {
		t.Errorf("the connection looked up %d times, want 2 (the press, the undo's job)", n)
	}
}
