package agent_test

import (
	"context"
	"testing"

	"github.com/tidybot/tidybot/agent"
)

// funcModel is a stand-in until the fake model server lands.
type funcModel func(agent.Request) agent.Response

func (f funcModel) Complete(_ context.Context, req agent.Request) (agent.Response, error) {
	r := f(req)
	r.Usage = agent.Usage{PromptTokens: 100, CompletionTokens: 10}
	return r, nil
}

func newModel(t *testing.T, script func(agent.Request) agent.Response) agent.Model {
	t.Helper()
	return funcModel(script)
}
