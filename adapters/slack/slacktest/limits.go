package slacktest

import (
	"math"
	"net/url"
	"time"
)

// Slack's rate limits as the fake enforces them, "applied on a 'per API
// method per workspace/team per app' basis" in tiers of calls a minute
// (docs.slack.dev/apis/web-api/rate-limits: Tier 2 "20+ per minute",
// Tier 3 "50+ per minute", Tier 4 "100+ per minute"); each method's
// page names its tier under Facts. A call over the limit is answered
// HTTP 429 with Retry-After in seconds, and counts for nothing. The
// fake reads "20+" as 20: a method's count is the calls it answered in
// the last 60 seconds (Slack publishes no window; a sliding minute is
// the fake's reading).
var tiers = map[string]int{
	"chat.startStream":  20,  // Tier 2: docs.slack.dev/reference/methods/chat.startStream
	"chat.stopStream":   20,  // Tier 2: docs.slack.dev/reference/methods/chat.stopStream
	"chat.update":       50,  // Tier 3: docs.slack.dev/reference/methods/chat.update
	"chat.delete":       50,  // Tier 3: docs.slack.dev/reference/methods/chat.delete
	"chat.appendStream": 100, // Tier 4: docs.slack.dev/reference/methods/chat.appendStream
	"views.publish":     100, // Tier 4: docs.slack.dev/reference/methods/views.publish
	// Tier 3: docs.slack.dev/reference/methods/reactions.add; the Java
	// SDK's table agrees (slackapi/java-slack-sdk
	// slack-api-client/src/main/java/com/slack/api/methods/MethodsRateLimits.java:
	// "setRateLimitTier(REACTIONS_ADD, Tier3)").
	"reactions.add": 50,
}

// postsPerChannel is chat.postMessage's special tier: it "generally
// allows posting one message per second per channel", "Short bursts >1
// allowed" (docs.slack.dev/apis/web-api/rate-limits;
// docs.slack.dev/reference/methods/chat.postMessage). Slack gives no
// burst size: the fake allows 60 posts in any 60 seconds per channel.
const postsPerChannel = 60

// perChannel are the methods limited per channel, as chat.postMessage
// is, by the argument naming the channel. assistant.threads.setStatus's
// page gives its limit as "Special"
// (docs.slack.dev/reference/methods/assistant.threads.setStatus); the
// Java SDK reads it as chat.postMessage's ("assistant.threads.setStatus
// has the similar tier with chat.postMessage API", slackapi/java-slack-sdk
// slack-api-client/src/main/java/com/slack/api/methods/MethodsRateLimitTier.java),
// so the fake keeps a lane of postsPerChannel per channel for it too.
var perChannel = map[string]string{
	"chat.postMessage":            "channel",
	"assistant.threads.setStatus": "channel_id",
}

// rateWindow is the span a method's calls are counted over.
const rateWindow = time.Minute

// overLimit reports, for a call of method (with its arguments form, which
// name the channel of a perChannel method), the Retry-After in seconds when the call is over
// its limit; 0 when it may be made, which counts it. mu must be held.
func (s *Server) overLimit(method string, form url.Values) int {
	limit, lane := tiers[method], method
	if arg, ok := perChannel[method]; ok {
		limit, lane = postsPerChannel, method+" "+form.Get(arg)
	}
	if limit == 0 {
		return 0
	}
	if s.lanes == nil {
		s.lanes = map[string][]time.Time{}
	}
	now := time.Now()
	calls := s.lanes[lane]
	for len(calls) > 0 && now.Sub(calls[0]) >= rateWindow {
		calls = calls[1:]
	}
	if len(calls) >= limit {
		s.lanes[lane] = calls
		s.throttled[method]++
		return max(1, int(math.Ceil(calls[0].Add(rateWindow).Sub(now).Seconds())))
	}
	s.lanes[lane] = append(calls, now)
	return 0
}

// Throttled is how many calls of method the fake answered 429 for being
// over Slack's limit (not those RateLimit asked for).
func (s *Server) Throttled(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.throttled[method]
}
