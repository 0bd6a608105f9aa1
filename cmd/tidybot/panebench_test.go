package main

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
)

// BenchmarkSlackFirstSign measures the time to the first sign of life on
// Slack (issue 26 item 3): 200 people, each with the assistant pane open,
// send a message there at once to `tidybot serve` (in process, bbolt,
// the Events API over HTTP, instant fakes); the time from the event
// being sent to the fake Slack recording the pane's status line
// (assistant.threads.setStatus), p50 and p99 over every message of every
// round. Events go over at most 40 connections, as the Telegram webhook
// benchmark's do.
//
//	go test ./cmd/tidybot -run '^$' -bench SlackFirstSign -benchtime 3x
func BenchmarkSlackFirstSign(b *testing.B) {
	var lat []time.Duration
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 40, MaxIdleConnsPerHost: 40}, Timeout: 30 * time.Second}
	post := func(base string, body []byte) {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		postJSON(b, hc, base+"/slack/events", body, "event",
			"X-Slack-Request-Timestamp", ts, "X-Slack-Signature", slacktest.Sign(slackSecret, ts, body))
	}
	for range b.N {
		b.StopTimer()
		e := newEnv(b)
		sl := slacktest.New()
		sl.Subscribe("message.im", "assistant_thread_started")
		e.cfg.SlackBotToken, e.cfg.SlackSigningSecret, e.cfg.SlackURL = slacktest.Token, slackSecret, sl.URL
		e.cfg.AllowedUsers = nil
		for p := 1; p <= firstSignPeople; p++ {
			e.cfg.AllowedUsers = append(e.cfg.AllowedUsers, fmt.Sprint("slack:U", p))
		}
		base := startServe(b, e, nil).base
		threads := make([]string, firstSignPeople)
		for p := range firstSignPeople {
			var ev []byte
			threads[p], ev = sl.StartAssistantThread(fmt.Sprint("U", p+1), "C1")
			post(base, ev)
		}
		b.StartTimer()
		sent := make([]time.Time, firstSignPeople)
		var wg sync.WaitGroup
		for p := range firstSignPeople {
			user := fmt.Sprint("U", p+1)
			ev := sl.Events(slacktest.Message{Channel: sl.IM(user), ChannelType: "im", User: user, Text: "hello", TS: sl.NextTS(), ThreadTS: threads[p]})[0]
			wg.Add(1)
			go func() {
				defer wg.Done()
				sent[p] = time.Now()
				post(base, ev)
			}()
		}
		wg.Wait()
		waitFor(b, "every status line", func() bool {
			for p := range firstSignPeople {
				if pn, _ := sl.AssistantThread(sl.IM(fmt.Sprint("U", p+1)), threads[p]); len(pn.StatusAt) == 0 {
					return false
				}
			}
			return true
		})
		b.StopTimer()
		for p := range firstSignPeople {
			pn, _ := sl.AssistantThread(sl.IM(fmt.Sprint("U", p+1)), threads[p])
			lat = append(lat, pn.StatusAt[0].Sub(sent[p]))
		}
		waitFor(b, "every answer", func() bool {
			for p := range firstSignPeople {
				if lastPost(sl, sl.IM(fmt.Sprint("U", p+1))).Text != "You said: hello" {
					return false
				}
			}
			return true
		})
		sl.Close()
	}
	reportLatency(b, lat)
}
