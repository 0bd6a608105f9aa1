package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

// markedHistory stores n messages holding marker in thread key, and an
// ended run asked with it.
func markedHistory(t *testing.T, s *Store, key, marker string, n int, at time.Time) {
	t.Helper()
	ctx := t.Context()
	for i := range n {
		if err := s.Commit(ctx, bot.Change{Thread: &bot.Thread{Key: key}, Message: &bot.Message{ThreadKey: key, Role: bot.RoleUser, Text: fmt.Sprint(i, " ", marker, strings.Repeat(".", 100)), At: at}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveRun(ctx, &bot.Run{ID: key + "/r", ThreadKey: key, Status: bot.RunDone, Instruction: marker, Transcript: []byte(`["` + marker + `"]`), Created: at, Updated: at}); err != nil {
		t.Fatal(err)
	}
}

func fileHolds(t *testing.T, path, marker string) bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(raw, []byte(marker))
}

// The probe: after /reset, grep the database file for what was
// said. bbolt frees pages without wiping them.
func TestResetLeavesNoTextInTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tidybot.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "RESET-MARKER-4b1f"
	markedHistory(t, s, "telegram:42:", marker, 30, t0)
	if err := s.DeleteConversation(t.Context(), "telegram:42:"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fileHolds(t, path, marker) {
		t.Errorf("after DeleteConversation the file still holds %q", marker)
	}
}

// The same after a retention prune.
func TestPruneLeavesNoTextInTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tidybot.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "PRUNE-MARKER-8c2d"
	markedHistory(t, s, "telegram:42:", marker, 30, t0)
	if _, err := s.Prune(t.Context(), t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fileHolds(t, path, marker) {
		t.Errorf("after Prune the file still holds %q", marker)
	}
}

// Prune and DeleteConversation delete a long history in bounded write
// transactions, not in one that holds the writer (every message and run
// step waits for it) for the whole history.
func TestDeletionTransactionsAreBounded(t *testing.T) {
	const messages, runs = 3000, 300
	for _, tt := range []struct {
		name string
		del  func(s *Store) error
	}{
		{"Prune", func(s *Store) error { _, err := s.Prune(t.Context(), t0.Add(time.Hour)); return err }},
		{"DeleteConversation", func(s *Store) error { return s.DeleteConversation(t.Context(), "k") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := open(t)
			s.db.NoSync = true // a fixture: no fsync per commit
			ctx := t.Context()
			for i := range messages {
				if err := s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: "k", Role: bot.RoleUser, Text: fmt.Sprint(i), At: t0}}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range runs {
				if err := s.SaveRun(ctx, &bot.Run{ID: fmt.Sprint("r", i), ThreadKey: "k", Status: bot.RunDone, Created: t0, Updated: t0}); err != nil {
					t.Fatal(err)
				}
			}
			before := txID(t, s)
			largest := 0
			onBatch = func(n int) { largest = max(largest, n) }
			t.Cleanup(func() { onBatch = nil })
			if err := tt.del(s); err != nil {
				t.Fatal(err)
			}
			if largest > deleteBatch {
				t.Errorf("a transaction deleted %d values, more than the bound %d", largest, deleteBatch)
			}
			// A bound of 1,024 values per transaction: 3,300 values take
			// at least 4 transactions (one took them all before).
			if got, want := txID(t, s)-before, (messages+runs+1023)/1024; got < want {
				t.Errorf("%d write transactions for %d values, want at least %d", got, messages+runs, want)
			}
			if msgs, _ := s.RecentMessages(ctx, "k", time.Time{}, 10); len(msgs) != 0 {
				t.Errorf("%d messages left", len(msgs))
			}
			if rs, _ := s.ThreadRuns(ctx, "k"); len(rs) != 0 {
				t.Errorf("%d runs left", len(rs))
			}
		})
	}
}

// BenchmarkPruneWriterWait is a retention prune of 20,000 messages and
// 2,000 runs (3 journal entries each) while another conversation keeps
// committing messages: max-commit-wait-ms is the longest one of those
// commits took, which a prune in one transaction made as long as the
// whole prune.
func BenchmarkPruneWriterWait(b *testing.B) {
	const messages, runs = 20_000, 2_000
	var worst, total time.Duration
	for range b.N {
		b.StopTimer()
		s, err := Open(filepath.Join(b.TempDir(), "tidybot.db"))
		if err != nil {
			b.Fatal(err)
		}
		s.db.NoSync = true // the fixture
		ctx := b.Context()
		for i := range messages {
			key := fmt.Sprint("telegram:", i%100, ":")
			if err := s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: key, Role: bot.RoleUser, Text: fmt.Sprint("message ", i, strings.Repeat(" words", 20)), At: t0}}); err != nil {
				b.Fatal(err)
			}
		}
		for i := range runs {
			key := fmt.Sprint("telegram:", i%100, ":")
			id := fmt.Sprint("r", i)
			r := &bot.Run{ID: id, ThreadKey: key, Status: bot.RunDone, Instruction: "tidy", Transcript: []byte(`{"steps":["` + strings.Repeat("x", 2000) + `"]}`), Created: t0, Updated: t0}
			a := []bot.AuditEntry{{RunID: id, ThreadKey: key, Summary: "moved"}, {RunID: id, ThreadKey: key, Summary: "moved"}, {RunID: id, ThreadKey: key, Summary: "moved"}}
			if err := s.Commit(ctx, bot.Change{Run: r, Audit: a}); err != nil {
				b.Fatal(err)
			}
		}
		s.db.NoSync = false
		stop, done := make(chan struct{}), make(chan time.Duration)
		go func() {
			var longest time.Duration
			for i := 0; ; i++ {
				select {
				case <-stop:
					done <- longest
					return
				default:
				}
				start := time.Now()
				if err := s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: "telegram:live:", Role: bot.RoleUser, Text: fmt.Sprint(i), At: t0.Add(time.Hour)}}); err != nil {
					b.Error(err)
				}
				longest = max(longest, time.Since(start))
				time.Sleep(time.Millisecond)
			}
		}()
		time.Sleep(5 * time.Millisecond)
		b.StartTimer()
		start := time.Now()
		if _, err := s.Prune(ctx, t0.Add(time.Minute)); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		b.StopTimer()
		close(stop)
		worst = max(worst, <-done)
		_ = s.Close()
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "max-commit-wait-ms")
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "prune-ms")
}
