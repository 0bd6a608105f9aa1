package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

// TestServeDailyCapAcrossParallelConversations is the probe of issue 21
// item 3 through `serve`: one person asks in four Telegram groups at once
// (four conversations, the default four workers), each request worth
// many model calls, with TIDYBOT_USER_DAILY_TOKENS=1000. The day's tokens
// stay under the cap plus one call's (a call starts only while the
// person's total is under the cap, and runs beside their other calls
// only if all fit under it), where each run used to spend up to the cap
// on its own.
func TestServeDailyCapAcrossParallelConversations(t *testing.T) {
	const (
		limit     = 1000
		perCall   = 110 // tokens the model reports for each call
		callsEach = 30  // reads a request would make without a cap
	)
	e := newEnv(t)
	e.cfg.DailyTokens = limit
	var mu sync.Mutex
	calls := 0
	model := openaitest.New(openaitest.FromAgent(func(req agent.Request) agent.Response {
		mu.Lock()
		calls++
		mu.Unlock()
		steps := 0
		for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != agent.RoleUser; i-- {
			if req.Messages[i].Role == agent.RoleAssistant {
				steps++
			}
		}
		time.Sleep(2 * time.Millisecond) // the four runs overlap
		name, args := agent.ActFinalAnswer, map[string]any{"answer": "Read it all."}
		if steps < callsEach {
			name, args = agent.ActGetTasks, map[string]any{"filter": fmt.Sprint("search: ", steps)}
		}
		raw, _ := json.Marshal(args)
		return agent.Response{Content: "reading", ToolCalls: []agent.ToolCall{{ID: fmt.Sprint("call_", len(req.Messages)), Name: name, Arguments: string(raw)}},
			Usage: agent.Usage{PromptTokens: perCall - 10, CompletionTokens: 10}}
	}))
	t.Cleanup(model.Close)
	e.cfg.OpenAIBaseURL = model.URL
	if e.cfg.Workers != 4 {
		t.Fatalf("workers = %d, want the default 4", e.cfg.Workers)
	}
	tg := serveTelegram(t, e)
	tg.PrivacyOff() // mentions reach the bot
	groups := []int64{-101, -102, -103, -104}
	for _, g := range groups {
		tg.PushText(g, 42, "@"+telegramtest.BotUserName+" read everything, one search at a time")
	}
	waitFor(t, "every run's end", func() bool {
		for _, g := range groups {
			last := lastText(tg, g)
			if !strings.HasPrefix(last, "You have used your") && last != "Read it all." {
				return false
			}
		}
		return true
	})
	mu.Lock()
	spent := calls * perCall
	mu.Unlock()
	t.Logf("%d model calls, %d tokens, with a cap of %d", spent/perCall, spent, limit)
	if spent >= limit+perCall {
		t.Errorf("spent %d tokens, want less than %d (the cap plus one call)", spent, limit+perCall)
	}
	for _, g := range groups {
		if last := lastText(tg, g); !strings.HasPrefix(last, "You have used your 1000 model tokens for today") {
			t.Errorf("group %d: %q, want the cap's message", g, last)
		}
	}
}
