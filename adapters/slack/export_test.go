package slack

// NewMemHooks returns the Hooks an adapter keeps in its memory, for the
// contract test (slacktest.TestHooks).
func NewMemHooks() Hooks { return &memHooks{} }
