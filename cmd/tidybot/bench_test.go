package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

// timedPlatform records when the first message of each chat was posted.
type timedPlatform struct {
	mu    sync.Mutex
	first map[string]time.Time
	sent  int
}

func (p *timedPlatform) Name() string { return "telegram" }

func (p *timedPlatform) Send(_ context.Context, m bot.Outgoing) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.first[m.ChatID]; !ok {
		p.first[m.ChatID] = time.Now()
	}
	p.sent++
	return fmt.Sprint(p.sent), nil
}

// runBot runs `tidybot chat` with empty stdin and calls drive with the
// started bot; the chat ends once drive returns and the bot is idle.
func runBot(b *testing.B, e *env, drive func(*bot.Bot)) {
	b.Helper()
	m := &Main{Args: []string{"chat"}, Stdin: strings.NewReader(""), Stdout: &strings.Builder{}, Stderr: &strings.Builder{}, Config: &e.cfg, Ready: drive}
	if err := m.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPipeline pushes 200 messages from 200 chats, from 8 concurrent
// producers (as webhook handlers would), through the whole pipeline —
// dedupe, allowlist, bbolt, jobs, workers, the agent through go-openai
// against an instant fake model, the answer — and reports messages per
// second.
func BenchmarkPipeline(b *testing.B) {
	e := newEnv(b)
	const total, producers = 200, 8
	for round := range b.N {
		plat := &timedPlatform{first: map[string]time.Time{}}
		var elapsed time.Duration
		runBot(b, e, func(bt *bot.Bot) {
			bt.AddPlatform(plat)
			start := time.Now()
			var wg sync.WaitGroup
			for p := range producers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := p; i < total; i += producers {
						in := bot.Incoming{Platform: "telegram", ChatID: fmt.Sprint("c", i), UserID: "42", Text: "hello", EventID: fmt.Sprint(round, "-", i)}
						if err := bt.Handle(context.Background(), in); err != nil {
							b.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			if err := bt.WaitIdle(context.Background()); err != nil {
				b.Fatal(err)
			}
			elapsed = time.Since(start)
		})
		b.ReportMetric(total/elapsed.Seconds(), "msgs/s")
	}
}

// BenchmarkFirstNote measures, on an idle bot, the time from a message to
// the first progress note posted in its chat, with an instant model.
func BenchmarkFirstNote(b *testing.B) {
	e := newEnv(b)
	const msgs = 20
	for round := range b.N {
		plat := &timedPlatform{first: map[string]time.Time{}}
		var total time.Duration
		runBot(b, e, func(bt *bot.Bot) {
			bt.AddPlatform(plat)
			for i := range msgs {
				chat := fmt.Sprint("r", round, "c", i)
				start := time.Now()
				if err := bt.Handle(context.Background(), bot.Incoming{Platform: "telegram", ChatID: chat, UserID: "42", Text: "hello", EventID: chat}); err != nil {
					b.Fatal(err)
				}
				if err := bt.WaitIdle(context.Background()); err != nil {
					b.Fatal(err)
				}
				plat.mu.Lock()
				total += plat.first[chat].Sub(start)
				plat.mu.Unlock()
			}
		})
		b.ReportMetric(float64(total.Microseconds())/1000/msgs, "ms-to-first-note")
	}
}
