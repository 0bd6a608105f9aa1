package retry

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// TestConnectWaitsOutTheNetworkOnly: an unreachable service is tried
// again after waits that double; a refused token ends it at once; so
// does ctx.
func TestConnectWaitsOutTheNetworkOnly(t *testing.T) {
	down := &agent.Error{Code: agent.ErrUnreachable, Message: "could not reach Telegram"}
	refused := errors.New("check TELEGRAM_BOT_TOKEN")
	synctest.Test(t, func(t *testing.T) {
		var waits []time.Duration
		calls := 0
		err := Connect(t.Context(), time.Second, func() error {
			calls++
			if calls < 4 {
				return down
			}
			return nil
		}, func(err error, wait time.Duration) { waits = append(waits, wait) })
		if err != nil || calls != 4 {
			t.Errorf("Connect: %v after %d calls; want nil after 4", err, calls)
		}
		if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}; !slices.Equal(waits, want) {
			t.Errorf("waits %v, want %v", waits, want)
		}
	})
	calls := 0
	if err := Connect(t.Context(), time.Second, func() error { calls++; return refused }, func(error, time.Duration) { t.Error("waited for a refused token") }); err != refused || calls != 1 {
		t.Errorf("Connect: %v after %d calls; want the token's error at once", err, calls)
	}
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
		defer cancel()
		err := Connect(ctx, time.Second, func() error { return down }, func(error, time.Duration) {})
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, new(*agent.Error)) {
			t.Errorf("Connect after its context ended: %v; want the deadline and the last failure", err)
		}
	})
}
