package postgres

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

// BenchmarkCommitIngest measures what each incoming message costs the
// store: its event key, thread, message and job in one transaction
// (sealed), as bot's ingest commits them, from 4 and 64 goroutines at
// once over 100 conversations: the same work as bbolt's
// BenchmarkCommitConcurrent (store/write_test.go).
//
//	go test ./store/postgres -run '^$' -bench CommitIngest -benchtime 2000x
func BenchmarkCommitIngest(b *testing.B) {
	for _, g := range []int{4, 64} {
		b.Run(fmt.Sprint("goroutines=", g), func(b *testing.B) {
			s, _ := openTest(b)
			ctx := context.Background()
			var n atomic.Int64
			b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					th := fmt.Sprintf("slack:T1:D%d:", i%100)
					m := bot.Message{ThreadKey: th, Role: bot.RoleUser, Text: "move everything about the birthday into one project", At: time.Now()}
					j := bot.Job{ID: fmt.Sprint("job", i), ThreadKey: th}
					if err := s.Commit(ctx, bot.Change{EventKey: fmt.Sprint("slack:Ev", i), EventAt: m.At, Thread: &bot.Thread{Key: th}, Message: &m, Job: &j}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
		})
	}
}
