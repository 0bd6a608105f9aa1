package telegram_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/telegram"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/bot"
)

// memLeader is a telegram.Leader and telegram.Offsets shared by the
// adapters of one test, as the replicas of one database share the
// PostgreSQL store's.
type memLeader struct {
	mu      sync.Mutex // protects the fields below
	holder  int        // 0: nobody leads
	next    int
	lose    context.CancelFunc // ends the holder's lead
	offset  int
	saved   time.Time
	saves   int
	leaders []string // the bot names leadership was asked for
	// unfenced counts the saves whose context did not carry the lead's
	// values (leadTag): a store could not have fenced them.
	unfenced int
}

// leadTag is the value a memLeader's lead carries: the leader's number,
// as the PostgreSQL store's lead carries its epoch.
type leadTag struct{}

func (l *memLeader) LeadPolling(ctx context.Context, name string) (context.Context, func(), error) {
	for {
		l.mu.Lock()
		l.leaders = append(l.leaders, name)
		if l.holder == 0 {
			l.next++
			me := l.next
			l.holder = me
			lead, cancel := context.WithCancel(context.WithValue(ctx, leadTag{}, me))
			l.lose = cancel
			l.mu.Unlock()
			return lead, func() {
				cancel()
				l.mu.Lock()
				if l.holder == me {
					l.holder = 0
				}
				l.mu.Unlock()
			}, nil
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// loseLead ends the current leader's lead, as a broken database
// connection does.
func (l *memLeader) loseLead() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lose != nil {
		l.lose()
	}
}

func (l *memLeader) PollOffset(context.Context, string) (int, time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.offset, l.saved, nil
}

func (l *memLeader) SavePollOffset(ctx context.Context, _ string, offset int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.saves++
	if ctx.Value(leadTag{}) == nil {
		l.unfenced++
	}
	if offset > l.offset {
		l.offset, l.saved = offset, time.Now()
	}
	return nil
}

func (l *memLeader) savedOffset() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.offset
}

// poller is one replica's adapter polling in the background.
type poller struct {
	rec    *recorder
	cancel context.CancelFunc
	done   chan error
}

func startPoller(t *testing.T, srv *telegramtest.Server, cfg telegram.Config) *poller {
	t.Helper()
	cfg.Token, cfg.APIURL, cfg.PollTimeout = srv.Token, srv.URL, time.Second
	a, err := telegram.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	p := &poller{rec: &recorder{}, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- a.Poll(ctx, p.rec) }()
	t.Cleanup(func() { cancel(); <-p.done })
	return p
}

// texts returns the texts every poller handed over, in order per poller.
func texts(ps ...*poller) []string {
	var out []string
	for _, p := range ps {
		for _, in := range p.rec.got() {
			out = append(out, in.Text)
		}
	}
	return out
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Two pollers of one bot without a leader conflict, as on Telegram: the
// later getUpdates ends the earlier with 409, and that poller stops
// with an error saying so.
func TestTwoPollersWithoutALeaderConflict(t *testing.T) {
	srv := telegramtest.New()
	t.Cleanup(srv.Close)
	a, b := startPoller(t, srv, telegram.Config{}), startPoller(t, srv, telegram.Config{})
	var err error
	select {
	case err = <-a.done:
		a.done <- err
	case err = <-b.done:
		b.done <- err
	case <-time.After(10 * time.Second):
		t.Fatal("neither poller stopped")
	}
	if err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("err = %v, want the 409 conflict", err)
	}
	if srv.Conflicts() == 0 {
		t.Error("the fake counted no conflict")
	}
}

// With a shared Leader, one replica polls (no 409 however long both
// run); when its lead is lost, the other takes over from the saved
// offset: every update is handed over once, none lost, none twice.
func TestOneReplicaPollsAndTheNextGoesOnFromTheSavedOffset(t *testing.T) {
	srv := telegramtest.New()
	t.Cleanup(srv.Close)
	l := &memLeader{}
	cfg := telegram.Config{Leader: l, Offsets: l}
	a, b := startPoller(t, srv, cfg), startPoller(t, srv, cfg)
	for _, text := range []string{"one", "two", "three"} {
		srv.PushText(42, 7, text)
	}
	waitFor(t, "three updates", func() bool { return len(texts(a, b)) == 3 })
	time.Sleep(2500 * time.Millisecond) // more than two long polls of 1 s
	if n := srv.Conflicts(); n != 0 {
		t.Fatalf("%d getUpdates conflicts while one replica leads, want 0", n)
	}
	first, second := a, b
	if len(a.rec.got()) == 0 {
		first, second = b, a
	}
	if len(second.rec.got()) != 0 {
		t.Fatalf("both replicas handed updates over: %v and %v", texts(first), texts(second))
	}
	waitFor(t, "the offset saved", func() bool { return l.savedOffset() == 4 })

	// The leader dies: the other takes over.
	first.cancel()
	if err := <-first.done; err != nil {
		t.Errorf("the old leader's Poll = %v", err)
	}
	first.done <- nil
	for _, text := range []string{"four", "five"} {
		srv.PushText(42, 7, text)
	}
	waitFor(t, "five updates", func() bool { return len(texts(a, b)) == 5 })
	if got := strings.Join(texts(first, second), ","); got != "one,two,three,four,five" {
		t.Errorf("handed over %s, want each update once in order", got)
	}
	if got := len(second.rec.got()); got != 2 {
		t.Errorf("the new leader handed over %d updates, want 2", got)
	}
	if l.savedOffset() != 6 {
		t.Errorf("saved offset %d, want 6", l.savedOffset())
	}
}

// A lead lost without the process dying (its database connection
// broke) stops the polling; the replica waits and leads again.
func TestALostLeadIsTakenAgain(t *testing.T) {
	srv := telegramtest.New()
	t.Cleanup(srv.Close)
	l := &memLeader{}
	p := startPoller(t, srv, telegram.Config{Leader: l, Offsets: l})
	srv.PushText(42, 7, "one")
	waitFor(t, "one update", func() bool { return len(texts(p)) == 1 })
	l.loseLead()
	srv.PushText(42, 7, "two")
	waitFor(t, "two updates", func() bool { return len(texts(p)) == 2 })
	if got := strings.Join(texts(p), ","); got != "one,two" {
		t.Errorf("handed over %s", got)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next < 2 {
		t.Errorf("led %d times, want 2", l.next)
	}
	if !strings.HasPrefix(l.leaders[0], "telegram:") {
		t.Errorf("leadership asked for %q, want telegram:<bot id>", l.leaders[0])
	}
}

// staleOffsets saved an offset beyond every update, long ago: Telegram
// may number updates afresh after a week without any, so the adapter
// must not use it.
type staleOffsets struct{ memLeader }

func (s *staleOffsets) PollOffset(context.Context, string) (int, time.Time, error) {
	return 1 << 30, time.Now().Add(-8 * 24 * time.Hour), nil
}

func TestAStaleSavedOffsetIsIgnored(t *testing.T) {
	srv := telegramtest.New()
	t.Cleanup(srv.Close)
	p := startPoller(t, srv, telegram.Config{Offsets: &staleOffsets{}})
	srv.PushText(42, 7, "hello")
	waitFor(t, "the update", func() bool { return len(texts(p)) == 1 })
}

// failingOffsets cannot read or save: polling goes on (Telegram's own
// confirmation and the bot's dedupe cover it).
type failingOffsets struct{}

func (failingOffsets) PollOffset(context.Context, string) (int, time.Time, error) {
	return 0, time.Time{}, errors.New("database down")
}
func (failingOffsets) SavePollOffset(context.Context, string, int) error {
	return errors.New("database down")
}

func TestOffsetStoreFailuresDoNotStopPolling(t *testing.T) {
	srv := telegramtest.New()
	t.Cleanup(srv.Close)
	p := startPoller(t, srv, telegram.Config{Offsets: failingOffsets{}})
	srv.PushText(42, 7, "one")
	waitFor(t, "one", func() bool { return len(texts(p)) == 1 })
	srv.PushText(42, 7, "two")
	waitFor(t, "two", func() bool { return len(texts(p)) == 2 })
	if got := strings.Join(texts(p), ","); got != "one,two" {
		t.Errorf("handed over %s", got)
	}
}

// The old leader stored updates 1 and 2 and saved offset 3, then died
// before a getUpdates confirmed them to Telegram: the new leader asks
// from 3, so they are not handed over again.
func TestANewLeaderStartsAtTheSavedOffset(t *testing.T) {
	srv := telegramtest.New()
	t.Cleanup(srv.Close)
	for _, text := range []string{"one", "two", "three"} {
		srv.PushText(42, 7, text)
	}
	l := &memLeader{offset: 3, saved: time.Now()}
	p := startPoller(t, srv, telegram.Config{Leader: l, Offsets: l})
	waitFor(t, "an update", func() bool { return len(texts(p)) > 0 })
	srv.PushText(42, 7, "four")
	waitFor(t, "two updates", func() bool { return len(texts(p)) >= 2 })
	if got := strings.Join(texts(p), ","); got != "three,four" {
		t.Errorf("handed over %s, want three,four", got)
	}
}

// stopped is a bot that has stopped taking updates.
type stopped struct{}

func (stopped) Handle(context.Context, bot.Incoming) error { return bot.ErrStopped }

// A stopped bot ends polling, leader or not: Poll returns instead of
// leading and polling again.
func TestPollEndsWhenTheBotStops(t *testing.T) {
	srv := telegramtest.New()
	t.Cleanup(srv.Close)
	l := &memLeader{}
	a, err := telegram.New(telegram.Config{Token: srv.Token, APIURL: srv.URL, PollTimeout: time.Second, Leader: l, Offsets: l})
	if err != nil {
		t.Fatal(err)
	}
	srv.PushText(42, 7, "hello")
	done := make(chan error, 1)
	go func() { done <- a.Poll(t.Context(), stopped{}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Poll = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Poll goes on after the bot stopped")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next != 1 || l.holder != 0 {
		t.Errorf("led %d times, holder %d: want one lead, released", l.next, l.holder)
	}
}

// getUpdates polls the fake once as a poller outside tidybot would.
func getUpdates(t *testing.T, srv *telegramtest.Server) {
	t.Helper()
	resp, err := http.PostForm(srv.URL+"/bot"+srv.Token+"/getUpdates", url.Values{"timeout": {"0"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// A poller outside the leadership (another deployment on the same
// token) ends the leader's getUpdates with 409: the leader, still
// leading once it has waited, stops with an error saying so. One whose
// lead ended meanwhile (a new leader polled first) just stands down.
func TestConflictWhileLeading(t *testing.T) {
	t.Cleanup(telegram.SetConflictWait(time.Second))
	srv := telegramtest.New()
	t.Cleanup(srv.Close)
	l := &memLeader{}
	p := startPoller(t, srv, telegram.Config{Leader: l, Offsets: l})
	srv.PushText(42, 7, "one")
	waitFor(t, "one", func() bool { return len(texts(p)) == 1 })
	getUpdates(t, srv)
	select {
	case err := <-p.done:
		p.done <- err
		if err == nil || !strings.Contains(err.Error(), "409") {
			t.Errorf("Poll = %v, want the 409 conflict", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the leader polls on beside a foreign poller")
	}

	l2 := &memLeader{}
	q := startPoller(t, srv, telegram.Config{Leader: l2, Offsets: l2})
	waitFor(t, "a lead", func() bool { l2.mu.Lock(); defer l2.mu.Unlock(); return l2.holder != 0 })
	time.Sleep(100 * time.Millisecond) // its getUpdates waits
	getUpdates(t, srv)
	l2.loseLead() // the lead ended while the 409 was on its way
	srv.PushText(42, 7, "two")
	waitFor(t, "two", func() bool { return len(texts(q)) == 1 })
	select {
	case err := <-q.done:
		t.Fatalf("Poll ended: %v", err)
	default:
	}
}

// leadSeen is a bot.Handler that notes the lead each update came with.
type leadSeen struct {
	mu    sync.Mutex
	leads []any
}

func (h *leadSeen) Handle(ctx context.Context, _ bot.Incoming) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leads = append(h.leads, ctx.Value(leadTag{}))
	return nil
}

func (h *leadSeen) seen() []any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]any(nil), h.leads...)
}

// TestPollCarriesItsLead: the updates a poll hands over and the offsets
// it saves carry its lead's values, by which a Leader fences them (the
// PostgreSQL store refuses them once another replica leads: issue 35,
// store/postgres TestPollLeadIsFenced).
func TestPollCarriesItsLead(t *testing.T) {
	srv := telegramtest.New()
	t.Cleanup(srv.Close)
	l := &memLeader{}
	a, err := telegram.New(telegram.Config{Token: srv.Token, APIURL: srv.URL, PollTimeout: time.Second, Leader: l, Offsets: l})
	if err != nil {
		t.Fatal(err)
	}
	h := &leadSeen{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Poll(ctx, h) }()
	srv.PushText(42, 7, "one")
	waitFor(t, "the update", func() bool { return len(h.seen()) == 1 })
	cancel()
	<-done
	if got := h.seen(); got[0] != 1 {
		t.Errorf("the update came with lead %v, want the first leader's", got[0])
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.saves == 0 || l.unfenced != 0 {
		t.Errorf("%d of %d offsets saved without the lead", l.unfenced, l.saves)
	}
}
