package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

// metrics implements bot.Metrics on Prometheus.
type metrics struct {
	events *prometheus.CounterVec
	runs   *prometheus.CounterVec
	tokens *prometheus.CounterVec
	calls  prometheus.Counter
}

var _ bot.Metrics = (*metrics)(nil)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidybot_events_total", Help: "Incoming platform events by outcome."}, []string{"platform", "outcome"}),
		runs:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidybot_runs_total", Help: "Agent runs that ended or paused, by status."}, []string{"status"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidybot_model_tokens_total", Help: "Model tokens of ended or paused runs."}, []string{"kind"}),
		calls:  prometheus.NewCounter(prometheus.CounterOpts{Name: "tidybot_model_calls_total", Help: "Model calls of ended or paused runs."}),
	}
	reg.MustRegister(m.events, m.runs, m.tokens, m.calls)
	return m
}

// Event implements bot.Metrics.
func (m *metrics) Event(platform, outcome string) { m.events.WithLabelValues(platform, outcome).Inc() }

// RunEnded implements bot.Metrics. The bot reports the usage of each part
// of a run (up to a pause, then to the end), so tokens are not counted
// twice.
func (m *metrics) RunEnded(status bot.RunStatus, u agent.Usage) {
	m.runs.WithLabelValues(string(status)).Inc()
	m.tokens.WithLabelValues("prompt").Add(float64(u.PromptTokens))
	m.tokens.WithLabelValues("completion").Add(float64(u.CompletionTokens))
	m.calls.Add(float64(u.Calls))
}
