package telegram_test

import (
	"errors"
	"net"
	"strings"
	"testing"

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
