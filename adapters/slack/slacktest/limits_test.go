package slacktest_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
)

// TestMethodTiers: the fake answers each limited method 429 (with
// Retry-After) past its tier's calls in a minute, per method: Tier 2
// chat.startStream and chat.stopStream 20, Tier 3 chat.update 50,
// Tier 4 chat.appendStream 100, chat.postMessage 60 a minute per
// channel (issue 38 item 1: startStream was once Tier 4 in the fake). A
// method over its limit does not hold back another, nor postMessage in
// another channel.
func TestMethodTiers(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	call := func(method, channel string) int {
		t.Helper()
		resp := srv.Send(t, method, url.Values{"channel": {channel}})
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: 429 without Retry-After", method)
		}
		return resp.StatusCode
	}
	for _, tt := range []struct {
		method string
		limit  int
	}{{"chat.startStream", 20}, {"chat.stopStream", 20}, {"chat.update", 50}, {"chat.appendStream", 100}, {"chat.postMessage", 60}} {
		for i := range tt.limit {
			if code := call(tt.method, "C1"); code == http.StatusTooManyRequests {
				t.Fatalf("%s: call %d of the minute answered 429, want %d allowed", tt.method, i+1, tt.limit)
			}
		}
		if code := call(tt.method, "C1"); code != http.StatusTooManyRequests || srv.Throttled(tt.method) != 1 {
			t.Errorf("%s: call %d of the minute answered %d, want 429", tt.method, tt.limit+1, code)
		}
	}
	if code := call("chat.postMessage", "C2"); code == http.StatusTooManyRequests {
		t.Error("chat.postMessage in another channel answered 429")
	}
	if code := call("chat.delete", "C1"); code == http.StatusTooManyRequests {
		t.Error("chat.delete answered 429 while other methods are over their limits")
	}
}
