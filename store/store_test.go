package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/agent"
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

func TestEvents(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	for _, tt := range []struct {
		key  string
		at   time.Time
		want bool
	}{
		{"telegram:1", t0, true},
		{"telegram:1", t0.Add(time.Minute), false},
		{"slack:Ev1", t0.Add(2 * time.Hour), true},
	} {
		got, err := s.MarkEvent(ctx, tt.key, tt.at)
		if err != nil || got != tt.want {
			t.Errorf("MarkEvent(%s) = %v, %v; want %v", tt.key, got, err, tt.want)
		}
	}
	n, err := s.PruneEvents(ctx, t0.Add(time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want 1", n, err)
	}
	if fresh, _ := s.MarkEvent(ctx, "telegram:1", t0); !fresh {
		t.Error("a pruned key is still known")
	}
}

func TestMarkEventConcurrentlyOnce(t *testing.T) {
	s, _ := open(t)
	var fresh atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.MarkEvent(t.Context(), "slack:same", t0)
			if err != nil {
				t.Error(err)
			}
			if ok {
				fresh.Add(1)
			}
		}()
	}
	wg.Wait()
	if fresh.Load() != 1 {
		t.Errorf("%d goroutines saw the key as new, want 1", fresh.Load())
	}
}

func TestThreadsAndMessages(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	if _, err := s.Thread(ctx, "console:local:"); !errors.Is(err, bot.ErrNotFound) {
		t.Fatalf("missing thread: %v", err)
	}
	th := bot.Thread{Key: "console:local:", Platform: "console", ChatID: "local", ResetAt: t0}
	if err := s.SaveThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Thread(ctx, th.Key); err != nil || got != th {
		t.Fatalf("thread = %+v, %v", got, err)
	}
	for i := range 5 {
		m := bot.Message{ThreadKey: th.Key, Role: bot.RoleUser, Text: fmt.Sprint("m", i), At: t0.Add(time.Duration(i-2) * time.Minute)}
		if err := s.Commit(ctx, bot.Change{Message: &m}); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: "other", Text: "elsewhere", At: t0}})
	for _, tt := range []struct {
		since time.Time
		n     int
		want  string
	}{
		{time.Time{}, 10, "m0 m1 m2 m3 m4"},
		{time.Time{}, 2, "m3 m4"},
		{t0, 10, "m2 m3 m4"},
		{t0.Add(time.Hour), 10, ""},
	} {
		ms, err := s.RecentMessages(ctx, th.Key, tt.since, tt.n)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range ms {
			got = append(got, m.Text)
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("RecentMessages(since %v, %d) = %v, want %s", tt.since, tt.n, got, tt.want)
		}
	}
}

func TestRuns(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	tr, _ := json.Marshal(map[string]any{"v": 1, "status": "asking"})
	runs := []*bot.Run{
		{ID: "b", ThreadKey: "k1", Status: bot.RunDone, Created: t0.Add(time.Minute), Usage: agent.Usage{PromptTokens: 10, Calls: 1}},
		{ID: "a", ThreadKey: "k1", Status: bot.RunWaiting, Created: t0, Transcript: tr, Waiting: &bot.Waiting{Kind: "ask", Options: []string{"x"}, Key: "k"}},
		{ID: "c", ThreadKey: "k2", Status: bot.RunWorking, Created: t0.Add(2 * time.Minute)},
	}
	for _, r := range runs {
		if err := s.SaveRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Run(ctx, "a")
	if err != nil || got.Waiting.Options[0] != "x" || string(got.Transcript) != string(tr) {
		t.Fatalf("run a = %+v, %v", got, err)
	}
	if _, err := s.Run(ctx, "zz"); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("missing run: %v", err)
	}
	ids := func(rs []*bot.Run) string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return strings.Join(out, ",")
	}
	all, _ := s.Runs(ctx)
	live, _ := s.Runs(ctx, bot.RunWorking, bot.RunWaiting)
	k1, _ := s.ThreadRuns(ctx, "k1")
	if ids(all) != "a,b,c" || ids(live) != "a,c" || ids(k1) != "a,b" {
		t.Errorf("all %s, live %s, k1 %s", ids(all), ids(live), ids(k1))
	}
}

func TestJobs(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	for _, id := range []string{"j3", "j1", "j2", "j1"} {
		if err := s.Commit(ctx, bot.Change{Thread: &bot.Thread{Key: "k"}, Job: &bot.Job{ID: id, ThreadKey: "k", Incoming: bot.Incoming{Text: id}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteJob(ctx, "j1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteJob(ctx, "nope"); err != nil {
		t.Fatal(err)
	}
	js, _ := s.Jobs(ctx)
	if len(js) != 2 || js[0].ID != "j3" || js[1].ID != "j2" || js[1].Incoming.Text != "j2" {
		t.Errorf("jobs = %+v, want j3 then j2", js)
	}
}

func TestAuditAndSettings(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	content := "new"
	entries := []bot.AuditEntry{
		{RunID: "r1", Write: agent.Write{Kind: agent.MoveTask, ID: "t1", ProjectID: "p2"}, Inverse: []agent.Write{{Kind: agent.MoveTask, ID: "t1", ProjectID: "p1"}}, Summary: "moved"},
		{RunID: "r1", Write: agent.Write{Kind: agent.UpdateTask, ID: "t1", Content: &content}, Summary: "renamed"},
		{RunID: "r2", Summary: "other run"},
	}
	if err := s.Commit(ctx, bot.Change{Audit: entries}); err != nil {
		t.Fatal(err)
	}
	got, err := s.RunAudit(ctx, "r1")
	if err != nil || len(got) != 2 || got[0].Inverse[0].ProjectID != "p1" || *got[1].Write.Content != "new" {
		t.Fatalf("journal = %+v, %v", got, err)
	}
	if _, err := s.Setting(ctx, "owner"); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("missing setting: %v", err)
	}
	_ = s.SetSetting(ctx, "owner", "telegram:42")
	if v, err := s.Setting(ctx, "owner"); err != nil || v != "telegram:42" {
		t.Errorf("setting = %q, %v", v, err)
	}
}

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

func TestCommitKeepsAnExistingThread(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	th := bot.Thread{Key: "telegram:1:", Platform: "telegram", ChatID: "1"}
	m := &bot.Message{ThreadKey: th.Key, Role: bot.RoleUser, Text: "hi", At: t0}
	if err := s.Commit(ctx, bot.Change{Thread: &th, Message: m, Job: &bot.Job{ID: "j1", ThreadKey: th.Key}}); err != nil {
		t.Fatal(err)
	}
	// An existing thread keeps its reset time.
	th.ResetAt = t0
	_ = s.SaveThread(ctx, th)
	if err := s.Commit(ctx, bot.Change{Thread: &bot.Thread{Key: th.Key}, Job: &bot.Job{ID: "j2", ThreadKey: th.Key}}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Thread(ctx, th.Key)
	msgs, _ := s.RecentMessages(ctx, th.Key, time.Time{}, 10)
	jobs, _ := s.Jobs(ctx)
	if !got.ResetAt.Equal(t0) || len(msgs) != 1 || len(jobs) != 2 {
		t.Errorf("thread %+v, %d messages, %d jobs", got, len(msgs), len(jobs))
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

func TestRunIndexes(t *testing.T) {
	s, path := open(t)
	ctx := t.Context()
	r := &bot.Run{ID: "r1", ThreadKey: "k", Status: bot.RunWorking, Created: t0}
	_ = s.SaveRun(ctx, r)
	if got, _ := s.Runs(ctx, bot.RunWorking, bot.RunWaiting); len(got) != 1 {
		t.Fatalf("open runs = %d, want 1", len(got))
	}
	r.Status = bot.RunDone
	_ = s.SaveRun(ctx, r)
	if got, _ := s.Runs(ctx, bot.RunWorking, bot.RunWaiting); len(got) != 0 {
		t.Errorf("an ended run is still listed as open")
	}
	// A file written before the indexes existed gets them at Open.
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

// TestCommitCountsAndJournals: a Change's counts are added in its
// transaction, so runs ending at once lose no tokens of a person's day,
// and its audit entries join the run's journal.
func TestCommitCountsAndJournals(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	const runs = 50
	var wg sync.WaitGroup
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := bot.Change{Count: map[string]int{"usage:slack:U1:2026-11-22": 10 + i}}
			if i == 0 {
				c.Audit = []bot.AuditEntry{{RunID: "r1", Summary: "moved a"}, {RunID: "r1", Summary: "moved b"}}
			}
			if err := s.Commit(ctx, c); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	v, err := s.Setting(ctx, "usage:slack:U1:2026-11-22")
	if want := strconv.Itoa(runs*10 + runs*(runs-1)/2); err != nil || v != want {
		t.Errorf("count = %q (%v), want %s", v, err, want)
	}
	got, err := s.RunAudit(ctx, "r1")
	if err != nil || len(got) != 2 || got[0].Summary != "moved a" || got[1].Summary != "moved b" {
		t.Errorf("journal = %+v (%v), want the two entries in order", got, err)
	}
}
