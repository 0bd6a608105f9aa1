package slack_test

import (
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
)

// newClockedAdapter is newAdapter with a clock the test moves (wait): the
// adapter's rate-limit lanes (limits.go) count on it.
func newClockedAdapter(t *testing.T) (*slack.Adapter, *slacktest.Server, func(time.Duration)) {
	t.Helper()
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	wait := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	a, err := slack.New(t.Context(), slack.Config{BotToken: slacktest.Token, SigningSecret: secret, APIURL: srv.URL, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	return a, srv, wait
}
