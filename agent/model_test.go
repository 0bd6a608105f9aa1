package agent_test

import (
	"testing"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

// newModel serves script on the fake chat-completions server and returns
// the real model client (go-openai) pointed at it. The fake rejects what
// the real API rejects (non-strict schemas sent as strict, unanswered tool
// calls…) before the script sees a request.
func newModel(t *testing.T, script func(agent.Request) agent.Response) agent.Model {
	t.Helper()
	if script == nil {
		return nil
	}
	srv := openaitest.New(openaitest.FromAgent(script))
	t.Cleanup(srv.Close)
	return openai.New(openai.Config{APIKey: "sk-test", BaseURL: srv.URL, Model: "scripted", BackoffBase: 1e6, BackoffMax: 1e7}, srv.Client())
}
