package openai_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// BenchmarkEngineCall measures the CPU of one model call as `tidybot
// serve` makes it: a run of the engine (tools protocol, strict schemas,
// the token budget counted as cmd/tidybot counts it) whose one model call,
// through this client and go-openai, the fake model answers with a final
// answer. The fake's own checks are included, as they are in the
// throughput benchmark of cmd/tidybot. It reports the process's CPU time
// per call (cpu-ns/op, the fake's included), which other work on the
// machine disturbs less than ns/op.
//
//	go test ./agent/openai -run '^$' -bench EngineCall -benchmem
func BenchmarkEngineCall(b *testing.B) {
	srv := openaitest.New(func(openaitest.Request) openaitest.Reply {
		return openaitest.Call(agent.ActFinalAnswer, `{"answer":"You said hello"}`)
	})
	b.Cleanup(srv.Close)
	todo := todoisttest.New(b)
	model := openai.New(openai.Config{APIKey: "sk-bench", BaseURL: srv.URL, Model: "scripted"}, srv.Client())
	eng := agent.New(model, todoist.New(todo.Token, todo.URL, todo.Client()),
		agent.Config{MaxTokens: 1024, CountTokens: openai.EstimatePromptTokens})
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		out := eng.Start(b.Context(), agent.Input{Instruction: "hello"}, agent.Hooks{})
		if out.Status != agent.StatusDone {
			b.Fatalf("outcome %s %q (%v)", out.Status, out.Answer, out.Err)
		}
		srv.ResetCounters()
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the user and system CPU time the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
