package postgres

import (
	"context"
	"testing"

	"github.com/tidybot/tidybot/store/postgres/pgtest"
	"github.com/tidybot/tidybot/store/storetest"
)

var _ storetest.Store = (*Store)(nil)

// TestConformance runs the bot.Store contract's suite, the one bbolt
// passes (store.TestConformance), on PostgreSQL: each test on a schema
// of its own.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (storetest.Store, func() storetest.Store) {
		u := pgtest.URL(t)
		s, err := Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, func() storetest.Store {
			_ = s.Close()
			if s, err = Open(context.Background(), u); err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}
