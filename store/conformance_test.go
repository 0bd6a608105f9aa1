package store

import (
	"testing"

	"github.com/tidybot/tidybot/store/storetest"
)

var (
	_ storetest.Store   = (*Store)(nil)
	_ storetest.Checker = (*Store)(nil)
)

// TestConformance runs the bot.Store contract's suite on bbolt; the
// other tests of this package test the file.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (storetest.Store, func() storetest.Store) {
		s, path := open(t)
		return s, func() storetest.Store { s = reopen(t, s, path); return s }
	})
}
