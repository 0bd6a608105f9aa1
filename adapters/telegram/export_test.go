package telegram

import "time"

// SetConflictWait shortens how long a leader that got 409 waits to see
// whether it lost its lead, until the test ends.
func SetConflictWait(d time.Duration) (restore func()) {
	old := conflictWait
	conflictWait = d
	return func() { conflictWait = old }
}
