package main

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
)

// BenchmarkTelegramFirstSign measures the time to the first sign of life
// (issue 26 item 3): 200 people each send a message at once to `tidybot
// serve` (in process, bbolt, an instant fake model); the time from the
// fake Telegram having the person's update to it recording the bot's 👀
// reaction to that message, p50 and p99 over every message of every
// round. Target: p99 under 300 ms. "poll" is long polling (the adapter
// stores one update after another); "webhook" is Telegram POSTing the
// updates over at most 40 connections (setWebhook's default
// max_connections, core.telegram.org/bots/api#setwebhook).
//
//	go test ./cmd/tidybot -run '^$' -bench TelegramFirstSign -benchtime 5x
func BenchmarkTelegramFirstSign(b *testing.B) {
	b.Run("poll", func(b *testing.B) { firstSign(b, false) })
	b.Run("webhook", func(b *testing.B) { firstSign(b, true) })
}

const firstSignPeople = 200

func firstSign(b *testing.B, hook bool) {
	var lat []time.Duration
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 40, MaxIdleConnsPerHost: 40}, Timeout: 30 * time.Second}
	for range b.N {
		b.StopTimer()
		e := newEnv(b)
		e.cfg.HTTPOnly = false
		e.cfg.AllowedUsers = nil
		for p := 1; p <= firstSignPeople; p++ {
			e.cfg.AllowedUsers = append(e.cfg.AllowedUsers, fmt.Sprint("telegram:", p))
		}
		tg := telegramtest.New()
		e.cfg.TelegramToken, e.cfg.TelegramURL = tg.Token, tg.URL
		if hook {
			e.cfg.TelegramHook, e.cfg.TelegramWebhookSecret = "https://bot.example.com/telegram/webhook", "s3cret"
		}
		base := startServe(b, e, nil).base
		b.StartTimer()
		updates := make([]int, firstSignPeople)
		var wg sync.WaitGroup
		for p := range firstSignPeople {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if !hook {
					updates[p] = tg.PushText(int64(p+1), int64(p+1), "hello")
					return
				}
				var body []byte
				updates[p], body = tg.Deliver(int64(p+1), int64(p+1), "hello")
				postJSON(b, hc, base+"/telegram/webhook", body, fmt.Sprint("update ", updates[p]),
					"X-Telegram-Bot-Api-Secret-Token", "s3cret")
			}()
		}
		wg.Wait()
		waitFor(b, "every reaction", func() bool { return len(tg.Reactions()) >= firstSignPeople })
		b.StopTimer()
		lat = append(lat, reactionDelays(b, tg, updates)...)
		waitFor(b, "every answer", func() bool {
			for p := 1; p <= firstSignPeople; p++ {
				if len(tg.Messages(int64(p))) < 2 { // the status message and the answer
					return false
				}
			}
			return true
		})
		tg.Close()
	}
	reportLatency(b, lat)
}

// postJSON posts body as JSON to url with header (name, value pairs)
// and reports an error, naming what, unless the answer is 200 OK.
func postJSON(b *testing.B, hc *http.Client, url string, body []byte, what string, header ...string) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		b.Error(err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Errorf("%s: %d", what, resp.StatusCode)
	}
}

// reportLatency reports the median and 99th percentile of lat, in
// milliseconds, as p50-ms and p99-ms. It sorts lat.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// reactionDelays is, for each person's update, the time from its arrival
// to the reaction to its message.
func reactionDelays(b *testing.B, tg *telegramtest.Server, updates []int) []time.Duration {
	at := map[[2]int64]time.Time{}
	for _, r := range tg.Reactions() {
		at[[2]int64{r.ChatID, int64(r.MessageID)}] = r.At
	}
	var out []time.Duration
	for p, u := range updates {
		seen, ok := at[[2]int64{int64(p + 1), int64(tg.MessageID(u))}]
		if !ok {
			b.Fatalf("person %d: no reaction to their message", p+1)
		}
		out = append(out, seen.Sub(tg.Arrived(u)))
	}
	return out
}

// Through serve, a person's message gets 👀 on Telegram, and a chat that
// refuses reactions still gets the answer. A run that answers at once
// posts no status message (the 👀 said the message was seen).
func TestTelegramReactsThenAnswers(t *testing.T) {
	e := newEnv(t)
	e.cfg.AllowedUsers = []string{"telegram:42", "telegram:43"}
	tg := serveTelegram(t, e)
	tg.ReactionsOff(43)
	id := tg.MessageID(tg.PushText(42, 42, "hello"))
	tg.PushText(43, 43, "hello")
	waitFor(t, "the reaction", func() bool {
		r := tg.Reactions()
		return len(r) == 1 && r[0].ChatID == 42 && r[0].MessageID == id && r[0].Emoji[0] == "👀"
	})
	waitFor(t, "both answers", func() bool { return len(tg.Messages(42)) >= 1 && len(tg.Messages(43)) >= 1 })
	if r := tg.Reactions(); len(r) != 1 {
		t.Errorf("reactions: %+v", r)
	}
	for _, chat := range []int64{42, 43} {
		if m := tg.Messages(chat); len(m) != 1 || m[0].Text != "You said: hello" {
			t.Errorf("chat %d: %+v, want the answer alone", chat, m)
		}
	}
}
