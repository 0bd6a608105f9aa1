// Package retry holds what the model and Todoist clients share about
// trying a request again: the loop with its budget, the backoff, how long
// a server asks to wait (Retry-After), and which network failures are not
// slowness but a service that cannot be reached at all.
package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// UnreachableAttempts is how many times a request is sent to a service
// that cannot be reached (connection refused, host not found) before the
// failure is final. Such a failure is not slowness: waiting out the whole
// retry budget (a minute) only delays the answer that names the service.
// With the default backoff the attempts span about a second or two.
const UnreachableAttempts = 3

// maxZeroWaits is how many times in a row a request is retried at once
// when the server asks for no wait (Retry-After: 0).
const maxZeroWaits = 3

// Policy is how long a client keeps trying one request.
type Policy struct {
	// MaxWait caps the total time waited between attempts: once the
	// next wait would pass it, the request fails with the last error.
	// Zero or negative: no retries.
	MaxWait time.Duration
	// Backoff is the wait once a server has asked maxZeroWaits times
	// in a row to try again at once.
	Backoff Backoff
	// Sleep waits between attempts; it must return ctx.Err() if ctx ends
	// first. Nil: Sleep.
	Sleep func(ctx context.Context, d time.Duration) error
	// OnRetry, if set, hears each retry before its wait (for a debug log).
	OnRetry func(attempt int, wait time.Duration, err error)
}

// Do calls attempt (with its 0-based number) until it succeeds, its error
// is final (a negative wait), ctx ends, the next wait would pass MaxWait,
// or the service has been unreachable UnreachableAttempts times. A final
// error after retries says how long the client tried (see GiveUp).
func (p Policy) Do(ctx context.Context, attempt func(n int) (time.Duration, error)) error {
	sleep := p.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	var waited time.Duration
	unreachable, zero := 0, 0
	for n := 0; ; n++ {
		wait, err := attempt(n)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if wait < 0 || p.MaxWait <= 0 {
			return err
		}
		if agent.ErrorCodeOf(err) == agent.ErrUnreachable {
			unreachable++
			if unreachable >= UnreachableAttempts {
				return GiveUp(err, n+1, waited)
			}
		}
		if wait == 0 {
			// A server may ask to try again at once; one that keeps
			// asking gets the backoff, so the budget still ends.
			if zero++; zero > maxZeroWaits {
				wait = p.Backoff.Wait(n)
			}
		}
		if waited+wait > p.MaxWait {
			return GiveUp(err, n+1, waited)
		}
		if p.OnRetry != nil {
			p.OnRetry(n+1, wait, err)
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		waited += wait
	}
}

// GiveUp turns the last retryable error into the final one, saying how
// long the client tried. An error that is not an *agent.Error, or that
// came from the first attempt, is returned as it is.
func GiveUp(err error, attempts int, waited time.Duration) error {
	var e *agent.Error
	if !errors.As(err, &e) || attempts < 2 {
		return err
	}
	return &agent.Error{Code: e.Code, Err: e.Err,
		Message: fmt.Sprintf("%s (gave up after %d attempts over %s)", e.Message, attempts, waited.Round(time.Millisecond))}
}

// Sleep waits d, or until ctx ends (then it returns ctx.Err()).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Backoff is exponential backoff with "equal jitter", so that clients
// that failed together do not retry together: the n-th retry (0-based)
// waits between half and all of Base·2ⁿ, at most Max.
type Backoff struct {
	Base, Max time.Duration
}

// Wait returns the wait before retry n (0-based).
func (b Backoff) Wait(n int) time.Duration {
	base := max(b.Base, time.Millisecond)
	top := max(b.Max, base)
	d := top
	if n < 30 {
		d = min(base<<n, top)
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// After reads how long an answer asks the client to wait before it tries
// again: retry-after-ms (milliseconds, as OpenAI sends it), else
// Retry-After (RFC 9110 §10.2.3: seconds or an HTTP-date). Seconds may be
// fractional ("1.5", as some servers send) and may be 0 (try again at
// once); a date in the past means 0. A negative, empty or unreadable
// value is no answer (ok false): the caller then backs off.
func After(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < maxSeconds*1000 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if !(s >= 0 && s < maxSeconds) { // NaN too
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// maxSeconds bounds a stated wait so that the conversion to a Duration
// cannot overflow (and NaN or Inf are refused); a wait this long is over
// any client's budget anyway.
const maxSeconds = 1e6

// Unreachable reports whether err is a failure to reach a server at all,
// as opposed to a slow or failing one: the connection was refused, the
// host name does not resolve, or there is no route to it. reason says
// which, in a few words for a person.
func Unreachable(err error) (reason string, ok bool) {
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		return "host not found", true
	case errors.As(err, &dns) && !dns.IsTimeout:
		return "DNS lookup failed", true
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused", true
	case errors.Is(err, syscall.ENETUNREACH):
		return "network unreachable", true
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "no route to host", true
	}
	return "", false
}

// Unreached returns the error to report when err is a failure to reach a
// service at all (see Unreachable), or nil when it is another failure.
// service names it with its address ("the model API at localhost:11434");
// check says what to look at ("OPENAI_BASE_URL, and that the server is
// running"); cause is kept for logs (err with any secret removed). This
// is the one place that words such a failure, for both clients.
func Unreached(err error, service, check string, cause error) *agent.Error {
	reason, ok := Unreachable(err)
	if !ok {
		return nil
	}
	return &agent.Error{Code: agent.ErrUnreachable, Err: cause,
		Message: fmt.Sprintf("could not reach %s (%s): check %s", service, reason, check)}
}
