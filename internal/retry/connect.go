package retry

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// maxConnectWait caps the wait between two attempts of Connect.
const maxConnectWait = time.Minute

// Connect calls open until it succeeds, fails for another reason than a
// service that cannot be reached (agent.ErrUnreachable: a platform's
// token refused is final), or ctx ends. Before each wait it calls
// waiting with open's error and the wait, which doubles from base (1 s
// when base is 0) up to a minute: a network that is down at start is
// waited for, not answered with a restart loop.
func Connect(ctx context.Context, base time.Duration, open func() error, waiting func(err error, wait time.Duration)) error {
	if base <= 0 {
		base = time.Second
	}
	wait := base
	for {
		err := open()
		var ae *agent.Error
		if err == nil || !errors.As(err, &ae) || ae.Code != agent.ErrUnreachable {
			return err
		}
		waiting(err, wait)
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, maxConnectWait)
	}
}

// UnreachedAtStart is Unreached for a service's first call at start,
// where a timeout is the network too (a dropped route, a firewall): it
// says so instead of blaming a credential.
func UnreachedAtStart(err error, service, check string, cause error) *agent.Error {
	if u := Unreached(err, service, check, cause); u != nil {
		return u
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &agent.Error{Code: agent.ErrUnreachable, Err: cause, Message: "could not reach " + service + " (timed out): check " + check}
	}
	return nil
}
