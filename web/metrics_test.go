package web

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

func TestMetrics(t *testing.T) {
	m := NewMetrics()
	m.Event("telegram", "accepted")
	m.Event("telegram", "duplicate")
	m.Event("telegram", "duplicate")
	m.RunEnded(bot.RunWaiting, agent.Usage{PromptTokens: 100, CompletionTokens: 10, Calls: 1})
	m.RunEnded(bot.RunDone, agent.Usage{PromptTokens: 50, CompletionTokens: 5, Calls: 1})
	for _, tt := range []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"duplicates", m.events.WithLabelValues("telegram", "duplicate"), 2},
		{"done runs", m.runs.WithLabelValues("done"), 1},
		{"prompt tokens", m.tokens.WithLabelValues("prompt"), 150},
		{"model calls", m.calls, 2},
	} {
		if got := testutil.ToFloat64(tt.c); got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, got, tt.want)
		}
	}
}
