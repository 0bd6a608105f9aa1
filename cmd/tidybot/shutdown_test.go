package main

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/web"
)

// TestShutdownKeepsTheBacklog: `tidybot serve` with one worker and a
// model that stalls holds four messages from four people, one run in
// flight and three queued, when it is told to stop (what SIGTERM does:
// main cancels Run's context). Nobody is told that something went wrong;
// after the restart, with the model answering again, each of the four
// gets its real answer, once.
func TestShutdownKeepsTheBacklog(t *testing.T) {
	e := newEnv(t)
	e.cfg.Workers = 1
	e.cfg.LogLevel = "info"
	var slow atomic.Bool
	slow.Store(true)
	asked := make(chan struct{}, 16)
	e.model.Close()
	e.model = openaitest.New(func(req openaitest.Request) openaitest.Reply {
		if slow.Load() {
			select {
			case asked <- struct{}{}:
			default:
			}
			return openaitest.Text("…").After(time.Hour) // until the client is gone
		}
		return openaitest.FromAgent(e.scen.reply)(req)
	})
	t.Cleanup(e.model.Close)
	e.cfg.OpenAIBaseURL = e.model.URL
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	e.cfg.TelegramToken, e.cfg.TelegramURL = tg.Token, tg.URL
	people := []int64{41, 42, 43, 44}
	e.cfg.AllowedUsers = nil
	for _, p := range people {
		e.cfg.AllowedUsers = append(e.cfg.AllowedUsers, fmt.Sprintf("telegram:%d", p))
	}

	// A webhook request still arriving when the signal comes holds the
	// HTTP shutdown (here up to the 500 ms header timeout) before the bot
	// is stopped: the workers must take no job meanwhile.
	first := startServe(t, e, &web.Timeouts{ReadHeader: 500 * time.Millisecond, Read: time.Second, Write: time.Second, Idle: time.Second, MaxHeaderBytes: 4 << 10})
	for _, p := range people {
		tg.PushText(p, p, fmt.Sprintf("note %d", p))
	}
	select {
	case <-asked:
	case <-time.After(15 * time.Second):
		t.Fatalf("the model was never asked; logs:\n%s", first.logs.String())
	}
	waitFor(t, "the four messages taken in", func() bool { return tg.Pending() == 0 })
	conn, err := net.Dial("tcp", strings.TrimPrefix(first.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /healthz HTTP/1.1\r\nHost: tidybot\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the server has read the first bytes: the request is active
	first.stop()

	failed := func() []string {
		var out []string
		for _, p := range people {
			for _, m := range tg.Messages(p) {
				if strings.Contains(m.Text, "Something went wrong") {
					out = append(out, fmt.Sprintf("%d: %s", p, m.Text))
				}
			}
		}
		return out
	}
	if f := failed(); len(f) > 0 {
		t.Errorf("told of a failure at shutdown: %q\nlogs:\n%s", f, first.logs.String())
	}

	slow.Store(false)
	second := startServe(t, e, nil)
	answered := func(p int64) int {
		n := 0
		for _, m := range tg.Messages(p) {
			if m.Text == fmt.Sprintf("You said: note %d", p) {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, p := range people {
		for answered(p) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d got no answer after the restart; messages %+v\nlogs:\n%s\n%s", p, tg.Messages(p), first.logs.String(), second.logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	second.stop()
	for _, p := range people {
		if n := answered(p); n != 1 {
			t.Errorf("%d got its answer %d times, want once", p, n)
		}
	}
	if f := failed(); len(f) > 0 {
		t.Errorf("told of a failure: %q", f)
	}
}
