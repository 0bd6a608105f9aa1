package retry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
)

func TestAfter(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{"none", nil, 0, false},
		{"seconds", map[string]string{"Retry-After": "3"}, 3 * time.Second, true},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond, true},
		{"zero: at once", map[string]string{"Retry-After": "0"}, 0, true},
		{"spaces", map[string]string{"Retry-After": " 2 "}, 2 * time.Second, true},
		{"negative", map[string]string{"Retry-After": "-1"}, 0, false},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, false},
		{"huge", map[string]string{"Retry-After": "1e300"}, 0, false},
		{"NaN", map[string]string{"Retry-After": "NaN"}, 0, false},
		{"ms NaN", map[string]string{"Retry-After-Ms": "NaN"}, 0, false},
		{"HTTP-date", map[string]string{"Retry-After": "Wed, 25 Nov 2026 12:00:30 GMT"}, 30 * time.Second, true},
		{"HTTP-date past", map[string]string{"Retry-After": "Wed, 25 Nov 2026 11:59:00 GMT"}, 0, true},
		{"RFC 850 date", map[string]string{"Retry-After": "Wednesday, 25-Nov-26 12:00:10 GMT"}, 10 * time.Second, true},
		{"ms", map[string]string{"Retry-After-Ms": "250"}, 250 * time.Millisecond, true},
		{"fractional ms", map[string]string{"Retry-After-Ms": "0.5"}, 500 * time.Microsecond, true},
		{"ms zero", map[string]string{"Retry-After-Ms": "0"}, 0, true},
		{"ms before seconds", map[string]string{"Retry-After-Ms": "100", "Retry-After": "7"}, 100 * time.Millisecond, true},
		{"bad ms falls back to seconds", map[string]string{"Retry-After-Ms": "x", "Retry-After": "7"}, 7 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, ok := After(h, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("After(%v) = %v, %v; want %v, %v", tt.header, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestBackoffWait(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	tests := []struct {
		n        int
		lo, high time.Duration
	}{
		{0, 50 * time.Millisecond, 100 * time.Millisecond},
		{1, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 400 * time.Millisecond, 800 * time.Millisecond},
		{4, 500 * time.Millisecond, time.Second},
		{64, 500 * time.Millisecond, time.Second},
	}
	for _, tt := range tests {
		for range 50 {
			if got := b.Wait(tt.n); got < tt.lo || got > tt.high {
				t.Fatalf("Wait(%d) = %v; want within [%v, %v]", tt.n, got, tt.lo, tt.high)
			}
		}
	}
}

// attempts is an attempt function that fails with errs in turn (nil:
// success), asking to wait wait.
func attempts(wait time.Duration, errs ...error) (func(int) (time.Duration, error), *int) {
	calls := 0
	return func(n int) (time.Duration, error) {
		calls++
		err := errs[min(n, len(errs)-1)]
		return wait, err
	}, &calls
}

func TestDo(t *testing.T) {
	server := &agent.Error{Code: agent.ErrServer, Message: "the service is having trouble (HTTP 503)"}
	unreachable := &agent.Error{Code: agent.ErrUnreachable, Message: "could not reach X (connection refused): check X_URL"}
	tests := []struct {
		name      string
		maxWait   time.Duration
		wait      time.Duration
		errs      []error
		wantCalls int
		wantErr   string
	}{
		{"success", time.Minute, time.Second, []error{nil}, 1, ""},
		{"retried then success", time.Minute, time.Second, []error{server, server, nil}, 3, ""},
		{"budget spent", 10 * time.Second, 4 * time.Second, []error{server}, 3, "(gave up after 3 attempts over 8s)"},
		{"no retries", 0, time.Second, []error{server}, 1, "HTTP 503)"},
		{"unreachable: few attempts in a long budget", time.Hour, time.Millisecond, []error{unreachable},
			UnreachableAttempts, "check X_URL (gave up after 3 attempts over 2ms)"},
		{"asked for no wait, again and again: backoff ends the budget", 5 * time.Second, 0, []error{server}, 0, "(gave up after"},
		{"unreachable then reachable", time.Hour, time.Millisecond, []error{unreachable, unreachable, server, server, nil}, 5, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var slept []time.Duration
			p := Policy{MaxWait: tt.maxWait, Backoff: Backoff{Base: time.Second, Max: time.Second}, Sleep: func(_ context.Context, d time.Duration) error {
				slept = append(slept, d)
				return nil
			}}
			fn, calls := attempts(tt.wait, tt.errs...)
			err := p.Do(t.Context(), fn)
			if tt.wantCalls > 0 && *calls != tt.wantCalls {
				t.Errorf("attempts = %d; want %d", *calls, tt.wantCalls)
			}
			if len(slept) != *calls-1 && err == nil {
				t.Errorf("waits = %v; want one between each attempt", slept)
			}
			for i, d := range slept {
				if tt.wait == 0 && (i < maxZeroWaits) != (d == 0) {
					t.Errorf("waits = %v; want %d at once, then the backoff", slept, maxZeroWaits)
					break
				}
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("err = %v; want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(agent.ErrorMessageOf(err), tt.wantErr)):
				t.Errorf("err = %v; want it to say %q", err, tt.wantErr)
			}
		})
	}
}

func TestDoFinalErrorAndContext(t *testing.T) {
	final := errors.New("final")
	p := Policy{MaxWait: time.Minute, Sleep: func(context.Context, time.Duration) error { return nil }}
	calls := 0
	err := p.Do(t.Context(), func(int) (time.Duration, error) { calls++; return -1, final })
	if !errors.Is(err, final) || calls != 1 {
		t.Errorf("final error: err = %v after %d calls; want %v after 1", err, calls, final)
	}
	ctx, cancel := context.WithCancel(t.Context())
	calls = 0
	err = p.Do(ctx, func(int) (time.Duration, error) {
		calls++
		cancel()
		return time.Second, &agent.Error{Code: agent.ErrServer, Message: "x"}
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("canceled: err = %v after %d calls; want context.Canceled after 1", err, calls)
	}
}

// TestUnreachable sends real requests: to a port nothing listens on and
// to a name that cannot resolve (.invalid, RFC 2606), and, for
// contrast, to a server that answers too slowly.
func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/"
	ln.Close()
	slow, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close() // accepts (the kernel's backlog) but never answers

	tests := []struct {
		name, url, reason string
		ok                bool
	}{
		{"connection refused", closed, "connection refused", true},
		{"host not found", "http://nonexistent.invalid/", "host not found", true},
		{"no answer is slowness", "http://" + slow.Addr().String() + "/", "", false},
	}
	hc := &http.Client{Timeout: 200 * time.Millisecond}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, tt.url, nil)
			_, err := hc.Do(req)
			if err == nil {
				t.Fatal("request succeeded")
			}
			reason, ok := Unreachable(err)
			if reason != tt.reason || ok != tt.ok {
				t.Errorf("Unreachable(%v) = %q, %v; want %q, %v", err, reason, ok, tt.reason, tt.ok)
			}
			e := Unreached(err, "the thing at "+tt.url, "THING_URL", err)
			if tt.ok != (e != nil) {
				t.Fatalf("Unreached = %v; want an error: %v", e, tt.ok)
			}
			if e != nil && (e.Code != agent.ErrUnreachable || !strings.Contains(e.Message, "("+tt.reason+"): check THING_URL")) {
				t.Errorf("Unreached = %+v", e)
			}
		})
	}
	if _, ok := Unreachable(errors.New("connection refused")); ok {
		t.Error("a plain error with the words is not a network failure")
	}
}
