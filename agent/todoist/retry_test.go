package todoist_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// sleepRecorder stands in for the client's sleep: it records each wait
// and returns at once.
type sleepRecorder struct {
	mu    sync.Mutex // protects waits
	waits []time.Duration
}

func (r *sleepRecorder) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits = append(r.waits, d)
	return ctx.Err()
}

func (r *sleepRecorder) total() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var sum time.Duration
	for _, d := range r.waits {
		sum += d
	}
	return sum
}

func recordingClient(t *testing.T, srv *todoisttest.Server, opts ...todoist.Option) (*todoist.Client, *sleepRecorder) {
	t.Helper()
	rec := &sleepRecorder{}
	opts = append([]todoist.Option{todoist.WithSleep(rec.sleep), todoist.WithBackoff(100*time.Millisecond, time.Second)}, opts...)
	return todoist.New(srv.Token, srv.URL, srv.Client(), opts...), rec
}

func TestRetryRateLimit(t *testing.T) {
	tests := []struct {
		name      string
		faults    int
		fault     todoisttest.Fault
		wantWaits []time.Duration // exact, or nil to check the backoff range
	}{
		{"Retry-After header", 1, todoisttest.Fault{Status: 429, RetryAfter: "2", ExtraRetryAfter: 9}, []time.Duration{2 * time.Second}},
		{"error_extra.retry_after", 1, todoisttest.Fault{Status: 429, ExtraRetryAfter: 3}, []time.Duration{3 * time.Second}},
		{"twice", 2, todoisttest.Fault{Status: 429, RetryAfter: "1"}, []time.Duration{time.Second, time.Second}},
		{"no hint: backoff", 3, todoisttest.Fault{Status: 429}, nil},
		{"5xx: backoff", 3, todoisttest.Fault{Status: 503}, nil},
		// error_extra.retry_after is "Seconds to wait before retrying"
		// (developer.todoist.com/api/v1 #tag/Sync/Overview): honoured on
		// any status, not only 429.
		{"5xx asking to wait", 1, todoisttest.Fault{Status: 503, ExtraRetryAfter: 4}, []time.Duration{4 * time.Second}},
		{"5xx with Retry-After", 1, todoisttest.Fault{Status: 502, RetryAfter: "6"}, []time.Duration{6 * time.Second}},
		{"4xx asking to wait", 1, todoisttest.Fault{Status: 400, ExtraRetryAfter: 2}, []time.Duration{2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := todoisttest.New(t)
			c, rec := recordingClient(t, srv)
			srv.FailNext("/projects", tt.faults, tt.fault)
			ps, err := c.Projects(t.Context())
			if err != nil || len(ps) != 1 {
				t.Fatalf("Projects = %v, %v", ps, err)
			}
			if n := srv.Requests("/projects"); n != tt.faults+1 {
				t.Errorf("%d requests, want %d", n, tt.faults+1)
			}
			if tt.wantWaits != nil {
				if !equalDurations(rec.waits, tt.wantWaits) {
					t.Errorf("waits %v, want %v", rec.waits, tt.wantWaits)
				}
				return
			}
			// Exponential with jitter: wait n is in [base·2ⁿ/2, base·2ⁿ].
			if len(rec.waits) != tt.faults {
				t.Fatalf("waits %v", rec.waits)
			}
			for n, d := range rec.waits {
				hi := 100 * time.Millisecond << n
				if d < hi/2 || d > hi {
					t.Errorf("wait %d = %v, want in [%v, %v]", n, d, hi/2, hi)
				}
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRetryServerStormOutlastsCap(t *testing.T) {
	srv := todoisttest.New(t)
	c, rec := recordingClient(t, srv, todoist.WithMaxRetryWait(10*time.Second))
	srv.FailNext("", -1, todoisttest.Fault{Status: 503})
	_, err := c.Snapshot(t.Context())
	e := wantCode(t, err, agent.ErrServer)
	if !strings.Contains(e.Message, "Todoist is having trouble (HTTP 503)") || !strings.Contains(e.Message, "gave up after") {
		t.Errorf("message %q", e.Message)
	}
	if got := rec.total(); got > 10*time.Second || got < 5*time.Second {
		t.Errorf("waited %v in all, want close to the 10s cap and not over", got)
	}
	if n := srv.Requests("/sync"); n != len(rec.waits)+1 {
		t.Errorf("%d requests for %d waits", n, len(rec.waits))
	}
}

func TestRetryAfterLongerThanCap(t *testing.T) {
	srv := todoisttest.New(t)
	c, rec := recordingClient(t, srv, todoist.WithMaxRetryWait(time.Minute))
	srv.FailNext("/labels", -1, todoisttest.Fault{Status: 429, RetryAfter: "66"})
	_, err := c.Labels(t.Context())
	e := wantCode(t, err, agent.ErrRateLimited)
	if !strings.Contains(e.Message, "1m6s") {
		t.Errorf("message %q does not say how long Todoist asked to wait", e.Message)
	}
	if len(rec.waits) != 0 || srv.Requests("/labels") != 1 {
		t.Errorf("waited %v over %d requests; want no wait past the cap", rec.waits, srv.Requests("/labels"))
	}
}

func TestRetryOff(t *testing.T) {
	srv := todoisttest.New(t)
	c, _ := recordingClient(t, srv, todoist.WithMaxRetryWait(0))
	srv.FailNext("/labels", 1, todoisttest.Fault{Status: 502})
	_, err := c.Labels(t.Context())
	wantCode(t, err, agent.ErrServer)
	if n := srv.Requests("/labels"); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// The timing tests run in a synctest bubble on the fake's DirectClient
// (no socket), so the client's real sleep runs on the bubble's clock.

func TestRetryTimingSynctest(t *testing.T) {
	srv := todoisttest.New(t, todoisttest.WithLatency(150*time.Millisecond))
	synctest.Test(t, func(t *testing.T) {
		c := todoist.New(srv.Token, srv.URL, srv.DirectClient())
		srv.FailNext("/projects", 1, todoisttest.Fault{Status: 429, RetryAfter: "5"})
		start := time.Now()
		if _, err := c.Projects(t.Context()); err != nil {
			t.Fatal(err)
		}
		// Two requests of 150 ms and the 5 s Todoist asked for.
		if got, want := time.Since(start), 5*time.Second+300*time.Millisecond; got != want {
			t.Errorf("took %v, want %v", got, want)
		}
	})
}

func TestCancelStopsBackoff(t *testing.T) {
	srv := todoisttest.New(t)
	srv.FailNext("/tasks", -1, todoisttest.Fault{Status: 429, RetryAfter: "30"})
	synctest.Test(t, func(t *testing.T) {
		c := todoist.New(srv.Token, srv.URL, srv.DirectClient())
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, err = c.Tasks(ctx, agent.TaskQuery{})
		}()
		time.Sleep(10 * time.Second) // the client is waiting out Retry-After
		synctest.Wait()
		cancel()
		<-done
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
		if got := time.Since(start); got != 10*time.Second {
			t.Errorf("returned after %v, want 10s", got)
		}
	})
	if n := srv.Requests("/tasks"); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestDeadlineStopsBackoff(t *testing.T) {
	srv := todoisttest.New(t)
	srv.FailNext("/sync", -1, todoisttest.Fault{Status: 503})
	synctest.Test(t, func(t *testing.T) {
		c := todoist.New(srv.Token, srv.URL, srv.DirectClient())
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.Apply(ctx, []agent.Write{{Kind: agent.CloseTask, ID: "AAAAAAAAAAAAAAAA", UUID: agent.NewUUID()}})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v, want context.DeadlineExceeded", err)
		}
		if got := time.Since(start); got != 3*time.Second {
			t.Errorf("returned after %v, want 3s", got)
		}
	})
}
