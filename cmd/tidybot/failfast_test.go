package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// runChat runs `tidybot chat` on input and returns its output, its logs
// and its error.
func (e *env) runChat(t *testing.T, input string, interactive bool) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Args: []string{"chat"}, Stdin: strings.NewReader(input), Stdout: &out, Stderr: &errOut, Config: &e.cfg,
		Interactive: interactive, backoff: time.Millisecond}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err = m.Run(ctx)
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	return out.String(), errOut.String(), err
}

// TestChatUnreachableServiceIsNamed: with the model or Todoist
// unreachable, chat warns at start-up (and starts), each run fails fast
// with an answer naming the service and the setting, and chat fed by a
// pipe exits non-zero; on a terminal the person has read the answer, and
// chat ends normally.
func TestChatUnreachableServiceIsNamed(t *testing.T) {
	refused := refusedAddr(t)
	tests := []struct {
		name, model, todoist, input, want string
	}{
		{name: "model: connection refused", model: "http://" + refused + "/v1", input: "hello\n",
			want: "could not reach the model API at " + refused + " (connection refused): check OPENAI_BASE_URL"},
		{name: "model: host not found", model: "http://nonexistent.invalid/v1", input: "hello\n",
			want: "could not reach the model API at nonexistent.invalid (host not found): check OPENAI_BASE_URL"},
		{name: "todoist: connection refused", todoist: "http://" + refused + "/api/v1", input: "/tidy-inbox\n",
			want: "could not reach Todoist at " + refused + " (connection refused): check the network connection and TODOIST_API_URL"},
		{name: "todoist: host not found", todoist: "http://nonexistent.invalid/api/v1", input: "/tidy-inbox\n",
			want: "could not reach Todoist at nonexistent.invalid (host not found)"},
	}
	for _, tt := range tests {
		for _, interactive := range []bool{false, true} {
			name := tt.name
			if interactive {
				name += "/terminal"
			}
			t.Run(name, func(t *testing.T) {
				e := newEnv(t)
				e.todo.SeedTalkInbox()
				if tt.model != "" {
					e.cfg.OpenAIBaseURL = tt.model
				}
				if tt.todoist != "" {
					e.cfg.TodoistURL = tt.todoist
				}
				start := time.Now()
				out, logs, err := e.runChat(t, tt.input, interactive)
				if d := time.Since(start); d > 30*time.Second {
					t.Errorf("chat took %s", d) // a generous bound; the clients' tests count the attempts
				}
				mustContain(t, out, "I couldn't finish: "+tt.want)
				if strings.Contains(out, "slow to answer") || strings.Contains(out, "model service said") {
					t.Errorf("a failure to connect worded as slowness or as the model's answer:\n%s", out)
				}
				if !strings.Contains(logs, "WARN") || !strings.Contains(logs, tt.want) || !strings.Contains(logs, "starting anyway") {
					t.Errorf("start-up logs lack a warning saying %q:\n%s", tt.want, logs)
				}
				switch {
				case interactive && err != nil:
					t.Errorf("chat on a terminal: %v; want nil", err)
				case !interactive && (err == nil || !strings.Contains(err.Error(), "a run failed: I couldn't finish: "+tt.want)):
					t.Errorf("chat from a pipe: err = %v; want one naming the failed run", err)
				}
				if tt.todoist != "" && e.model.Calls() != 0 {
					t.Errorf("model calls = %d; want none when Todoist cannot be read", e.model.Calls())
				}
			})
		}
	}
}

// refusedAddr is an address nothing listens on. It is on 127.0.0.2, where
// the fakes' httptest servers (127.0.0.1) never listen: a port freed on
// 127.0.0.1 was seen taken again by a later subtest's fake Todoist, which
// then answered the "unreachable" requests.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no second loopback address to refuse connections on: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestChatExitsZeroWhenRunsSucceed: a pipe whose runs all succeed exits 0
// even after an earlier chat's run failed.
func TestChatExitsZeroWhenRunsSucceed(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	good := e.cfg.OpenAIBaseURL
	e.cfg.OpenAIBaseURL = "http://" + refusedAddr(t) + "/v1"
	if _, _, err := e.runChat(t, "hello\n", false); err == nil {
		t.Fatal("first chat: want an error")
	}
	e.cfg.OpenAIBaseURL = good
	out, logs, err := e.runChat(t, "/tidy-inbox\n", false)
	if err != nil {
		t.Errorf("second chat: %v\n%s\n%s", err, out, logs)
	}
}

// TestStartupRejectedTodoistTokenIsFatal: a Todoist token that Todoist
// rejects stops chat and serve at start-up, naming TODOIST_TOKEN (the
// model's rejected key already does, naming OPENAI_API_KEY).
func TestStartupRejectedTodoistTokenIsFatal(t *testing.T) {
	for _, cmd := range []string{"chat", "serve"} {
		t.Run(cmd, func(t *testing.T) {
			e := newEnv(t)
			e.cfg.TodoistToken = "not-the-token"
			e.cfg.HTTPAddr = freeAddr(t)
			var logs syncBuffer
			m := &Main{Args: []string{cmd}, Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &logs, Config: &e.cfg, backoff: time.Millisecond}
			defer m.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			err := m.Run(ctx)
			if err == nil || !strings.Contains(err.Error(), "check TODOIST_TOKEN") {
				t.Errorf("err = %v; want one naming TODOIST_TOKEN", err)
			}
			if err != nil && strings.Contains(err.Error()+logs.String(), "not-the-token") {
				t.Errorf("the token leaked: %v\n%s", err, logs.String())
			}
		})
	}
}

// TestServeStartsWithServicesUnreachable: serve starts with the model and
// Todoist unreachable (a laptop offline), and says so in one warning line
// each.
func TestServeStartsWithServicesUnreachable(t *testing.T) {
	e := newEnv(t)
	refused := refusedAddr(t)
	e.cfg.OpenAIBaseURL = "http://" + refused + "/v1"
	e.cfg.TodoistURL = "http://nonexistent.invalid/api/v1"
	e.cfg.HTTPAddr = freeAddr(t)
	var logs syncBuffer
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	m := &Main{Args: []string{"serve"}, Config: &e.cfg, Stdout: &bytes.Buffer{}, Stderr: &logs, backoff: time.Millisecond}
	defer m.Close()
	go func() { done <- m.Run(ctx) }()
	waitServing(t, "http://"+e.cfg.HTTPAddr, done, &logs)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	for _, want := range []string{
		"could not reach the model API at " + refused + " (connection refused): check OPENAI_BASE_URL",
		"could not reach Todoist at nonexistent.invalid (host not found): check the network connection and TODOIST_API_URL",
	} {
		if n := strings.Count(logs.String(), want); n != 1 {
			t.Errorf("logs say %q %d times; want once:\n%s", want, n, logs.String())
		}
	}
}
