package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/bot"
)

func open(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tidybot.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

func TestValueVersions(t *testing.T) {
	raw, err := encode(bot.Thread{Key: "k"})
	if err != nil || !strings.HasPrefix(string(raw), `{"v":1,"data":`) {
		t.Fatalf("encoded %s, %v", raw, err)
	}
	var th bot.Thread
	if err := decode(raw, &th); err != nil || th.Key != "k" {
		t.Fatalf("decode: %+v, %v", th, err)
	}
	if err := decode([]byte(`{"v":2,"data":{}}`), &th); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("a newer value version was accepted: %v", err)
	}
}

// envelop writes what json.Marshal would for an envelope, so that
// values written before it read the same.
func TestEnvelop(t *testing.T) {
	for _, v := range []any{
		bot.Thread{Key: "k"},
		bot.Message{Text: "<b> & \u2028 \"quoted\""},
		&bot.Run{ID: "r", Transcript: json.RawMessage(` { "a" : [1, "<x>"] } `)},
		"plain",
	} {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(envelope{V: valueVersion, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		if got := envelop(data); string(got) != string(want) {
			t.Errorf("envelop(%s) = %s, want %s", data, got, want)
		}
	}
}

// decode reads a value of any envelope layout, as json wrote it or not.
func TestDecodeLayouts(t *testing.T) {
	for _, tt := range []struct{ raw, want string }{
		{`{"v":1,"data":{"key":"k"}}`, "k"},
		{`{"v":1,"data":{"key":"k"},"note":"x"}`, "k"},
		{`{"data":{"key":"k"},"v":1}`, "k"},
		{` {"v":1,"data":{"key":"k"}} `, "k"},
	} {
		var th bot.Thread
		if err := decode([]byte(tt.raw), &th); err != nil || th.Key != tt.want {
			t.Errorf("decode(%s) = %+v, %v; want key %s", tt.raw, th, err, tt.want)
		}
	}
	for _, raw := range []string{`{"v":2,"data":{"key":"k"}}`, `{"v":1,"data":{"key":1}}`, `{"v":1,"data":{"key":"k"}`} {
		var th bot.Thread
		if err := decode([]byte(raw), &th); err == nil {
			t.Errorf("decode(%s) accepted it: %+v", raw, th)
		}
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	s, path := open(t)
	_ = s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, u64(SchemaVersion+1)) })
	_ = s.Close()
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), "upgrade tidybot") {
		t.Errorf("err = %v", err)
	}
}

func TestLockedFileFailsFast(t *testing.T) {
	_, path := open(t)
	start := time.Now()
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestSurvivesKill writes from a child process, kills it mid-write with
// SIGKILL, and checks that the file opens, passes bbolt's consistency
// check, and that every record decodes.
func TestSurvivesKill(t *testing.T) {
	if path := os.Getenv("TIDYBOT_STORE_KILL_CHILD"); path != "" {
		writeForever(path)
		return
	}
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	path := filepath.Join(t.TempDir(), "killed.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSurvivesKill$")
	cmd.Env = append(os.Environ(), "TIDYBOT_STORE_KILL_CHILD="+path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Let it write for a while, until the file has grown.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if fi, err := os.Stat(path); err == nil && fi.Size() > 256<<10 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	runs, err := s.Runs(t.Context())
	if err != nil || len(runs) == 0 {
		t.Fatalf("runs after kill: %d, %v", len(runs), err)
	}
	msgs, err := s.RecentMessages(t.Context(), "k", time.Time{}, 1<<30)
	if err != nil || len(msgs) == 0 {
		t.Fatalf("messages after kill: %d, %v", len(msgs), err)
	}
}

func writeForever(path string) {
	s, err := Open(path)
	if err != nil {
		os.Exit(3)
	}
	ctx := context.Background()
	big := strings.Repeat("transcript ", 200)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				_ = s.SaveRun(ctx, &bot.Run{ID: fmt.Sprintf("r%d-%d", w, i%500), ThreadKey: "k", Status: bot.RunWorking, Instruction: big, Created: time.Now()})
				_ = s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: "k", Role: bot.RoleUser, Text: big, At: time.Now()}})
			}
		}()
	}
	wg.Wait()
}

func BenchmarkAppendMessage(b *testing.B) {
	s, _ := open(b)
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: "k", Role: bot.RoleUser, Text: "move everything about the birthday into one project", At: t0}})
		}
	})
}

func BenchmarkMarkEvent(b *testing.B) {
	s, _ := open(b)
	ctx := context.Background()
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = s.MarkEvent(ctx, fmt.Sprint("telegram:", n.Add(1)), t0)
		}
	})
}

// BenchmarkTenThousandThreads fills a store with 10,000 threads (each
// with a thread record, 4 messages and a finished run) and reports the
// file size and the Go heap in use with the store open.
func BenchmarkTenThousandThreads(b *testing.B) {
	for range b.N {
		s, path := open(b)
		ctx := context.Background()
		answer := strings.Repeat("Moved 9 tasks into 3 projects. ", 4)
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < 10_000; i += 16 {
					key := fmt.Sprintf("telegram:%d:", i)
					_ = s.SaveThread(ctx, bot.Thread{Key: key, Platform: "telegram", ChatID: fmt.Sprint(i)})
					for j := range 4 {
						_ = s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: key, Role: bot.RoleUser, Text: answer, At: t0.Add(time.Duration(j) * time.Second)}})
					}
					_ = s.SaveRun(ctx, &bot.Run{ID: fmt.Sprint("run", i), ThreadKey: key, Status: bot.RunDone, Answer: answer, Created: t0})
				}
			}()
		}
		wg.Wait()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fi, _ := os.Stat(path)
		b.ReportMetric(float64(fi.Size())/(1<<20), "file-MiB")
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
		if raw, err := os.ReadFile("/proc/self/status"); err == nil {
			for _, line := range strings.Split(string(raw), "\n") {
				var kb float64
				if _, err := fmt.Sscanf(line, "VmRSS: %f kB", &kb); err == nil {
					b.ReportMetric(kb/1024, "rss-MiB")
				}
			}
		}
	}
}

// BenchmarkThreadRuns measures reading a thread's runs (/undo, /usage)
// and every waiting run, with 10,000 runs (each with a 4 KiB transcript)
// in other threads. An incoming message finds its thread's waiting run
// through WaitingRun (BenchmarkLongThread), a button press its run
// through WaitingRunByKey (BenchmarkPress).
func BenchmarkThreadRuns(b *testing.B) {
	s, _ := open(b)
	ctx := context.Background()
	tr := json.RawMessage(`{"v":1,"pad":"` + strings.Repeat("x", 4096) + `"}`)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 10_000; i += 16 {
				_ = s.SaveRun(ctx, &bot.Run{ID: fmt.Sprint("run", i), ThreadKey: fmt.Sprintf("telegram:%d:", i), Status: bot.RunDone, Transcript: tr, Created: t0})
			}
		}()
	}
	wg.Wait()
	_ = s.SaveRun(ctx, &bot.Run{ID: "mine", ThreadKey: "telegram:me:", Status: bot.RunWaiting, Created: t0})
	b.ResetTimer()
	for range b.N {
		rs, err := s.ThreadRuns(ctx, "telegram:me:")
		if err != nil || len(rs) != 1 {
			b.Fatal(len(rs), err)
		}
		if ws, _ := s.Runs(ctx, bot.RunWaiting); len(ws) != 1 {
			b.Fatal(len(ws))
		}
	}
}

// A file written before the run indexes existed gets them at Open.
func TestRunIndexes(t *testing.T) {
	s, path := open(t)
	ctx := t.Context()
	_ = s.SaveRun(ctx, &bot.Run{ID: "r1", ThreadKey: "k", Status: bot.RunDone, Created: t0})
	_ = s.SaveRun(ctx, &bot.Run{ID: "r2", ThreadKey: "k", Status: bot.RunWaiting, Created: t0.Add(time.Second)})
	_ = s.db.Update(func(tx *bolt.Tx) error {
		_ = tx.DeleteBucket(bucketThreadRn)
		_ = tx.DeleteBucket(bucketOpenRuns)
		return tx.Bucket(bucketMeta).Delete(keyRunIndex)
	})
	_ = s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	rs, _ := s2.ThreadRuns(ctx, "k")
	waiting, _ := s2.Runs(ctx, bot.RunWaiting)
	if len(rs) != 2 || len(waiting) != 1 || waiting[0].ID != "r2" {
		t.Errorf("after reindexing: thread runs %d, waiting %+v", len(rs), waiting)
	}
}

// TestDeleteJobGoneWritesNothing: a job retired with its run (the usual
// case) is deleted again by the worker; that costs a read, not a write
// transaction and its fsync.
func TestDeleteJobGoneWritesNothing(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	if err := s.Commit(ctx, bot.Change{Job: &bot.Job{ID: "j1", ThreadKey: "k"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, bot.Change{Run: &bot.Run{ID: "j1", ThreadKey: "k", Status: bot.RunWorking}, DeleteJob: "j1"}); err != nil {
		t.Fatal(err)
	}
	txid := func() int {
		var id int
		_ = s.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil })
		return id
	}
	before := txid()
	if err := s.DeleteJob(ctx, "j1"); err != nil {
		t.Fatal(err)
	}
	if after := txid(); after != before {
		t.Errorf("deleting a job already gone committed %d write transactions", after-before)
	}
	if js, _ := s.Jobs(ctx); len(js) != 0 {
		t.Errorf("jobs = %+v", js)
	}
}

func TestOpenTightensFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tidybot.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("mode %o, want 600", got)
	}
}

// BenchmarkRecentMessages is a run's read of its conversation's history
// (bot.history: the default 15 messages and the one being answered), in
// a conversation of 40 messages.
//
//	go test ./store -run '^$' -bench RecentMessages -benchmem
func BenchmarkRecentMessages(b *testing.B) {
	s, _ := open(b)
	ctx := context.Background()
	const key = "slack:D1:"
	for i := range 40 {
		role := bot.RoleUser
		if i%2 == 1 {
			role = bot.RoleAssistant
		}
		m := &bot.Message{ThreadKey: key, Role: role, Text: fmt.Sprintf("message %d: move the \"birthday\" tasks into one project\nand tell me", i), RunID: fmt.Sprint("run", i/2), At: t0.Add(time.Duration(i) * time.Second)}
		if err := s.Commit(ctx, bot.Change{Message: m}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if ms, err := s.RecentMessages(ctx, key, time.Time{}, 16); err != nil || len(ms) != 16 {
			b.Fatal(len(ms), err)
		}
	}
}
