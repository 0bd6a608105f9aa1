package openai_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/internal/retry"
)

var hi = agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}}

func TestRetries(t *testing.T) {
	cfg := openai.Config{BackoffBase: time.Second, BackoffMax: 8 * time.Second}
	quota := openaitest.Reply{Status: http.StatusTooManyRequests, Error: &openaitest.APIError{
		Message: "You exceeded your current quota, please check your plan and billing details.", Type: "insufficient_quota", Code: "insufficient_quota"}}
	tests := []struct {
		name      string
		replies   []openaitest.Reply
		wantCalls int
		wantWaits []time.Duration // exact waits; nil: see waitIn
		waitIn    [][2]time.Duration
		wantCode  agent.ErrorCode // "" for success
		wantIn    string
	}{
		{name: "429 with Retry-After, then success",
			replies:   []openaitest.Reply{openaitest.RateLimited("2"), openaitest.Text("ok")},
			wantCalls: 2, wantWaits: []time.Duration{2 * time.Second}},
		{name: "two 429s with fractional Retry-After",
			replies:   []openaitest.Reply{openaitest.RateLimited("0.5"), openaitest.RateLimited("1"), openaitest.Text("ok")},
			wantCalls: 3, wantWaits: []time.Duration{500 * time.Millisecond, time.Second}},
		{name: "429 without Retry-After backs off",
			replies:   []openaitest.Reply{openaitest.RateLimited(""), openaitest.Text("ok")},
			wantCalls: 2, waitIn: [][2]time.Duration{{500 * time.Millisecond, time.Second}}},
		{name: "500, 503 with Retry-After, 502 from a proxy, then success",
			replies: []openaitest.Reply{openaitest.ServerError(), {Status: 503, RetryAfter: "3"},
				{Status: http.StatusBadGateway, Body: "<html>502 Bad Gateway</html>"}, openaitest.Text("ok")},
			wantCalls: 4, waitIn: [][2]time.Duration{{500 * time.Millisecond, time.Second}, {3 * time.Second, 3 * time.Second}, {2 * time.Second, 4 * time.Second}}},
		{name: "400 is final",
			replies:   []openaitest.Reply{openaitest.BadRequest("Invalid 'messages[0].content': string too long.", "messages[0].content", "string_above_max_length")},
			wantCalls: 1, wantCode: agent.ErrInvalid, wantIn: "the model API refused the request (HTTP 400): Invalid 'messages[0].content': string too long."},
		{name: "context too long",
			replies:   []openaitest.Reply{openaitest.BadRequest("This model's maximum context length is 128000 tokens.", "messages", "context_length_exceeded")},
			wantCalls: 1, wantCode: agent.ErrInvalid, wantIn: "too long for the model"},
		{name: "exhausted quota is final",
			replies:   []openaitest.Reply{quota},
			wantCalls: 1, wantCode: agent.ErrRateLimited, wantIn: "no quota left"},
		{name: "403",
			replies:   []openaitest.Reply{openaitest.Error(http.StatusForbidden, "Country, region, or territory not supported")},
			wantCalls: 1, wantCode: agent.ErrForbidden, wantIn: "OPENAI_API_KEY and OPENAI_MODEL"},
		{name: "404 names the model",
			replies:   []openaitest.Reply{openaitest.Error(http.StatusNotFound, "The model `gpt-9` does not exist or you do not have access to it.")},
			wantCalls: 1, wantCode: agent.ErrInvalid, wantIn: `does not know model "gpt-4.1-mini" (HTTP 404): check OPENAI_MODEL and OPENAI_BASE_URL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, c, sl := start(t, openaitest.Replies(tt.replies...), cfg)
			resp, err := c.Complete(t.Context(), hi)
			if tt.wantCode == "" {
				if err != nil {
					t.Fatal(err)
				}
				if resp.Content != "ok" {
					t.Errorf("content = %q, want ok", resp.Content)
				}
			} else {
				if err == nil {
					t.Fatal("no error")
				}
				if got := agent.ErrorCodeOf(err); got != tt.wantCode {
					t.Errorf("code = %q, want %q (%v)", got, tt.wantCode, err)
				}
				if got := agent.ErrorMessageOf(err); !strings.Contains(got, tt.wantIn) {
					t.Errorf("message = %q, want %q in it", got, tt.wantIn)
				}
				if !strings.HasPrefix(err.Error(), "openai: chat completion: ") {
					t.Errorf("error = %q, want the context prefix", err)
				}
			}
			if got := srv.Calls(); got != tt.wantCalls {
				t.Errorf("calls = %d, want %d", got, tt.wantCalls)
			}
			if tt.wantWaits != nil && fmt.Sprint(sl.waits) != fmt.Sprint(tt.wantWaits) {
				t.Errorf("waits = %v, want %v", sl.waits, tt.wantWaits)
			}
			if tt.waitIn != nil {
				if len(sl.waits) != len(tt.waitIn) {
					t.Fatalf("waits = %v, want %d", sl.waits, len(tt.waitIn))
				}
				for i, w := range sl.waits {
					if w < tt.waitIn[i][0] || w > tt.waitIn[i][1] {
						t.Errorf("wait %d = %s, want %s..%s", i, w, tt.waitIn[i][0], tt.waitIn[i][1])
					}
				}
			}
		})
	}
}

func TestRetryCap(t *testing.T) {
	always := func(r openaitest.Reply) openaitest.Script {
		return func(openaitest.Request) openaitest.Reply { return r }
	}
	tests := []struct {
		name      string
		script    openaitest.Script
		cfg       openai.Config
		wantCode  agent.ErrorCode
		wantIn    string
		wantCalls int // 0: at least 2
	}{
		{"500 storm", always(openaitest.ServerError()),
			openai.Config{MaxRetryWait: 10 * time.Second, BackoffBase: time.Second, BackoffMax: 4 * time.Second},
			agent.ErrServer, "the model API is having trouble (HTTP 500); try again later (gave up after ", 0},
		{"Retry-After beyond the cap", always(openaitest.RateLimited("120")),
			openai.Config{MaxRetryWait: 60 * time.Second},
			agent.ErrRateLimited, "rate limit is reached", 1},
		{"retries off", always(openaitest.ServerError()),
			openai.Config{MaxRetryWait: -1},
			agent.ErrServer, "HTTP 500", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, c, sl := start(t, tt.script, tt.cfg)
			_, err := c.Complete(t.Context(), hi)
			if got := agent.ErrorCodeOf(err); got != tt.wantCode {
				t.Fatalf("code = %q, want %q (%v)", got, tt.wantCode, err)
			}
			if got := agent.ErrorMessageOf(err); !strings.Contains(got, tt.wantIn) {
				t.Errorf("message = %q, want %q in it", got, tt.wantIn)
			}
			calls := srv.Calls()
			if tt.wantCalls != 0 && calls != tt.wantCalls || tt.wantCalls == 0 && calls < 2 {
				t.Errorf("calls = %d, want %d", calls, tt.wantCalls)
			}
			if calls != len(sl.waits)+1 {
				t.Errorf("calls = %d after %d waits", calls, len(sl.waits))
			}
			limit := max(tt.cfg.MaxRetryWait, 0)
			if sl.total() > limit {
				t.Errorf("waited %s, more than the cap %s", sl.total(), limit)
			}
		})
	}
}

// TestBackoffOnTheClock runs the real sleep on synctest's clock: a 500
// storm ends within the retry cap, and cancelling stops a long
// Retry-After wait at once.
func TestBackoffOnTheClock(t *testing.T) {
	storm := openaitest.New(func(openaitest.Request) openaitest.Reply { return openaitest.ServerError() })
	t.Cleanup(storm.Close)
	slow := openaitest.New(func(openaitest.Request) openaitest.Reply { return openaitest.RateLimited("30") })
	t.Cleanup(slow.Close)

	t.Run("storm within the cap", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := openai.New(openai.Config{BaseURL: storm.URL, MaxRetryWait: 20 * time.Second}, storm.DirectClient())
			start := time.Now()
			_, err := c.Complete(t.Context(), hi)
			if agent.ErrorCodeOf(err) != agent.ErrServer {
				t.Fatalf("err = %v, want a server error", err)
			}
			if d := time.Since(start); d <= 0 || d > 20*time.Second {
				t.Errorf("gave up after %s, want within 20s", d)
			}
		})
	})
	t.Run("cancel stops the wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := openai.New(openai.Config{BaseURL: slow.URL}, slow.DirectClient())
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(5*time.Second, cancel)
			start := time.Now()
			n := slow.Calls()
			_, err := c.Complete(ctx, hi)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if d := time.Since(start); d != 5*time.Second {
				t.Errorf("returned after %s, want 5s (at the cancel, not after Retry-After's 30s)", d)
			}
			if got := slow.Calls() - n; got != 1 {
				t.Errorf("calls = %d, want 1", got)
			}
		})
	})
}

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
			sl := &sleeper{}
			c := openai.New(openai.Config{BaseURL: "http://" + tt.host + "/v1", Model: "gpt-4.1-mini", MaxRetryWait: time.Minute,
				BackoffBase: time.Second, BackoffMax: time.Second, Sleep: sl.sleep}, &http.Client{Timeout: 10 * time.Second})
			_, err := c.Complete(t.Context(), hi)
			want := "could not reach the model API at " + tt.host + " (" + tt.reason + "): check OPENAI_BASE_URL"
			if agent.ErrorCodeOf(err) != agent.ErrUnreachable || !strings.Contains(agent.ErrorMessageOf(err), want) {
				t.Errorf("err = %v; want code %s and %q", err, agent.ErrUnreachable, want)
			}
			if len(sl.waits) != retry.UnreachableAttempts-1 {
				t.Errorf("waits = %v; want %d (%d attempts)", sl.waits, retry.UnreachableAttempts-1, retry.UnreachableAttempts)
			}
			// Voice notes go to the speech server, whose setting it names.
			_, err = openai.NewTranscriber(openai.Config{BaseURL: "http://" + tt.host + "/v1"}, &http.Client{Timeout: 10 * time.Second}).
				Transcribe(t.Context(), "note.ogg", []byte("OggS"))
			wantSpeech := "could not reach the speech server at " + tt.host + " (" + tt.reason + "): check TIDYBOT_TRANSCRIBE_URL"
			if agent.ErrorCodeOf(err) != agent.ErrUnreachable || !strings.Contains(agent.ErrorMessageOf(err), wantSpeech) {
				t.Errorf("Transcribe: err = %v; want code %s and %q", err, agent.ErrUnreachable, wantSpeech)
			}
			// The start-up look-up says the same, once.
			_, err = c.LookUp(t.Context())
			if agent.ErrorCodeOf(err) != agent.ErrUnreachable || !strings.Contains(agent.ErrorMessageOf(err), want) {
				t.Errorf("LookUp: err = %v; want code %s and %q", err, agent.ErrUnreachable, want)
			}
		})
	}
}

// TestKeyNeverLeaks makes servers quote the Authorization header back in
// every way and checks that neither errors nor logs repeat the key.
func TestKeyNeverLeaks(t *testing.T) {
	echo := func(status int) openaitest.Script {
		return func(req openaitest.Request) openaitest.Reply {
			return openaitest.Error(status, "request with "+req.Header.Get("Authorization")+" failed")
		}
	}
	rawEcho := func(req openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Status: http.StatusBadGateway, Body: "proxy error; headers: Authorization=" + req.Header.Get("Authorization")}
	}
	tests := []struct {
		name     string
		key      string
		script   openaitest.Script
		opts     []openaitest.Option
		wantCode agent.ErrorCode
		wantMsg  string // the whole user-facing message, when set
	}{
		{"401 echoes the key", "sk-proj-SECRETSECRET0123456789", nil, []openaitest.Option{openaitest.WithAPIKey("sk-proj-right")},
			agent.ErrUnauthorized, "the model API rejected the key: check OPENAI_API_KEY"},
		{"401 echoes a key of another shape", "local-key-SECRET42", nil, []openaitest.Option{openaitest.WithAPIKey("other")},
			agent.ErrUnauthorized, "the model API rejected the key: check OPENAI_API_KEY"},
		{"400 quotes the key", "sk-SECRETSECRET", echo(http.StatusBadRequest), nil, agent.ErrInvalid, ""},
		{"500 storm quotes the key", "local-key-SECRET42", echo(http.StatusInternalServerError), nil, agent.ErrServer, ""},
		{"proxy page quotes the key", "sk-SECRETSECRET", rawEcho, nil, agent.ErrServer, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			_, c, _ := start(t, tt.script, openai.Config{APIKey: tt.key, Logger: log, MaxRetryWait: 5 * time.Second, BackoffBase: time.Second}, tt.opts...)
			_, err := c.Complete(t.Context(), hi)
			if err == nil {
				t.Fatal("no error")
			}
			if got := agent.ErrorCodeOf(err); got != tt.wantCode {
				t.Errorf("code = %q, want %q (%v)", got, tt.wantCode, err)
			}
			if tt.wantMsg != "" && agent.ErrorMessageOf(err) != tt.wantMsg {
				t.Errorf("message = %q, want %q", agent.ErrorMessageOf(err), tt.wantMsg)
			}
			for e := error(err); e != nil; e = errors.Unwrap(e) {
				for _, s := range []string{e.Error(), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e)} {
					if strings.Contains(s, "SECRET") {
						t.Errorf("error in the chain (%T) contains the key: %s", e, s)
					}
				}
			}
			if strings.Contains(logs.String(), "SECRET") {
				t.Errorf("logs contain the key:\n%s", logs.String())
			}
		})
	}
}
