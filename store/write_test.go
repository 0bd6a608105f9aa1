package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/bot"
)

// txID is the id of the last committed write transaction: bbolt adds one
// per write transaction, so two readings count the transactions between.
func txID(t testing.TB, s *Store) int {
	t.Helper()
	var id int
	if err := s.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		t.Fatal(err)
	}
	return id
}

// BenchmarkCommitConcurrent is the intake of a message (its event key,
// thread, message and job in one Commit) from 1, 4 and 64 goroutines at
// once, with fsync on. It reports commits per second and the write
// transactions (each one fsync) spent per commit.
//
//	go test ./store -run '^$' -bench CommitConcurrent -benchtime 2000x -count 3
func BenchmarkCommitConcurrent(b *testing.B) {
	for _, g := range []int{1, 4, 64} {
		b.Run(fmt.Sprint("goroutines=", g), func(b *testing.B) {
			s, _ := open(b)
			ctx := context.Background()
			var next atomic.Int64
			first := txID(b, s)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range g {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						key := fmt.Sprintf("slack:T1:D%d:", i%100)
						c := bot.Change{EventKey: fmt.Sprint("slack:Ev", i), EventAt: t0, Thread: &bot.Thread{Key: key},
							Message: &bot.Message{ThreadKey: key, Role: bot.RoleUser, Text: "move everything about the birthday into one project", At: t0},
							Job:     &bot.Job{ID: fmt.Sprint("job", i), ThreadKey: key}}
						if err := s.Commit(ctx, c); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "commits/s")
			b.ReportMetric(float64(txID(b, s)-first)/float64(b.N), "tx/commit")
		})
	}
}
