package agent_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
	"github.com/tidybot/tidybot/internal/sim"
)

// closedAddr returns a local address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// countSleeps stands in for a client's sleep between attempts: it counts
// them and returns at once.
func countSleeps(n *atomic.Int32) func(context.Context, time.Duration) error {
	return func(ctx context.Context, _ time.Duration) error {
		n.Add(1)
		return ctx.Err()
	}
}

// TestUnreachableServiceIsNamed: with the model or Todoist unreachable
// (connection refused, host not found), a run ends within a few attempts,
// not after a minute of retries, and its answer names the service that
// failed and the setting to check; /tidy-inbox with Todoist down blames
// Todoist and never calls the model. Through the real clients.
func TestUnreachableServiceIsNamed(t *testing.T) {
	hc := &http.Client{Timeout: 10 * time.Second}
	tests := []struct {
		name              string
		modelURL, todoURL string // "" : the fake
		overview          bool
		want              string
		wantModelCalls    int32 // calls the fake model answered
		wantSleepsModel   int32
		wantSleepsTodoist int32
	}{
		{name: "model: connection refused", modelURL: "http://" + closedAddr(t) + "/v1",
			want: "(connection refused): check OPENAI_BASE_URL", wantSleepsModel: 2},
		{name: "model: host not found", modelURL: "http://nonexistent.invalid/v1",
			want: "could not reach the model API at nonexistent.invalid (host not found): check OPENAI_BASE_URL", wantSleepsModel: 2},
		// The time zone read and the overview each try 3 times.
		{name: "todoist on /tidy-inbox: connection refused", todoURL: "http://" + closedAddr(t) + "/api/v1", overview: true,
			want: "(connection refused): check the network connection and TODOIST_API_URL", wantSleepsTodoist: 4},
		{name: "todoist on /tidy-inbox: host not found", todoURL: "http://nonexistent.invalid/api/v1", overview: true,
			want: "could not reach Todoist at nonexistent.invalid (host not found)", wantSleepsTodoist: 4},
		// The first read the model asks for ends the run.
		{name: "todoist on a message", todoURL: "http://" + closedAddr(t) + "/api/v1",
			want: "(connection refused): check the network connection and TODOIST_API_URL", wantModelCalls: 1, wantSleepsTodoist: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			todo := todoisttest.New(t)
			todo.SeedTalkInbox()
			tidier := &sim.Tidier{Groups: sim.TalkGroups}
			srv := openaitest.New(openaitest.FromAgent(tidier.Reply))
			t.Cleanup(srv.Close)
			var modelSleeps, todoSleeps atomic.Int32
			modelURL, todoURL := srv.URL, todo.URL
			if tt.modelURL != "" {
				modelURL = tt.modelURL
			}
			if tt.todoURL != "" {
				todoURL = tt.todoURL
			}
			// A retry budget of a minute: only the fail-fast rule ends
			// the retries early.
			model := openai.New(openai.Config{APIKey: "sk-test", BaseURL: modelURL, Model: "scripted", MaxRetryWait: time.Minute,
				BackoffBase: time.Second, BackoffMax: time.Second, Sleep: countSleeps(&modelSleeps)}, hc)
			tasks := todoist.New(todo.Token, todoURL, hc, todoist.WithMaxRetryWait(time.Minute),
				todoist.WithBackoff(time.Second, time.Second), todoist.WithSleep(countSleeps(&todoSleeps)))
			start := time.Now()
			out := agent.New(model, tasks, agent.Config{Protocol: agent.ProtocolTools}).Start(t.Context(),
				agent.Input{Instruction: "Tidy my inbox", Overview: tt.overview}, agent.Hooks{})
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("the answer took %s", d) // a generous bound: the counts below are the test
			}
			if out.Status != agent.StatusFailed || !strings.Contains(out.Answer, tt.want) {
				t.Errorf("outcome %s %q; want failed, saying %q", out.Status, out.Answer, tt.want)
			}
			if strings.Contains(out.Answer, "model service said") {
				t.Errorf("answer %q words a failure to connect as something the model said", out.Answer)
			}
			if got := srv.Calls(); int32(got) != tt.wantModelCalls {
				t.Errorf("model calls = %d; want %d", got, tt.wantModelCalls)
			}
			if m, td := modelSleeps.Load(), todoSleeps.Load(); m != tt.wantSleepsModel || td != tt.wantSleepsTodoist {
				t.Errorf("retries: model %d, Todoist %d; want %d and %d", m, td, tt.wantSleepsModel, tt.wantSleepsTodoist)
			}
		})
	}
}
