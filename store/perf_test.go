package store

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/storetest"
)

// A file written before the index of each thread's runs not ended gets
// it at Open (issue 15 item 6; storetest's WaitingRun tests the lookups).
func TestWaitingRunIndex(t *testing.T) {
	s, path := open(t)
	ctx := t.Context()
	if err := s.SaveRun(ctx, &bot.Run{ID: "later", ThreadKey: "k3", Status: bot.RunWaiting, Created: t0, Updated: t0,
		Waiting: &bot.Waiting{Kind: "ask", Question: "which?"}}); err != nil {
		t.Fatal(err)
	}
	forgetIndex(t, s, keyThreadOpen, bucketThreadOpen)
	storetest.WantWaiting(t, s, "k3", "")
	s = reopen(t, s, path)
	storetest.WantWaiting(t, s, "k3", "later")
}

// BenchmarkLongThread is a person's DM thread after months: 10,000 runs
// (each with a 4 KiB transcript) in one thread, each added as a message
// would add it (find the thread's waiting run, save the run working, then
// done). It reports the median cost of the first and the last 10% of
// messages and their ratio, which must stay near 1 (issue 15 item 6:
// within 20%), and the pages bbolt writes per message. fsync is off: its
// constant cost would only hide the growth this measures.
//
// The two tenths are measured at the same time, a message of each in
// turn: one thread's first 1,000 messages and another's last 1,000 (after
// 9,000 added first), so that a slow spell of the machine falls on both
// alike instead of on whichever tenth it happened during.
//
//	go test ./store -run '^$' -bench LongThread -benchtime 1x
func BenchmarkLongThread(b *testing.B) {
	const runs = 10_000
	tr := json.RawMessage(`{"v":1,"pad":"` + strings.Repeat("x", 4096) + `"}`)
	ctx := context.Background()
	open := func() *Store {
		s, err := Open(filepath.Join(b.TempDir(), "tidybot.db"))
		if err != nil {
			b.Fatal(err)
		}
		s.db.NoSync = true
		return s
	}
	// message adds the thread's run i as a message would, and returns
	// its cost and the pages written.
	message := func(s *Store, i int) (time.Duration, int64) {
		start, wrote := time.Now(), pagesWritten(s)
		if w, err := s.WaitingRun(ctx, "telegram:me:"); err != nil || w != nil && i > 0 && w.ID != fmt.Sprint("run", i-1) {
			b.Fatal(w, err)
		}
		r := &bot.Run{ID: fmt.Sprint("run", i), ThreadKey: "telegram:me:", Status: bot.RunWorking, Transcript: tr, Created: t0.Add(time.Duration(i) * time.Second)}
		if err := s.SaveRun(ctx, r); err != nil {
			b.Fatal(err)
		}
		// Every tenth run asks a question, the others end.
		r.Status = bot.RunDone
		if i%10 == 0 {
			r.Status, r.Waiting = bot.RunWaiting, &bot.Waiting{Kind: "ask", Question: "which?"}
		}
		if err := s.SaveRun(ctx, r); err != nil {
			b.Fatal(err)
		}
		if i%10 == 1 { // the next message answered it
			prev, _ := s.Run(ctx, fmt.Sprint("run", i-1))
			prev.Status, prev.Waiting = bot.RunDone, nil
			if err := s.SaveRun(ctx, prev); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start), pagesWritten(s) - wrote
	}
	for range b.N {
		young, old := open(), open()
		for i := range runs - runs/10 {
			message(old, i)
		}
		const tenth = runs / 10
		first, last := make([]time.Duration, tenth), make([]time.Duration, tenth)
		pFirst, pLast := make([]int64, tenth), make([]int64, tenth)
		for i := range tenth {
			first[i], pFirst[i] = message(young, i)
			last[i], pLast[i] = message(old, runs-tenth+i)
		}
		_ = young.Close()
		_ = old.Close()
		f, l := median(first), median(last)
		b.ReportMetric(float64(f.Microseconds()), "µs/msg-first10%")
		b.ReportMetric(float64(l.Microseconds()), "µs/msg-last10%")
		b.ReportMetric(float64(l)/float64(f), "last/first")
		b.ReportMetric(mean(pFirst), "pages/msg-first10%")
		b.ReportMetric(mean(pLast), "pages/msg-last10%")
	}
}

// pagesWritten is how many page writes s's transactions have made.
func pagesWritten(s *Store) int64 {
	st := s.db.Stats()
	return st.TxStats.GetWrite()
}

func mean(xs []int64) float64 {
	var sum int64
	for _, x := range xs {
		sum += x
	}
	return float64(sum) / float64(len(xs))
}

// median is the median of ds; a loaded machine's pauses do not move it.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

var _ todoist.SnapshotStore = (*Store)(nil)

// transcript is a saved agent state of at least size bytes, shaped as
// the engine writes one: model turns whose content is a tool's JSON
// result, quoted, so that encoding it has escapes to handle.
func transcript(tb testing.TB, size int) json.RawMessage {
	tb.Helper()
	tr := &agent.Transcript{V: agent.TranscriptVersion, Protocol: agent.ProtocolTools, Instruction: "tidy my inbox", Status: agent.StatusAsking}
	for i := 0; ; i++ {
		raw, err := agent.MarshalTranscript(tr)
		if err != nil {
			tb.Fatal(err)
		}
		if len(raw) >= size {
			return raw
		}
		tr.Messages = append(tr.Messages,
			agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: fmt.Sprint("call", i), Name: "find_tasks", Arguments: `{"query":"birthday \"cake\""}`}}},
			agent.Message{Role: agent.RoleTool, ToolCallID: fmt.Sprint("call", i), Content: fmt.Sprintf(`{"tasks":[{"id":"%d","content":"Buy <cake> & candles","project_id":"inbox","labels":["home","urgent"]}]}`, i)})
	}
}

// fill stores runs in one transaction (a fixture, not what is measured).
func fill(tb testing.TB, s *Store, runs func(yield func(*bot.Run) bool)) {
	tb.Helper()
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for r := range runs {
			if err := s.saveRun(tx, r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkPress is a button press among 1,000 runs waiting for an
// answer, each in its own conversation with a 4 KiB transcript: finding
// the run the button's key names.
//
//	go test ./store -run '^$' -bench 'Press|Usage|SaveRun|CommitRun' -benchmem -count 5
func BenchmarkPress(b *testing.B) {
	s, _ := open(b)
	ctx := context.Background()
	tr := transcript(b, 4096)
	fill(b, s, func(yield func(*bot.Run) bool) {
		for i := range 1000 {
			r := &bot.Run{ID: fmt.Sprint("run", i), ThreadKey: fmt.Sprintf("slack:T1:C%d::U1", i), Status: bot.RunWaiting, Transcript: tr, Created: t0,
				Waiting: &bot.Waiting{Kind: "confirm", Question: "Delete 1 task?", Key: fmt.Sprintf("k%07d", i), UserID: "U1"}}
			if !yield(r) {
				return
			}
		}
	})
	b.Run("key", func(b *testing.B) {
		for i := range b.N {
			key := fmt.Sprintf("k%07d", i%1000)
			if r, err := s.WaitingRunByKey(ctx, key); err != nil || r == nil {
				b.Fatal("no run waits on", key, err)
			}
		}
	})
	// What a press did before the index: list the waiting runs.
	b.Run("list", func(b *testing.B) {
		for i := range b.N {
			key := fmt.Sprintf("k%07d", i%1000)
			runs, err := s.Runs(ctx, bot.RunWaiting)
			if err != nil {
				b.Fatal(err)
			}
			var found *bot.Run
			for _, r := range runs {
				if r.Waiting != nil && r.Waiting.Key == key {
					found = r
				}
			}
			if found == nil {
				b.Fatal("no run waits on", key)
			}
		}
	})
}

// BenchmarkUsage is /usage in a person's DM after months: the sum of
// the usage of one thread's 10,000 runs, each with a 4 KiB transcript.
func BenchmarkUsage(b *testing.B) {
	s, _ := open(b)
	ctx := context.Background()
	tr := transcript(b, 4096)
	fill(b, s, func(yield func(*bot.Run) bool) {
		for i := range 10_000 {
			r := &bot.Run{ID: fmt.Sprintf("run%05d", i), ThreadKey: "slack:T1:D1:", Status: bot.RunDone, Transcript: tr,
				Usage: agent.Usage{PromptTokens: 1000, CompletionTokens: 100, Calls: 2}, Created: t0.Add(time.Duration(i) * time.Minute)}
			if !yield(r) {
				return
			}
		}
	})
	b.ResetTimer()
	for range b.N {
		runs, err := s.ThreadRuns(ctx, "slack:T1:D1:")
		if err != nil {
			b.Fatal(err)
		}
		var u agent.Usage
		for _, r := range runs {
			u.Add(r.Usage)
		}
		if u.Calls != 20_000 {
			b.Fatal(u.Calls)
		}
	}
}

// BenchmarkSaveRun saves a run with a 20 KB transcript, as each step of
// the agent does, from one goroutine and from as many as there are CPUs
// (where the writer's share of the work is what limits). fsync is off:
// it would hide the CPU this measures.
func BenchmarkSaveRun(b *testing.B) {
	tr := transcript(b, 20_000)
	b.Run("serial", func(b *testing.B) {
		s, _ := open(b)
		s.db.NoSync = true
		ctx := context.Background()
		r := &bot.Run{ID: "run1", ThreadKey: "slack:T1:D1:", Status: bot.RunWorking, Instruction: "tidy my inbox", Transcript: tr, Created: t0, Updated: t0}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if err := s.SaveRun(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		s, _ := open(b)
		s.db.NoSync = true
		ctx := context.Background()
		var next atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			id := fmt.Sprint("run", next.Add(1))
			r := &bot.Run{ID: id, ThreadKey: "slack:T1:D" + id + ":", Status: bot.RunWorking, Instruction: "tidy my inbox", Transcript: tr, Created: t0, Updated: t0}
			for pb.Next() {
				if err := s.SaveRun(ctx, r); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkCommitRun is a run's end: the run with its 20 KB transcript,
// its answer in the history and in the outbox, its journal and its
// tokens in one Commit (bot's finish). fsync is off.
func BenchmarkCommitRun(b *testing.B) {
	s, _ := open(b)
	s.db.NoSync = true
	ctx := context.Background()
	tr := transcript(b, 20_000)
	key := "slack:T1:D1:"
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprint("run", i)
		c := bot.Change{
			Run:     &bot.Run{ID: id, ThreadKey: key, Status: bot.RunDone, Instruction: "tidy my inbox", Transcript: tr, Answer: "Moved 3 tasks to Birthday.", Created: t0, Updated: t0},
			Message: &bot.Message{ThreadKey: key, Role: bot.RoleAssistant, Text: "Moved 3 tasks to Birthday.", RunID: id, At: t0},
			Send:    []bot.Outbound{{ID: "ob" + id, Platform: "slack", Msg: bot.Outgoing{ChatID: "D1", Text: "Moved 3 tasks to Birthday."}, Created: t0}},
			Audit:   []bot.AuditEntry{{RunID: id, ThreadKey: key, Write: agent.Write{}, Summary: "moved “Buy cake” to Birthday", At: t0}},
			Count:   map[string]int{"tokens:slack:U1:2026-11-22": 1100},
		}
		if err := s.Commit(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

// forgetIndex empties an index's buckets and forgets it was built, as in
// a file written before the index existed.
func forgetIndex(t *testing.T, s *Store, built []byte, buckets ...[]byte) {
	t.Helper()
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for _, b := range buckets {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Delete(built)
	}); err != nil {
		t.Fatal(err)
	}
}

// reopen closes s and opens its file again, closed at the test's end.
func reopen(t *testing.T, s *Store, path string) *Store {
	t.Helper()
	_ = s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Close() })
	return s2
}
