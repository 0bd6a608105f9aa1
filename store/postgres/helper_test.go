package postgres

import (
	"context"
	"testing"

	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// openTest opens a store on a schema of its own, closed at t's end.
func openTest(t testing.TB, opts ...Option) (*Store, string) {
	t.Helper()
	u := pgtest.URL(t)
	s, err := Open(context.Background(), u, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, u
}
