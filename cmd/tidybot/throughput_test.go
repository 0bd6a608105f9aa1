package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
)

// BenchmarkSlackThroughput posts 2,000 signed Slack message events (2,000
// DMs, so no channel's posting limit paces them) from 200 concurrent
// senders to `tidybot serve`, with the fake Slack, model and Todoist
// answering at once, and waits for every answer. It reports messages per
// second from the first POST to the last answer, the p50 and p99 time to
// acknowledge a POST, and the process's peak resident memory (VmHWM: the
// bot, the fakes and the benchmark together, so an upper bound of the
// bot's own). TIDYBOT_BENCH_WORKERS sets the bot's workers (default 4,
// TIDYBOT_WORKERS' default).
//
//	go test ./cmd/tidybot -run '^$' -bench SlackThroughput -benchtime 1x
func BenchmarkSlackThroughput(b *testing.B) {
	const total, senders = 2000, 200
	for round := range b.N {
		e := newEnv(b)
		sl := slacktest.New()
		e.cfg.SlackBotToken, e.cfg.SlackSigning, e.cfg.SlackURL = slacktest.Token, slackSecret, sl.URL
		e.cfg.AllowedUsers = []string{"slack:U1"}
		e.cfg.LogLevel = "error"
		if w, err := strconv.Atoi(os.Getenv("TIDYBOT_BENCH_WORKERS")); err == nil {
			e.cfg.Workers = w
		}
		s := startServe(b, e, nil)
		base := s.base
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: senders}, Timeout: 30 * time.Second}
		acks := make([]time.Duration, total)
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= total {
						return
					}
					body := slacktest.MessageEvent(fmt.Sprint("Ev", round, "-", i), fmt.Sprint("D", i), "im", "U1", "hello", fmt.Sprint(i, ".1"), "")
					req, _ := http.NewRequest(http.MethodPost, base+"/slack/events", bytes.NewReader(body))
					ts := strconv.FormatInt(time.Now().Unix(), 10)
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("X-Slack-Request-Timestamp", ts)
					req.Header.Set("X-Slack-Signature", slacktest.Sign(slackSecret, ts, body))
					t0 := time.Now()
					resp, err := hc.Do(req)
					acks[i] = time.Since(t0)
					if err != nil {
						b.Error(err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("event %d: %d", i, resp.StatusCode)
					}
				}
			}()
		}
		wg.Wait()
		answered := func() int {
			n := 0
			for i := range total {
				for _, p := range sl.Posts(fmt.Sprint("D", i)) {
					if strings.HasPrefix(p.Text, "You said") {
						n++
						break
					}
				}
			}
			return n
		}
		// Each message posts its status message and its answer; the
		// fake's call counter is cheap to poll, reading every post is not.
		for deadline := time.Now().Add(5 * time.Minute); sl.Calls("chat.postMessage") < 2*total; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d answered", answered(), total)
			}
		}
		elapsed := time.Since(start)
		if n := answered(); n != total {
			b.Errorf("%d of %d answered", n, total)
		}
		s.stop()
		sl.Close()
		slices.Sort(acks)
		b.ReportMetric(total/elapsed.Seconds(), "msgs/s")
		b.ReportMetric(float64(acks[total/2].Microseconds())/1000, "ack-p50-ms")
		b.ReportMetric(float64(acks[total*99/100].Microseconds())/1000, "ack-p99-ms")
		b.ReportMetric(peakRSS(), "peak-RSS-MiB")
	}
}

// peakRSS is the process's peak resident memory in MiB (VmHWM), or 0
// where /proc does not tell.
func peakRSS() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}
