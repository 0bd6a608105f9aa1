package hooks_test

import (
	"testing"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/internal/hooks"
)

// TestMemory: hooks kept in one process's memory keep the contract
// PostgreSQL's do (the suite written once for every implementation).
func TestMemory(t *testing.T) {
	h := &hooks.Memory{}
	slacktest.TestHooks(t, h, h)
}
