package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
)

// health returns serve's /healthz status and body.
func health(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestServeWaitsForAnUnreachablePlatform: a platform whose API refuses
// connections at start does not end serve (a restart loop under
// compose); serve says why on /healthz (503, the reason, no token) and
// tries again until the API answers, then is ready.
func TestServeWaitsForAnUnreachablePlatform(t *testing.T) {
	for _, name := range []string{"telegram", "slack"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			addr := refusedAddr(t) // refused until the API comes up below
			var api, token string
			switch name {
			case "telegram":
				tg := telegramtest.New()
				t.Cleanup(tg.Close)
				api, token = tg.URL, tg.Token
				e.cfg.TelegramToken, e.cfg.TelegramURL = tg.Token, "http://"+addr
			case "slack":
				sl := slacktest.New()
				t.Cleanup(sl.Close)
				api, token = sl.URL, slacktest.Token
				e.cfg.SlackBotToken, e.cfg.SlackAppToken, e.cfg.SlackURL = slacktest.Token, slacktest.AppToken, "http://"+addr+"/api/"
			}
			r := startMain(t, e, func(m *Main) { m.backoff = 20 * time.Millisecond })
			code, body := health(t, r.base)
			if want := "not ready: could not reach "; code != http.StatusServiceUnavailable || !strings.HasPrefix(body, want) ||
				!strings.Contains(body, addr+" (connection refused)") || strings.Contains(body, token) {
				t.Errorf("/healthz while %s is down: %d %q; want 503 %q… %s (connection refused)", name, code, body, want, addr)
			}
			if code, _ := get(t, r.base+"/runs/x"); code != http.StatusServiceUnavailable {
				t.Errorf("another route while not ready: %d, want 503", code)
			}

			// The API comes up at the address serve keeps trying.
			target, _ := url.Parse(api)
			target.Path = ""
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Skipf("the address was taken meanwhile: %v", err)
			}
			proxy := &http.Server{Handler: httputil.NewSingleHostReverseProxy(target)}
			go proxy.Serve(ln)
			t.Cleanup(func() { proxy.Shutdown(context.Background()) })
			waitFor(t, "/healthz ok", func() bool { code, _ := health(t, r.base); return code == http.StatusOK })
			// Stopped while the API is still up, as the test's cleanup
			// would take it down first (last registered, first run),
			// while Run may still be registering the commands: Telegram
			// going away then is Run's to wait out (adapters/telegram
			// TestRunWaitsOutANetworkThatFailsAfterGetMe), and a call on
			// a kept-alive connection the proxy closes ends in EOF, which
			// is not the network failure this test is about.
			r.stop() // fails the test if serve returns an error
			if logs := r.logs.String(); !strings.Contains(logs, "cannot be reached") || strings.Contains(logs, token) {
				t.Errorf("the logs do not say why serve waited, or hold the token:\n%s", logs)
			}
		})
	}
}

// TestServeExitsOnARefusedToken: a token the platform refuses is not
// waited for: serve ends at once, saying which setting to check.
func TestServeExitsOnARefusedToken(t *testing.T) {
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	e := newEnv(t)
	e.cfg.TelegramToken, e.cfg.TelegramURL, e.cfg.HTTPAddr = "999:wrong", tg.URL, freeAddr(t)
	m := &Main{Args: []string{"serve"}, Config: &e.cfg, Stdout: io.Discard, Stderr: io.Discard, backoff: 20 * time.Millisecond}
	defer m.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := m.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "Telegram refused the token (Unauthorized): check TELEGRAM_BOT_TOKEN") || ctx.Err() != nil {
		t.Errorf("serve: %v; want it to end at once with the token's message", err)
	}
}

// TestServeStoppedWhileWaitingEndsCleanly: stopping serve (SIGTERM,
// Ctrl-C; compose's stop) while it waits for an unreachable platform is
// a stop: it returns no error, as a stop of a running serve does, so
// the exit status and the container's do not report a failure.
func TestServeStoppedWhileWaitingEndsCleanly(t *testing.T) {
	e := newEnv(t)
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	e.cfg.TelegramToken, e.cfg.TelegramURL = tg.Token, "http://"+refusedAddr(t)
	e.cfg.LogLevel = "info"
	r := startMain(t, e, func(m *Main) { m.backoff = 20 * time.Millisecond })
	if code, _ := health(t, r.base); code != http.StatusServiceUnavailable {
		t.Fatalf("/healthz while Telegram is down: %d, want 503", code)
	}
	r.stop() // fails the test if serve returns an error
	if logs := r.logs.String(); !strings.Contains(logs, "stopped while waiting") {
		t.Errorf("the logs do not say serve stopped while waiting:\n%s", logs)
	}
}
