package discordtest

import (
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rate limits as https://discord.com/developers/docs/topics/rate-limits
// describes them: each route has a bucket per top-level resource (its
// "major parameter": channel_id, guild_id, webhook_id + webhook_token;
// the interaction routes count per interaction token), answered with
// X-RateLimit-Limit, -Remaining, -Reset (epoch seconds), -Reset-After
// (seconds) and -Bucket headers. A call over the limit is 429 with
// {"message", "retry_after" (seconds), "global"} and a Retry-After
// header; the global limit sets X-RateLimit-Global, and
// X-RateLimit-Scope says "user" or "global" (the same page). "Interaction
// endpoints are not bound to the bot's Global Rate Limit" (the same
// page). The fake's own readings: the numbers (a route's limit and
// window, Server's bucketLimit and bucketWindow; the page publishes none
// and says to read the headers instead), and that every /webhooks/ route
// counts as an interaction endpoint (the bot calls /webhooks/ only with
// an interaction's token).

type bucket struct {
	count int
	reset time.Time
}

// forcedLimit answers the next n calls of a route with 429 (status 0)
// or with a server error.
type forcedLimit struct {
	route  string // normalized ("POST /channels/{}/messages") or exact ("POST /channels/123/messages")
	n      int
	status int
}

// limitBody is the 429 body
// (https://discord.com/developers/docs/topics/rate-limits#exceeding-a-rate-limit).
type limitBody struct {
	Message    string  `json:"message"`
	RetryAfter float64 `json:"retry_after"`
	Global     bool    `json:"global"`
	Code       int     `json:"code,omitempty"`
}

// RateLimit answers the next n calls of a route with 429 Too Many
// Requests, Retry-After and the X-RateLimit headers; other routes (and,
// for an exact path, the same route on other channels) go on. route is
// "POST /channels/{id}/messages" (every channel) or
// "POST /channels/123/messages" (one channel), without /api/v9.
func (s *Server) RateLimit(route string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forced = append(s.forced, &forcedLimit{route: normalizeRoute(route), n: n})
}

// Fail answers the next n calls of a route (as RateLimit names it) with
// a server error status (500, 502, 503) and the body
// {"message": "502: Bad Gateway", "code": 0} (the fake's reading: the
// docs describe no body for a 5xx); discordgo retries a 502 itself
// (discordgo restapi.go, RequestWithLockedBucket).
func (s *Server) Fail(route string, status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forced = append(s.forced, &forcedLimit{route: normalizeRoute(route), n: n, status: status})
}

// Hold makes the calls of a route (as RateLimit names it) wait, before
// they are counted against a bucket or answered, until release is
// called or the client gives up (the request's context ends): a Discord
// that is slow to answer. It cites nothing of Discord's: a knob for
// tests of what waits behind a slow call. Requests counts a held call
// as soon as it arrives, so a test can wait for it to be held. Close
// releases every hold.
func (s *Server) Hold(route string) (release func()) {
	h := &hold{route: normalizeRoute(route), done: make(chan struct{})}
	s.mu.Lock()
	s.holds = append(s.holds, h)
	s.mu.Unlock()
	return func() { s.release(h) }
}

// hold is a route's calls waiting until done closes.
type hold struct {
	route string
	done  chan struct{}
	once  sync.Once
}

func (s *Server) release(h *hold) {
	s.mu.Lock()
	s.holds = slices.DeleteFunc(s.holds, func(x *hold) bool { return x == h })
	s.mu.Unlock()
	h.once.Do(func() { close(h.done) })
}

// held waits while a hold covers c; false when the client gave up.
func (s *Server) held(c *call) bool {
	exact := c.r.Method + " " + c.path
	s.mu.Lock()
	var waits []chan struct{}
	for _, h := range s.holds {
		if h.route == c.route || h.route == exact {
			waits = append(waits, h.done)
		}
	}
	s.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-c.r.Context().Done():
			return false
		}
	}
	return true
}

// GlobalRateLimit answers the next n calls of any route but the
// interaction callbacks and follow-ups with the global 429.
func (s *Server) GlobalRateLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.globalForced += n
}

// Limited is how many calls the fake answered 429.
func (s *Server) Limited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limited
}

// majorKey is a call's bucket: its route and its top-level resource.
func majorKey(c *call) string {
	for _, k := range []string{"channel", "guild", "interaction"} {
		if v, ok := c.p[k]; ok {
			return c.route + " " + v
		}
	}
	if _, ok := c.p["token"]; ok {
		return c.route + " " + c.p["app"] + "/" + c.p["token"]
	}
	return c.route
}

// bucketHash is the X-RateLimit-Bucket of a route: "A unique string
// denoting the rate limit being encountered (non-inclusive of top-level
// resources in the path)" (rate-limits#header-format), so the same for
// every major parameter of that route.
func bucketHash(route string) string {
	h := fnv.New64a()
	h.Write([]byte(route))
	return fmt.Sprintf("%016x", h.Sum64())
}

func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
}

// rateLimit counts a call against its bucket and returns the headers to
// send and, when the call is refused, the 429 body.
func (s *Server) rateLimit(c *call) (http.Header, *limitBody, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	hdr := http.Header{}
	interactionRoute := strings.Contains(c.route, " /interactions/") || strings.Contains(c.route, " /webhooks/")
	if s.globalForced > 0 && !interactionRoute {
		s.globalForced--
		s.limited++
		hdr.Set("Retry-After", strconv.Itoa(int(math.Ceil(s.retryAfter.Seconds()))))
		hdr.Set("X-RateLimit-Global", "true")
		hdr.Set("X-RateLimit-Scope", "global")
		return hdr, &limitBody{Message: "You are being rate limited.", RetryAfter: s.retryAfter.Seconds(), Global: true}, nil
	}
	key := majorKey(c)
	b, ok := s.buckets[key]
	if !ok || !now.Before(b.reset) {
		b = &bucket{reset: now.Add(s.bucketWindow)}
		s.buckets[key] = b
	}
	hdr.Set("X-RateLimit-Bucket", bucketHash(c.route))
	hdr.Set("X-RateLimit-Limit", strconv.Itoa(s.bucketLimit))
	refuse := func(after time.Duration) (http.Header, *limitBody, *apiError) {
		s.limited++
		hdr.Set("X-RateLimit-Remaining", "0")
		hdr.Set("X-RateLimit-Reset", strconv.FormatFloat(float64(now.Add(after).UnixMilli())/1000, 'f', 3, 64))
		hdr.Set("X-RateLimit-Reset-After", seconds(after))
		hdr.Set("Retry-After", strconv.Itoa(int(math.Ceil(after.Seconds()))))
		hdr.Set("X-RateLimit-Scope", "user")
		return hdr, &limitBody{Message: "You are being rate limited.", RetryAfter: after.Seconds(), Global: false}, nil
	}
	exact := c.r.Method + " " + c.path
	for i, f := range s.forced {
		if f.route == c.route || f.route == exact {
			f.n--
			if f.n <= 0 {
				s.forced = append(s.forced[:i], s.forced[i+1:]...)
			}
			if f.status != 0 {
				return nil, nil, &apiError{status: f.status, Code: 0, Message: fmt.Sprintf("%d: %s", f.status, http.StatusText(f.status))}
			}
			return refuse(s.retryAfter)
		}
	}
	if b.count >= s.bucketLimit {
		return refuse(b.reset.Sub(now))
	}
	b.count++
	hdr.Set("X-RateLimit-Remaining", strconv.Itoa(s.bucketLimit-b.count))
	hdr.Set("X-RateLimit-Reset", strconv.FormatFloat(float64(b.reset.UnixMilli())/1000, 'f', 3, 64))
	hdr.Set("X-RateLimit-Reset-After", seconds(b.reset.Sub(now)))
	return hdr, nil, nil
}
