package telegram_test

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/telegram"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent"
)

// closedAddr is an address nothing listens on: a connection is refused.
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

// TestNewSaysWhyItCannotConnect: a network failure at start is said as
// one (unreachable, with the reason, worth waiting for), never blamed
// on the token; a token Telegram refuses is said as the token's fault.
func TestNewSaysWhyItCannotConnect(t *testing.T) {
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	addr := closedAddr(t)
	for _, tt := range []struct {
		name, token, url string
		unreachable      bool
		want             string
	}{
		{name: "refused", token: tg.Token, url: "http://" + addr, unreachable: true,
			want: "telegram: getMe: could not reach Telegram at " + addr + " (connection refused): check the network connection and TELEGRAM_API_URL"},
		{name: "DNS", token: tg.Token, url: "http://nonexistent.invalid", unreachable: true,
			want: "telegram: getMe: could not reach Telegram at nonexistent.invalid (host not found)"},
		{name: "token refused", token: "999:wrong", url: tg.URL,
			want: "telegram: getMe: Telegram refused the token (Unauthorized): check TELEGRAM_BOT_TOKEN"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := telegram.New(telegram.Config{Token: tt.token, APIURL: tt.url})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("New: %v; want %q…", err, tt.want)
			}
			var ae *agent.Error
			if got := errors.As(err, &ae) && ae.Code == agent.ErrUnreachable; got != tt.unreachable {
				t.Errorf("unreachable = %v, want %v", got, tt.unreachable)
			}
			if tt.unreachable && strings.Contains(err.Error(), "check TELEGRAM_BOT_TOKEN") {
				t.Errorf("a network failure blames the token: %v", err)
			}
			if strings.Contains(err.Error(), tt.token) {
				t.Errorf("the error holds the token: %v", err)
			}
		})
	}
}

// front is the Telegram API at an address of its own that can go away
// (connections refused) and come back, as Telegram does for a bot when
// the network drops.
type front struct {
	t      *testing.T
	addr   string
	target *url.URL
	srv    *http.Server
}

// newFront serves tg at a new address on 127.0.0.2, where the
// httptest fakes (127.0.0.1) never listen, so that no fake takes the
// address while it is down.
func newFront(t *testing.T, tg *telegramtest.Server) *front {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no second loopback address: %v", err)
	}
	target, err := url.Parse(tg.URL)
	if err != nil {
		t.Fatal(err)
	}
	f := &front{t: t, addr: ln.Addr().String(), target: target}
	f.serve(ln)
	t.Cleanup(f.down)
	return f
}

func (f *front) serve(ln net.Listener) {
	proxy := httputil.NewSingleHostReverseProxy(f.target)
	proxy.ErrorLog = log.New(io.Discard, "", 0) // a poll cut short by the test's end
	f.srv = &http.Server{Handler: proxy}
	go f.srv.Serve(ln)
}

// down closes the front: connections to it are refused.
func (f *front) down() {
	if f.srv != nil {
		f.srv.Close()
		f.srv = nil
	}
}

// up serves the API at the front's address again.
func (f *front) up() {
	f.t.Helper()
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		f.t.Skipf("the address was taken meanwhile: %v", err)
	}
	f.serve(ln)
}

// lockedLogs is a log buffer the adapter's goroutines write to while the
// test reads it.
type lockedLogs struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLogs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runUntil waits until cond holds while Run (its result on done) goes
// on, failing t if Run ends first.
func runUntil(t *testing.T, what string, done <-chan error, logs *lockedLogs, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		select {
		case err := <-done:
			t.Fatalf("Run ended before %s: %v\n%s", what, err, logs.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\n%s", what, logs.String())
		}
	}
}

// TestRunWaitsOutANetworkThatFailsAfterGetMe: Telegram answered getMe
// (New) but cannot be reached when Run registers the commands and the
// webhook: that is the network, as at start (issue 38 item 11), so Run
// says so and tries again after a wait instead of ending (which ends
// serve: a restart loop under compose), polls once Telegram answers,
// and a stop while it waits is a stop (nil), not a failure.
func TestRunWaitsOutANetworkThatFailsAfterGetMe(t *testing.T) {
	for _, stop := range []bool{false, true} {
		name := map[bool]string{false: "comes back", true: "stopped while waiting"}[stop]
		t.Run(name, func(t *testing.T) {
			tg := telegramtest.New()
			t.Cleanup(tg.Close)
			f := newFront(t, tg)
			logs := &lockedLogs{}
			hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
			a, err := telegram.New(telegram.Config{Token: tg.Token, APIURL: "http://" + f.addr, PollTimeout: time.Second, HTTPClient: hc,
				Logger: slog.New(slog.NewTextHandler(logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			// Gone: the next call dials, and is refused (not one on
			// getMe's kept-alive connection, which the close ends).
			f.down()
			hc.CloseIdleConnections()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx, &recorder{}) }()
			runUntil(t, "Run says it waits for Telegram", done, logs, func() bool {
				return strings.Contains(logs.String(), "could not reach Telegram at "+f.addr+" (connection refused)")
			})
			if !stop {
				f.up()
				runUntil(t, "Run registers and polls", done, logs, func() bool {
					return tg.Calls("setMyCommands") > 0 && tg.Calls("deleteWebhook") > 0 && tg.Calls("getUpdates") > 0
				})
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v, want nil when ctx ends", err)
			}
			if strings.Contains(logs.String(), tg.Token) {
				t.Errorf("the logs hold the token:\n%s", logs.String())
			}
		})
	}
}
