package todoist_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/internal/retry"
)

// TestUnreachableFailsFast: a refused connection or a host that does not
// resolve is not slowness. The client tries a few times, not for its
// whole retry budget (a minute here), and says which setting to check.
func TestUnreachableFailsFast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	tests := []struct{ name, host, reason string }{
		{"connection refused", closed, "connection refused"},
		{"host not found", "nonexistent.invalid", "host not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &sleepRecorder{}
			c := todoist.New("secret-token", "http://"+tt.host+"/api/v1", &http.Client{Timeout: 10 * time.Second},
				todoist.WithSleep(rec.sleep), todoist.WithBackoff(time.Second, time.Second), todoist.WithMaxRetryWait(time.Minute))
			_, err := c.User(t.Context())
			want := "could not reach Todoist at " + tt.host + " (" + tt.reason + "): check the network connection and TODOIST_API_URL"
			if agent.ErrorCodeOf(err) != agent.ErrUnreachable || !strings.Contains(agent.ErrorMessageOf(err), want) {
				t.Errorf("err = %v; want code %s and %q", err, agent.ErrUnreachable, want)
			}
			if strings.Contains(err.Error(), "secret-token") {
				t.Errorf("err = %v; it holds the token", err)
			}
			if len(rec.waits) != retry.UnreachableAttempts-1 {
				t.Errorf("waits = %v; want %d (%d attempts)", rec.waits, retry.UnreachableAttempts-1, retry.UnreachableAttempts)
			}
		})
	}
}
