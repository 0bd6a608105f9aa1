package slack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.TextLimiter = (*Adapter)(nil)

// MaxText implements bot.TextLimiter: the bot cuts an answer or question
// to what one Slack message shows.
func (a *Adapter) MaxText() int { return maxMessage }

// perMinute is the calls a minute Slack allows each method it limits by
// tier, "on a 'per API method per workspace/team per app' basis"
// (docs.slack.dev/apis/web-api/rate-limits; each method's page names its
// tier): the adapter keeps one lane per method of its workspace (an
// Adapter is one workspace's bot token). chat.postMessage's limit is per
// channel (about one a second): a 429 there holds that conversation
// only, in the bot's send queue, and is not kept here.
var perMinute = map[string]int{
	"chat.startStream":  20,  // Tier 2
	"chat.stopStream":   20,  // Tier 2
	"chat.update":       50,  // Tier 3
	"chat.delete":       50,  // Tier 3
	"chat.appendStream": 100, // Tier 4
	"reactions.add":     50,  // Tier 3: the acknowledgement's 👀 (Ack)
}

// errNoStreamBudget is a chat.startStream not made: the streams of the
// last minute have used chat.startStream's or chat.stopStream's budget,
// so the answer is posted without a preview rather than wait.
var errNoStreamBudget = errors.New("no stream budget left this minute (chat.startStream and chat.stopStream are Tier 2); answering without a preview")

// openStreamLimit is how long a started stream keeps its stop reserved:
// one never stopped (its process died) frees its reservation then.
const openStreamLimit = 15 * time.Minute

// rateLanes is the adapter's HTTP transport: it keeps Slack's per-method
// limits as lanes, so that one method's 429 holds back that method only.
// A call of a lane Slack paused (Retry-After), or one over its limit this
// minute, is answered 429 with the wait at once, without a request; the
// bot's send queue then holds back that call's conversation alone, and
// drops a droppable one (a stream append, a progress edit). A stream
// starts only while chat.startStream has room and chat.stopStream has
// room for every open stream's stop (each start reserves its stop);
// otherwise the start fails at once (errNoStreamBudget) and the answer is
// posted without a preview.
type rateLanes struct {
	base http.RoundTripper
	now  func() time.Time

	mu     sync.Mutex             // protects the fields below
	calls  map[string][]time.Time // by method: its calls of the last minute
	paused map[string]time.Time   // by method: Slack's Retry-After
	open   []time.Time            // streams started and not stopped: their stops are reserved
}

func newRateLanes(base http.RoundTripper, now func() time.Time) *rateLanes {
	if base == nil {
		base = http.DefaultTransport
	}
	return &rateLanes{base: base, now: now, calls: map[string][]time.Time{}, paused: map[string]time.Time{}}
}

// recent is method's calls of the last minute. mu must be held.
func (l *rateLanes) recent(method string, now time.Time) []time.Time {
	calls := l.calls[method]
	for len(calls) > 0 && now.Sub(calls[0]) >= time.Minute {
		calls = calls[1:]
	}
	l.calls[method] = calls
	for len(l.open) > 0 && now.Sub(l.open[0]) >= openStreamLimit {
		l.open = l.open[1:]
	}
	return calls
}

// canStart reports whether a stream may start now. mu must be held.
func (l *rateLanes) canStart(now time.Time) bool {
	return len(l.recent("chat.startStream", now)) < perMinute["chat.startStream"] &&
		len(l.recent("chat.stopStream", now))+len(l.open) < perMinute["chat.stopStream"]
}

// CanStream reports whether a stream could start now: false while the
// streams of the last minute have spent chat.startStream's or
// chat.stopStream's budget (Tier 2, about 20 a minute each), or Slack
// paused either. A preview asked for then fails at once (StartStream
// answers an error, no call made); the bot can ask this first and post
// the answer without a preview.
func (a *Adapter) CanStream() bool {
	if a.lanes == nil {
		return true
	}
	l := a.lanes
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	return l.canStart(now) && !now.Before(l.paused["chat.startStream"]) && !now.Before(l.paused["chat.stopStream"])
}

// RoundTrip implements http.RoundTripper.
func (l *rateLanes) RoundTrip(req *http.Request) (*http.Response, error) {
	method := path.Base(req.URL.Path)
	limit, tiered := perMinute[method]
	if !tiered {
		return l.base.RoundTrip(req)
	}
	l.mu.Lock()
	now := l.now()
	if until := l.paused[method]; now.Before(until) {
		l.mu.Unlock()
		return tooMany(req, until.Sub(now)), nil
	}
	calls := l.recent(method, now)
	switch {
	case method == "chat.startStream" && !l.canStart(now):
		l.mu.Unlock()
		return nil, fmt.Errorf("slack: %s: %w", method, errNoStreamBudget)
	case method == "chat.stopStream" && len(l.open) > 0:
		l.open = l.open[1:] // its reservation: a stop is never held back here
	case method != "chat.stopStream" && len(calls) >= limit:
		l.mu.Unlock()
		return tooMany(req, calls[0].Add(time.Minute).Sub(now)), nil
	}
	l.calls[method] = append(calls, now)
	if method == "chat.startStream" {
		l.open = append(l.open, now)
	}
	l.mu.Unlock()
	resp, err := l.base.RoundTrip(req)
	if method == "chat.startStream" && !started(resp, err) {
		l.unreserve()
	}
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		l.pause(method, resp.Header.Get("Retry-After"))
	}
	return resp, err
}

// started reads chat.startStream's answer: ok true is a stream started.
func started(resp *http.Response, err error) bool {
	if err != nil || resp.StatusCode != http.StatusOK {
		return false
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var ans struct {
		OK bool `json:"ok"`
	}
	return err == nil && json.Unmarshal(body, &ans) == nil && ans.OK
}

// unreserve gives back the stop a failed start reserved.
func (l *rateLanes) unreserve() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.open); n > 0 {
		l.open = l.open[:n-1]
	}
}

// pause holds back method for Slack's Retry-After (seconds; 1 if none).
func (l *rateLanes) pause(method, retryAfter string) {
	secs, err := strconv.Atoi(retryAfter)
	if err != nil || secs < 1 {
		secs = 1
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := l.now().Add(time.Duration(secs) * time.Second); until.After(l.paused[method]) {
		l.paused[method] = until
	}
}

// tooMany is a 429 answered without a request, as Slack answers one
// (Retry-After in whole seconds, docs.slack.dev/apis/web-api/rate-limits).
func tooMany(req *http.Request, wait time.Duration) *http.Response {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	h := http.Header{}
	h.Set("Retry-After", strconv.Itoa(secs))
	h.Set("Content-Type", "application/json; charset=utf-8")
	return &http.Response{Status: "429 Too Many Requests", StatusCode: http.StatusTooManyRequests, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader([]byte(`{"ok":false,"error":"ratelimited"}`))), Request: req}
}
