package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/adapters/telegram"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/postgres"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// receiver is a replica's intake on the database at url: a store, a bot
// and the Slack adapter (the Events API when appToken is empty, else
// Socket Mode), taking events and storing them as serve does. It runs
// no workers: what it stored stays in the database for whichever
// replica runs jobs.
type receiver struct {
	st   *postgres.Store
	base string // the Events API's base URL ("" in Socket Mode)
}

func startReceiver(t *testing.T, url string, sl *slacktest.Server, appToken string) *receiver {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	st, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	b := bot.New(st, nil, bot.Config{AllowedUsers: []string{"slack:U1"}})
	a, err := slack.New(ctx, slack.Config{BotToken: slacktest.Token, SigningSecret: slackSecret, AppToken: appToken, APIURL: sl.URL, Threads: b})
	if err != nil {
		t.Fatal(err)
	}
	b.AddPlatform(a)
	r := &receiver{st: st}
	done := make(chan struct{})
	if appToken == "" {
		mux := http.NewServeMux()
		if err := a.Routes(mux, b); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(mux)
		r.base = srv.URL
		close(done)
		t.Cleanup(srv.Close)
	} else {
		go func() { defer close(done); _ = a.Run(ctx, b) }()
	}
	t.Cleanup(func() { cancel(); <-done; _ = st.Close() })
	return r
}

func jobCount(t *testing.T, st bot.Store) int {
	t.Helper()
	jobs, err := st.Jobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return len(jobs)
}

// Two replicas take Events API POSTs on one database: Slack's retry of
// an event arriving at the other replica is dropped there (the dedupe
// key is in the database), so the event is answered once.
func TestSlackEventRetriedAtAnotherReplicaIsAnsweredOnce(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	e.cfg.DatabaseURL = pgtest.URL(t)
	sl, replicaA := serveSlack(t, e)
	replicaB := startReceiver(t, e.cfg.DatabaseURL, sl, "")
	ev := slacktest.MessageEvent("Ev1", "D1", "im", "U1", "/tidy-inbox", "1.1", "")
	if code := postSigned(t, replicaA+"/slack/events", "application/json", ev, slackSecret); code != 200 {
		t.Fatalf("replica A answered %d", code)
	}
	if code := postSigned(t, replicaB.base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
		t.Fatalf("replica B answered the retry %d", code)
	}
	waitFor(t, "the tidy's answer", func() bool { return strings.HasPrefix(lastPost(sl, "D1").Text, "Moved ") })
	if n := jobCount(t, replicaB.st); n != 0 {
		t.Errorf("%d jobs left in the database: replica B queued the retry", n)
	}
	runs, err := replicaB.st.Runs(t.Context())
	if err != nil || len(runs) != 1 {
		t.Errorf("%d runs (%v), want 1", len(runs), err)
	}
	answers := 0
	for _, p := range sl.Posts("D1") {
		if strings.HasPrefix(p.Text, "Moved ") {
			answers++
		}
	}
	if answers != 1 {
		t.Errorf("answered %d times:\n%s", answers, fmtPosts(sl.Posts("D1")))
	}
}

// The same events POSTed to two replicas at the same moment are stored
// once each: one job per event, whichever replica won.
func TestSlackEventsRacingAtTwoReplicasAreStoredOnce(t *testing.T) {
	u := pgtest.URL(t)
	sl := slacktest.New()
	t.Cleanup(sl.Close)
	a, b := startReceiver(t, u, sl, ""), startReceiver(t, u, sl, "")
	const events = 20
	var wg sync.WaitGroup
	for i := range events {
		ev := slacktest.MessageEvent(fmt.Sprintf("Ev%d", i), "D1", "im", "U1", fmt.Sprintf("message %d", i), fmt.Sprintf("%d.1", i+1), "")
		for _, r := range []*receiver{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if code := postSigned(t, r.base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
					t.Errorf("answered %d", code)
				}
			}()
		}
	}
	wg.Wait()
	if n := jobCount(t, a.st); n != events {
		t.Errorf("%d jobs for %d events POSTed to two replicas each, want %d", n, events, events)
	}
}

// In Socket Mode each replica holds its own connection. The fake sends
// every envelope to every connection (stricter than Slack, which picks
// one, and may retry on another): each replica acknowledges it and the
// database keeps the event once.
func TestSlackSocketModeEnvelopeAtTwoReplicasIsStoredOnce(t *testing.T) {
	u := pgtest.URL(t)
	sl := slacktest.New()
	t.Cleanup(sl.Close)
	a, _ := startReceiver(t, u, sl, slacktest.AppToken), startReceiver(t, u, sl, slacktest.AppToken)
	waitFor(t, "two Socket Mode connections", func() bool { return sl.Connections() == 2 })
	var ids []string
	for i := range 5 {
		var ev map[string]any
		_ = json.Unmarshal(slacktest.MessageEvent(fmt.Sprintf("Ev%d", i), "D1", "im", "U1", fmt.Sprintf("message %d", i), fmt.Sprintf("%d.1", i+1), ""), &ev)
		ids = append(ids, sl.Push("events_api", ev))
	}
	waitFor(t, "every envelope acknowledged", func() bool {
		for _, id := range ids {
			if !sl.Acked(id) {
				return false
			}
		}
		return true
	})
	deadline := time.Now().Add(5 * time.Second)
	for jobCount(t, a.st) < len(ids) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a second copy would be stored by now
	if n := jobCount(t, a.st); n != len(ids) {
		t.Errorf("%d jobs for %d envelopes each sent to two replicas, want %d", n, len(ids), len(ids))
	}
}

// Telegram webhooks: any replica takes the POST, and an update Telegram
// delivers again (to the one address, so to any replica) is stored once.
func TestTelegramWebhookUpdateAtTwoReplicasIsStoredOnce(t *testing.T) {
	u := pgtest.URL(t)
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	var bases []string
	var st *postgres.Store
	for range 2 {
		var err error
		if st, err = postgres.Open(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		b := bot.New(st, nil, bot.Config{AllowedUsers: []string{"telegram:7"}})
		a, err := telegram.New(telegram.Config{Token: tg.Token, APIURL: tg.URL, WebhookURL: "https://bot.example.com/telegram/webhook", WebhookSecret: "s3cret"})
		if err != nil {
			t.Fatal(err)
		}
		b.AddPlatform(a)
		mux := http.NewServeMux()
		if err := a.Routes(mux, b); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		bases = append(bases, srv.URL)
	}
	for id := 1; id <= 5; id++ {
		for _, base := range bases {
			req, _ := http.NewRequest(http.MethodPost, base+"/telegram/webhook", bytes.NewReader(telegramtest.Update(id, 7, 7, fmt.Sprintf("message %d", id))))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("update %d: %d", id, resp.StatusCode)
			}
		}
	}
	if n := jobCount(t, st); n != 5 {
		t.Errorf("%d jobs for 5 updates each delivered to two replicas, want 5", n)
	}
}

// texts records the texts of the updates a replica's poller hands over.
type texts struct {
	mu  sync.Mutex
	got []string
}

func (r *texts) Handle(_ context.Context, in bot.Incoming) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, in.Text)
	return nil
}

func (r *texts) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// Telegram long polling on one database: one replica polls (Telegram
// sees no overlapping getUpdates), and when it stops, the other leads
// within seconds and goes on from the offset saved in the database.
func TestTelegramLongPollingOneReplicaAtATimeOnPostgres(t *testing.T) {
	u := pgtest.URL(t)
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	type replica struct {
		rec    *texts
		cancel context.CancelFunc
		done   chan struct{}
	}
	start := func() *replica {
		st, err := postgres.Open(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		a, err := telegram.New(telegram.Config{Token: tg.Token, APIURL: tg.URL, PollTimeout: time.Second, Leader: st, Offsets: st})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		r := &replica{rec: &texts{}, cancel: cancel, done: make(chan struct{})}
		go func() { defer close(r.done); _ = a.Poll(ctx, r.rec); _ = st.Close() }()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	all := func(rs ...*replica) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.rec.list()...)
		}
		return out
	}
	a, b := start(), start()
	tg.PushText(7, 7, "one")
	tg.PushText(7, 7, "two")
	waitFor(t, "two updates", func() bool { return len(all(a, b)) == 2 })
	time.Sleep(2500 * time.Millisecond) // two long polls and more
	if n := tg.Conflicts(); n != 0 {
		t.Fatalf("%d overlapping getUpdates, want 0: both replicas poll", n)
	}
	leader, other := a, b
	if len(a.rec.list()) == 0 {
		leader, other = b, a
	}
	leader.cancel()
	<-leader.done
	stopped := time.Now()
	tg.PushText(7, 7, "three")
	waitFor(t, "the third update", func() bool { return len(all(a, b)) == 3 })
	t.Logf("the other replica handed an update over %v after the leader stopped", time.Since(stopped).Round(time.Millisecond))
	if got := strings.Join(all(leader, other), ","); got != "one,two,three" {
		t.Errorf("handed over %s, want each update once", got)
	}
}
