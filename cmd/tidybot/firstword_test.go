package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

// BenchmarkTelegramFirstWord measures the time to the first streamed
// word (issue 26 item 3): people each send a message to `tidybot serve`
// (in process, bbolt, long polling) in their private chat, and a fake
// model that answers after 0.4 s and streams its answer at 80 tokens a
// second (a json final answer of about 60 tokens); the time from the
// fake Telegram having the update to it recording the first
// sendMessageDraft of that chat (the answer's first whole word), p50 and
// p99 over every message of every round. "1" is one person at a time;
// "20" twenty at once, with TIDYBOT_WORKERS=20.
//
//	go test ./cmd/tidybot -run '^$' -bench TelegramFirstWord -benchtime 5x
func BenchmarkTelegramFirstWord(b *testing.B) {
	for _, people := range []int{1, 20} {
		b.Run(fmt.Sprint(people), func(b *testing.B) { firstWord(b, people) })
	}
}

// BenchmarkSlackFirstWord is BenchmarkTelegramFirstWord on Slack: each
// person's DM is a signed Events API POST to `tidybot serve`; the time
// from the POST to the fake Slack answering the chat.startStream that
// shows the answer's first whole word.
//
//	go test ./cmd/tidybot -run '^$' -bench SlackFirstWord -benchtime 5x
func BenchmarkSlackFirstWord(b *testing.B) {
	for _, people := range []int{1, 20} {
		b.Run(fmt.Sprint(people), func(b *testing.B) { slackFirstWord(b, people) })
	}
}

func slackFirstWord(b *testing.B, people int) {
	var lat []time.Duration
	for range b.N {
		b.StopTimer()
		e := firstWordEnv(b, people)
		sl := slacktest.New()
		e.cfg.SlackBotToken, e.cfg.SlackSigningSecret, e.cfg.SlackURL = slacktest.Token, slackSecret, sl.URL
		e.cfg.AllowedUsers = nil
		for p := 1; p <= people; p++ {
			e.cfg.AllowedUsers = append(e.cfg.AllowedUsers, fmt.Sprint("slack:U", p))
		}
		base := startServe(b, e, nil).base
		b.StartTimer()
		sent := make([]time.Time, people)
		var wg sync.WaitGroup
		for p := range people {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ev := slacktest.MessageEvent(fmt.Sprint("EvFW", p), fmt.Sprint("D", p+1), "im", fmt.Sprint("U", p+1), "tidy the birthday tasks", fmt.Sprintf("%d.%06d", time.Now().Unix(), p+1), fmt.Sprintf("%d.%06d", time.Now().Unix()-1, p+1)) // in a DM thread: Slack streams only replies in a thread
				sent[p] = time.Now()
				if code := postSigned(b, base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
					b.Errorf("event %d: %d", p, code)
				}
			}()
		}
		wg.Wait()
		waitFor(b, "every answer", func() bool {
			for p := 1; p <= people; p++ {
				ss := sl.Streams(fmt.Sprint("D", p))
				if len(ss) == 0 || ss[0].Open {
					return false
				}
			}
			return true
		})
		b.StopTimer()
		for p := range people {
			lat = append(lat, sl.Streams(fmt.Sprint("D", p+1))[0].Started.Sub(sent[p]))
		}
		sl.Close()
		e.model.Close()
	}
	reportLatency(b, lat)
}

// firstWordEnv is an env whose model answers after 0.4 s at 80 tokens a
// second, with a worker per person.
func firstWordEnv(b *testing.B, people int) *env {
	e := newEnv(b)
	// The json protocol: a tools reply's final_answer is shown only once
	// the reply is whole (agent/stream.go).
	e.cfg.Protocol = "json"
	answer := jsonAnswer(b, firstWordAnswer)
	e.model = openaitest.New(func(openaitest.Request) openaitest.Reply {
		return answer
	}, openaitest.WithLatency(400*time.Millisecond), openaitest.WithTokenRate(80))
	e.cfg.OpenAIBaseURL = e.model.URL
	e.cfg.HTTPOnly, e.cfg.Workers = false, people
	return e
}

// firstWordAnswer is the streamed answer: about 60 tokens.
var firstWordAnswer = "I moved your three birthday tasks into the Birthday project and left the rest of the inbox as it was. Nothing was deleted; say undo to put them back."

func firstWord(b *testing.B, people int) {
	var lat []time.Duration
	for range b.N {
		b.StopTimer()
		e := firstWordEnv(b, people)
		e.cfg.AllowedUsers = nil
		for p := 1; p <= people; p++ {
			e.cfg.AllowedUsers = append(e.cfg.AllowedUsers, fmt.Sprint("telegram:", p))
		}
		tg := telegramtest.New()
		e.cfg.TelegramToken, e.cfg.TelegramURL = tg.Token, tg.URL
		startServe(b, e, nil)
		b.StartTimer()
		updates := make([]int, people)
		for p := range people {
			updates[p] = tg.PushText(int64(p+1), int64(p+1), "tidy the birthday tasks")
		}
		waitFor(b, "every answer", func() bool {
			for p := 1; p <= people; p++ {
				if lastText(tg, int64(p)) != firstWordAnswer {
					return false
				}
			}
			return true
		})
		b.StopTimer()
		for p, u := range updates {
			ds := tg.Drafts(int64(p + 1))
			if len(ds) == 0 || !strings.HasPrefix(firstWordAnswer, ds[0].Text) {
				b.Fatalf("person %d: drafts %+v", p+1, ds)
			}
			lat = append(lat, ds[0].At.Sub(tg.Arrived(u)))
		}
		tg.Close()
		e.model.Close()
	}
	reportLatency(b, lat)
}
