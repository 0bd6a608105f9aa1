package slack

import "github.com/tidybot/tidybot/internal/hooks"

// NewMemHooks returns the Hooks an adapter keeps in its memory, for the
// contract test (slacktest.TestHooks).
func NewMemHooks() Hooks { return &hooks.Memory{} }
