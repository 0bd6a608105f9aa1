package web

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

// Metrics implements bot.Metrics on Prometheus, in a registry of its
// own with the Go runtime's and the process's collectors; Handler
// serves them.
type Metrics struct {
	reg    *prometheus.Registry
	events *prometheus.CounterVec
	runs   *prometheus.CounterVec
	tokens *prometheus.CounterVec
	calls  prometheus.Counter
}

var _ bot.Metrics = (*Metrics)(nil)

// NewMetrics returns the metrics in a new registry.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		reg:    reg,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidybot_events_total", Help: "Incoming platform events by outcome."}, []string{"platform", "outcome"}),
		runs:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidybot_runs_total", Help: "Agent runs that ended or paused, by status."}, []string{"status"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidybot_model_tokens_total", Help: "Model tokens of ended or paused runs."}, []string{"kind"}),
		calls:  prometheus.NewCounter(prometheus.CounterOpts{Name: "tidybot_model_calls_total", Help: "Model calls of ended or paused runs."}),
	}
	reg.MustRegister(m.events, m.runs, m.tokens, m.calls)
	return m
}

// Event implements bot.Metrics.
func (m *Metrics) Event(platform, outcome string) { m.events.WithLabelValues(platform, outcome).Inc() }

// RunEnded implements bot.Metrics. The bot reports the usage of each part
// of a run (up to a pause, then to the end), so tokens are not counted
// twice.
func (m *Metrics) RunEnded(status bot.RunStatus, u agent.Usage) {
	m.runs.WithLabelValues(string(status)).Inc()
	m.tokens.WithLabelValues("prompt").Add(float64(u.PromptTokens))
	m.tokens.WithLabelValues("completion").Add(float64(u.CompletionTokens))
	m.calls.Add(float64(u.Calls))
}

// StoreSyncs shows syncs, the store's fdatasyncs so far, as
// tidybot_store_fsyncs_total.
func (m *Metrics) StoreSyncs(syncs func() int64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tidybot_store_fsyncs_total",
		Help: "fdatasyncs of the bbolt store's committed write transactions."}, func() float64 { return float64(syncs()) }))
}

// Handler serves the registry in Prometheus' text format.
func (m *Metrics) Handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }
