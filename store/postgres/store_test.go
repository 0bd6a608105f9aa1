package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 123456789, time.UTC)

func TestCommitAppliesAllOrNothingOnce(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	th := bot.Thread{Key: "telegram:1", Platform: "telegram", ChatID: "1"}
	msg := bot.Message{ThreadKey: th.Key, Role: "user", Text: "move the birthday tasks", At: t0}
	job := bot.Job{ID: "j1", ThreadKey: th.Key, Incoming: bot.Incoming{Text: msg.Text}, Enqueued: t0}
	c := bot.Change{EventKey: "telegram:update:7", EventAt: t0, Thread: &th, Message: &msg, Job: &job}
	if err := s.Commit(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, c); !errors.Is(err, bot.ErrDuplicate) {
		t.Fatalf("second commit of the same event: %v, want ErrDuplicate", err)
	}
	msgs, err := s.RecentMessages(ctx, th.Key, time.Time{}, 10)
	if err != nil || len(msgs) != 1 || msgs[0].Text != msg.Text || !msgs[0].At.Equal(t0) {
		t.Fatalf("messages after a duplicate: %+v, %v", msgs, err)
	}
	jobs, err := s.Jobs(ctx)
	if err != nil || len(jobs) != 1 || jobs[0].ID != "j1" {
		t.Fatalf("jobs after a duplicate: %+v, %v", jobs, err)
	}
	if got, err := s.Thread(ctx, th.Key); err != nil || got != th {
		t.Fatalf("thread: %+v, %v", got, err)
	}
	if fresh, err := s.MarkEvent(ctx, "telegram:update:7", t0); err != nil || fresh {
		t.Fatalf("MarkEvent of a committed key: fresh %v, %v", fresh, err)
	}
	// A commit that fails part-way applies nothing: the event key stays
	// free for the retry.
	bad := bot.Change{EventKey: "telegram:update:8", EventAt: t0, Message: &msg, Count: map[string]int{"": 1}}
	if _, err := s.pool.Exec(ctx, `ALTER TABLE settings ADD CONSTRAINT no_empty CHECK (key <> '')`); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, bad); err == nil {
		t.Fatal("a commit whose count cannot be written succeeded")
	}
	if fresh, err := s.MarkEvent(ctx, "telegram:update:8", t0); err != nil || !fresh {
		t.Fatalf("the failed commit kept its event key: fresh %v, %v", fresh, err)
	}
	if msgs, _ := s.RecentMessages(ctx, th.Key, time.Time{}, 10); len(msgs) != 1 {
		t.Fatalf("the failed commit kept its message: %d messages", len(msgs))
	}
}

func TestMarkEventAndPrune(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	for i, at := range []time.Time{t0, t0.Add(time.Hour)} {
		if fresh, err := s.MarkEvent(ctx, fmt.Sprint("e", i), at); err != nil || !fresh {
			t.Fatalf("MarkEvent e%d: %v %v", i, fresh, err)
		}
	}
	if n, err := s.PruneEvents(ctx, t0.Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("PruneEvents: %d, %v", n, err)
	}
	if fresh, _ := s.MarkEvent(ctx, "e0", t0); !fresh {
		t.Error("a pruned key is not fresh again")
	}
	if fresh, _ := s.MarkEvent(ctx, "e1", t0); fresh {
		t.Error("a kept key is fresh")
	}
}

func TestRecentMessagesNewestNSinceOldestFirst(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	for i := range 5 {
		m := bot.Message{ThreadKey: "a", Role: "user", Text: fmt.Sprint("m", i), At: t0.Add(time.Duration(i) * time.Minute)}
		if err := s.Commit(ctx, bot.Change{Message: &m}); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: "b", Text: "other", At: t0}})
	got, err := s.RecentMessages(ctx, "a", t0.Add(time.Minute), 3)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range got {
		texts = append(texts, m.Text)
	}
	if strings.Join(texts, ",") != "m2,m3,m4" {
		t.Errorf("3 latest since m1: %v", texts)
	}
	got, _ = s.RecentMessages(ctx, "a", t0.Add(3*time.Minute), 10)
	if len(got) != 2 || got[0].Text != "m3" {
		t.Errorf("since m3: %+v", got)
	}
}

func run(id, thread string, st bot.RunStatus, created time.Time) *bot.Run {
	return &bot.Run{ID: id, ThreadKey: thread, Status: st, Instruction: "tidy " + id, Created: created, Updated: created}
}

func TestRunsTranscriptsAndIndexes(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	r1 := run("r1", "a", bot.RunWorking, t0)
	r1.Transcript = json.RawMessage(`{"steps":[1,2]}`)
	r2 := run("r2", "a", bot.RunDone, t0.Add(time.Second))
	r3 := run("r3", "b", bot.RunWaiting, t0.Add(2*time.Second))
	r3.Waiting = &bot.Waiting{Kind: "confirm", Question: "delete?", Key: "k3"}
	for _, r := range []*bot.Run{r3, r2, r1} {
		if err := s.SaveRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// A run saved without its transcript keeps the stored one.
	noTr := *r1
	noTr.Transcript, noTr.Answer = nil, "working on it"
	if err := s.SaveRun(ctx, &noTr); err != nil {
		t.Fatal(err)
	}
	got, err := s.Run(ctx, "r1")
	if err != nil || string(got.Transcript) != `{"steps":[1,2]}` || got.Answer != "working on it" {
		t.Fatalf("Run r1: %+v, %v", got, err)
	}
	if _, err := s.Run(ctx, "nope"); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("a missing run: %v", err)
	}
	ids := func(rs []*bot.Run, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			if r.Transcript != nil {
				t.Errorf("list returned %s with its transcript", r.ID)
			}
			out = append(out, r.ID)
		}
		return strings.Join(out, ",")
	}
	if got := ids(s.Runs(ctx)); got != "r1,r2,r3" {
		t.Errorf("Runs(): %s", got)
	}
	if got := ids(s.Runs(ctx, bot.RunWorking, bot.RunWaiting)); got != "r1,r3" {
		t.Errorf("Runs(working, waiting): %s", got)
	}
	if got := ids(s.ThreadRuns(ctx, "a")); got != "r1,r2" {
		t.Errorf("ThreadRuns(a): %s", got)
	}
	if w, err := s.WaitingRun(ctx, "b"); err != nil || w == nil || w.ID != "r3" {
		t.Errorf("WaitingRun(b): %+v, %v", w, err)
	}
	if w, err := s.WaitingRun(ctx, "a"); err != nil || w != nil {
		t.Errorf("WaitingRun(a): %+v, %v", w, err)
	}
	if w, err := s.WaitingRunByKey(ctx, "k3"); err != nil || w == nil || w.ID != "r3" {
		t.Errorf("WaitingRunByKey(k3): %+v, %v", w, err)
	}
	r3.Status, r3.Waiting = bot.RunDone, nil
	if err := s.SaveRun(ctx, r3); err != nil {
		t.Fatal(err)
	}
	if w, err := s.WaitingRunByKey(ctx, "k3"); err != nil || w != nil {
		t.Errorf("WaitingRunByKey after the answer: %+v, %v", w, err)
	}
}

func TestOutboxDeliveredRecordsTheQuestion(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	r := run("r1", "a", bot.RunWaiting, t0)
	r.Waiting = &bot.Waiting{Kind: "ask", Question: "which project?", Key: "wk"}
	q := bot.Outbound{ID: "o1", Platform: "slack", Msg: bot.Outgoing{ChatID: "C1", Text: "which project?"}, RunID: "r1", WaitKey: "wk", Created: t0}
	a := bot.Outbound{ID: "o2", Platform: "slack", Msg: bot.Outgoing{ChatID: "C1", Text: "done"}, Created: t0}
	if err := s.Commit(ctx, bot.Change{Run: r, Send: []bot.Outbound{q, a}}); err != nil {
		t.Fatal(err)
	}
	// The same message queued again (a retried commit) is queued once.
	if err := s.Commit(ctx, bot.Change{Send: []bot.Outbound{a}}); err != nil {
		t.Fatal(err)
	}
	out, err := s.Outbox(ctx)
	if err != nil || len(out) != 2 || out[0].ID != "o1" || out[1].Msg.Text != "done" {
		t.Fatalf("outbox: %+v, %v", out, err)
	}
	if err := s.Delivered(ctx, q, "ts.1"); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Run(ctx, "r1")
	if got.Waiting == nil || got.Waiting.MessageID != "ts.1" {
		t.Errorf("the question's message id: %+v", got.Waiting)
	}
	if out, _ := s.Outbox(ctx); len(out) != 1 || out[0].ID != "o2" {
		t.Errorf("outbox after delivery: %+v", out)
	}
}

func TestJobsAuditSettingsCounts(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	for _, id := range []string{"j2", "j1", "j3"} {
		if err := s.Commit(ctx, bot.Change{Job: &bot.Job{ID: id, ThreadKey: "a"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit(ctx, bot.Change{DeleteJob: "j1", Audit: []bot.AuditEntry{{RunID: "r", ThreadKey: "a", Summary: "moved x"}, {RunID: "r", ThreadKey: "a", Summary: "moved y"}},
		Count: map[string]int{"tokens:u1": 5}}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteJob(ctx, "j3"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteJob(ctx, "never"); err != nil {
		t.Fatal(err)
	}
	jobs, _ := s.Jobs(ctx)
	if len(jobs) != 1 || jobs[0].ID != "j2" {
		t.Errorf("jobs: %+v", jobs)
	}
	au, err := s.RunAudit(ctx, "r")
	if err != nil || len(au) != 2 || au[1].Summary != "moved y" {
		t.Errorf("journal: %+v, %v", au, err)
	}
	_ = s.Commit(ctx, bot.Change{Count: map[string]int{"tokens:u1": 7}})
	if v, err := s.Setting(ctx, "tokens:u1"); err != nil || v != "12" {
		t.Errorf("count: %q, %v", v, err)
	}
	if _, err := s.Setting(ctx, "nope"); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("missing setting: %v", err)
	}
	if err := s.SetSetting(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Setting(ctx, "k"); v != "v" {
		t.Errorf("setting: %q", v)
	}
}

// rawContains reports whether any stored value of the schema holds text.
func rawContains(t *testing.T, s *Store, text string) bool {
	t.Helper()
	ctx := context.Background()
	for _, c := range sealedColumns {
		rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT %s FROM %s WHERE %s IS NOT NULL`, c.value, c.table, c.value))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var v []byte
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(v, []byte(text)) {
				rows.Close()
				return true
			}
		}
		rows.Close()
	}
	return false
}

func TestTextIsSealedAndResetShredsIt(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	const secret = "my doctor appointment about the rash"
	m := bot.Message{ThreadKey: "a", Role: "user", Text: secret, At: t0}
	done := run("r1", "a", bot.RunDone, t0)
	done.Instruction, done.Transcript = secret, json.RawMessage(`{"said":"`+secret+`"}`)
	working := run("r2", "a", bot.RunWorking, t0)
	working.Instruction = "still " + secret
	job := bot.Job{ID: "j", ThreadKey: "a", Incoming: bot.Incoming{Text: secret}}
	for _, c := range []bot.Change{{Message: &m, Job: &job}, {Run: done, Audit: []bot.AuditEntry{{RunID: "r1", ThreadKey: "a", Summary: secret}}}, {Run: working}} {
		if err := s.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetSetting(ctx, bot.PendingPrefix+"u1", `{"text":"`+secret+`"}`); err != nil {
		t.Fatal(err)
	}
	if rawContains(t, s, "doctor") {
		t.Fatal("a stored value shows what was written in plain text")
	}
	var sealedMsg []byte
	if err := s.pool.QueryRow(ctx, `SELECT value FROM messages`).Scan(&sealedMsg); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteConversation(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if msgs, _ := s.RecentMessages(ctx, "a", time.Time{}, 10); len(msgs) != 0 {
		t.Errorf("messages after reset: %+v", msgs)
	}
	if _, err := s.Run(ctx, "r1"); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("the done run after reset: %v", err)
	}
	if au, _ := s.RunAudit(ctx, "r1"); len(au) != 0 {
		t.Errorf("the journal after reset: %+v", au)
	}
	// What a backup kept of the deleted message does not open any more.
	if _, err := s.keys.open(ctx, s.pool, sealedMsg); err == nil {
		t.Error("a copy of a deleted message still opens after reset")
	}
	// The working run and the job are kept, readable, under a new key.
	if r, err := s.Run(ctx, "r2"); err != nil || r.Instruction != working.Instruction {
		t.Errorf("the working run after reset: %+v, %v", r, err)
	}
	if jobs, err := s.Jobs(ctx); err != nil || len(jobs) != 1 || jobs[0].Incoming.Text != secret {
		t.Errorf("the job after reset: %+v, %v", jobs, err)
	}
	if v, err := s.Setting(ctx, bot.PendingPrefix+"u1"); err != nil || !strings.Contains(v, secret) {
		t.Errorf("another scope's pending request after reset: %q, %v", v, err)
	}
}

func TestSnapshotsPerAccountAndDisconnect(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	if got, err := s.LoadSnapshot(ctx, "acct1"); err != nil || got != nil {
		t.Fatalf("no snapshot: %q, %v", got, err)
	}
	for _, k := range []string{"acct1", "acct2"} {
		if err := s.SaveSnapshot(ctx, k, []byte(`{"tasks":"`+k+` secret plans"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if rawContains(t, s, "secret plans") {
		t.Error("a snapshot is stored in plain text")
	}
	if got, _ := s.LoadSnapshot(ctx, "acct2"); string(got) != `{"tasks":"acct2 secret plans"}` {
		t.Errorf("acct2: %s", got)
	}
	var kept []byte
	_ = s.pool.QueryRow(ctx, `SELECT value FROM snapshots WHERE key = 'acct1'`).Scan(&kept)
	if err := s.DeleteSnapshot(ctx, "acct1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LoadSnapshot(ctx, "acct1"); got != nil {
		t.Errorf("acct1 after disconnect: %s", got)
	}
	if _, err := s.keys.open(ctx, s.pool, kept); err == nil {
		t.Error("a copy of the disconnected account's snapshot still opens")
	}
	if got, _ := s.LoadSnapshot(ctx, "acct2"); got == nil {
		t.Error("acct2 went with acct1")
	}
}

// TestCountsAddInTheDatabase: a count adds to what is stored (a JSON
// string of digits, as strconv.Itoa writes), counts from 0 when absent
// or unreadable, and loses nothing to commits adding at once.
func TestCountsAddInTheDatabase(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		stored []byte // nil: none
		want   string
	}{
		{"absent", nil, "5"},
		{"a count", []byte(`"12"`), "17"},
		{"negative", []byte(`"-3"`), "2"},
		{"not a string", []byte(`12`), "5"},
		{"not digits", []byte(`"twelve"`), "5"},
		{"not text", []byte{0xff, 0x00, '"'}, "5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "tokens:" + c.name
			if c.stored != nil {
				if _, err := s.pool.Exec(ctx, `INSERT INTO settings (key, value) VALUES ($1, $2)`, key, c.stored); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Commit(ctx, bot.Change{Count: map[string]int{key: 5}}); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Setting(ctx, key); err != nil || got != c.want {
				t.Errorf("after adding 5: %q %v, want %q", got, err, c.want)
			}
		})
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Commit(ctx, bot.Change{Count: map[string]int{"tokens:at once": 1, "tokens:at once too": 2}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for key, want := range map[string]string{"tokens:at once": "20", "tokens:at once too": "40"} {
		if got, err := s.Setting(ctx, key); err != nil || got != want {
			t.Errorf("%s after 20 commits at once: %q %v, want %q", key, got, err, want)
		}
	}
}
