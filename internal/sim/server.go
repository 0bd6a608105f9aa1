package sim

import (
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

// StartModel serves a scripted model on the fake chat-completions server,
// each call taking latency. The server reports no token usage, so the
// model client counts tokens itself with the real tokenizer (tiktoken,
// cl100k_base): the figures are what a real model would be billed, not
// the fake's rough estimate.
func StartModel(script func(agent.Request) agent.Response, latency time.Duration) (*openaitest.Server, error) {
	return openaitest.New(openaitest.FromAgent(script), openaitest.WithLatency(latency), openaitest.WithoutUsage()), nil
}
