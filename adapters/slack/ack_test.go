package slack_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
)

// Ack marks a person's message with 👀 (reactions.add) as the bot
// receives it (issue 36: the sign of life decided at intake).
func TestAckReacts(t *testing.T) {
	a, srv := newAdapter(t)
	if err := a.Ack(t.Context(), "D1", "1700000000.000100"); err != nil {
		t.Fatal(err)
	}
	got := srv.Reactions("D1")
	if len(got) != 1 || got[0].TS != "1700000000.000100" || got[0].Name != "eyes" {
		t.Errorf("reactions %+v, want one 👀 on the message", got)
	}
}

// reactions.add is Tier 3 for the whole workspace (about 50 a minute):
// once the minute's are spent, Ack fails at once, without a call to
// Slack and without waiting out the minute, so that no sign of life
// waits and no 429 is earned.
func TestAckSkippedOnceTheMinuteIsSpent(t *testing.T) {
	a, srv, _ := newClockedAdapter(t)
	for i := range 50 {
		if err := a.Ack(t.Context(), fmt.Sprint("D", i), "1.000001"); err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
	}
	start := time.Now()
	if err := a.Ack(t.Context(), "D50", "1.000001"); err == nil {
		t.Error("the 51st ack of the minute succeeded")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the refused ack took %v", d)
	}
	if n, th := srv.Calls("reactions.add"), srv.Throttled("reactions.add"); n != 50 || th != 0 {
		t.Errorf("the fake saw %d calls and throttled %d, want 50 and none", n, th)
	}
}

// The fake enforces reactions.add's Tier 3 and assistant.threads.setStatus's
// per-channel limit (slacktest/limits.go), and reactions.add's errors.
func TestFakeReactionLimits(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	for i := range 50 {
		if out := srv.Call(t, "reactions.add", map[string][]string{"channel": {fmt.Sprint("D", i)}, "timestamp": {"1.1"}, "name": {"eyes"}}); out["ok"] != true {
			t.Fatalf("reaction %d: %v", i, out)
		}
	}
	resp := srv.Send(t, "reactions.add", map[string][]string{"channel": {"D1"}, "timestamp": {"1.1"}, "name": {"eyes"}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("the 51st reaction of the minute: %s, Retry-After %q", resp.Status, resp.Header.Get("Retry-After"))
	}
	if srv.Throttled("reactions.add") != 1 {
		t.Errorf("throttled %d, want 1", srv.Throttled("reactions.add"))
	}
}

// assistant.threads.setStatus is limited per channel, as chat.postMessage
// is: a 61st status in one minute in one DM is answered 429, while
// another person's DM has its own lane.
func TestFakeStatusLimitPerChannel(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	status := func(channel, thread string) int {
		resp := srv.Send(t, "assistant.threads.setStatus", map[string][]string{"channel_id": {channel}, "thread_ts": {thread}, "status": {"is working"}})
		resp.Body.Close()
		return resp.StatusCode
	}
	t1, _ := srv.StartAssistantThread("U1", "C1")
	t2, _ := srv.StartAssistantThread("U2", "C1")
	for i := range 60 {
		if code := status(srv.IM("U1"), t1); code != http.StatusOK {
			t.Fatalf("status %d: %d", i, code)
		}
	}
	if code := status(srv.IM("U1"), t1); code != http.StatusTooManyRequests {
		t.Errorf("the 61st status of the minute in one DM: %d", code)
	}
	if code := status(srv.IM("U2"), t2); code != http.StatusOK {
		t.Errorf("another DM's status: %d", code)
	}
}
