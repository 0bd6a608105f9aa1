package store

import (
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/bot"
)

// BenchmarkClaimTimersNoneDue is the timer loop's pass every 15 s when
// nothing is due, with 10,000 people's digest timers in the file:
// ClaimTimers reads the due index up to now, in a read transaction.
func BenchmarkClaimTimersNoneDue(b *testing.B) {
	s, _ := open(b)
	ctx := b.Context()
	now := time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)
	err := s.update(ctx, func(tx *bolt.Tx) error {
		for i := range 10_000 {
			rec := timerRecord{Timer: bot.Timer{Kind: "digest", Key: fmt.Sprint("telegram:", i), Due: now.Add(time.Duration(i+1) * time.Second)}}
			if err := putTimer(tx, nil, &rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		got, err := s.ClaimTimers(ctx, now, []string{"digest", "autopilot"}, "c", time.Minute, 50)
		if err != nil || len(got) != 0 {
			b.Fatalf("claimed %d (%v)", len(got), err)
		}
	}
}
