package storetest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

// The tests of what comes in and goes out: event keys, threads and
// messages, jobs, settings and counts, the journal, the outbox, and
// each account's Todoist snapshot.

func testEvents(t *testing.T, open Open) {
	s := fresh(t, open)
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

func testMarkEventConcurrentlyOnce(t *testing.T, open Open) {
	s := fresh(t, open)
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

func testThreadsAndMessages(t *testing.T, open Open) {
	s := fresh(t, open)
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

func testCommitKeepsAnExistingThread(t *testing.T, open Open) {
	s := fresh(t, open)
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

// The dedupe key is stored with the message and the job: a duplicate
// stores neither, and a change that was never stored leaves the key free
// for the platform's retry.
func testCommitDuplicateAppliesNothing(t *testing.T, open Open) {
	s := fresh(t, open)
	ctx := t.Context()
	th := bot.Thread{Key: "telegram:1:", Platform: "telegram", ChatID: "1"}
	change := func(job string) bot.Change {
		return bot.Change{EventKey: "telegram:u1", EventAt: t0, Thread: &th,
			Message: &bot.Message{ThreadKey: th.Key, Role: bot.RoleUser, Text: "hi", At: t0},
			Job:     &bot.Job{ID: job, ThreadKey: th.Key}}
	}
	if err := s.Commit(ctx, change("j1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, change("j2")); !errors.Is(err, bot.ErrDuplicate) {
		t.Fatalf("second commit: %v, want ErrDuplicate", err)
	}
	msgs, _ := s.RecentMessages(ctx, th.Key, time.Time{}, 10)
	jobs, _ := s.Jobs(ctx)
	if len(msgs) != 1 || len(jobs) != 1 || jobs[0].ID != "j1" {
		t.Errorf("%d messages, jobs %+v: want the first event's only", len(msgs), jobs)
	}
	if fresh, _ := s.MarkEvent(ctx, "telegram:u1", t0); fresh {
		t.Error("the committed key is not recorded")
	}
}

func testJobs(t *testing.T, open Open) {
	s := fresh(t, open)
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

func testAuditAndSettings(t *testing.T, open Open) {
	s := fresh(t, open)
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

// A Change's counts are added in its transaction, so runs ending at once
// lose no tokens of a person's day, and its audit entries join the run's
// journal.
func testCommitCountsAndJournals(t *testing.T, open Open) {
	s := fresh(t, open)
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

func testOutbox(t *testing.T, open Open) {
	s, reopen := open(t)
	ctx := t.Context()
	w := &bot.Waiting{Kind: "ask", Key: "k1"}
	r := &bot.Run{ID: "r1", ThreadKey: "telegram:1:", Status: bot.RunWaiting, Waiting: w}
	q := bot.Outbound{ID: "o1", Platform: "telegram", Msg: bot.Outgoing{ChatID: "1", Text: "Which one?", Buttons: []bot.Button{{Label: "A", Data: "w:k1:0"}}}, RunID: "r1", WaitKey: "k1", Created: t0}
	a := bot.Outbound{ID: "o2", Platform: "telegram", Msg: bot.Outgoing{ChatID: "2", Text: "Done."}, Created: t0}
	if err := s.Commit(ctx, bot.Change{Run: r, Send: []bot.Outbound{q}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, bot.Change{Send: []bot.Outbound{a, a}}); err != nil {
		t.Fatal(err)
	}
	// What a crash leaves is there after a reopen.
	s = reopen()
	got, err := s.Outbox(ctx)
	if err != nil || len(got) != 2 || got[0].ID != "o1" || got[1].ID != "o2" || got[0].Msg.Buttons[0].Data != "w:k1:0" {
		t.Fatalf("outbox = %+v, %v", got, err)
	}
	if err := s.Delivered(ctx, got[0], "m7"); err != nil {
		t.Fatal(err)
	}
	if run, _ := s.Run(ctx, "r1"); run.Waiting.MessageID != "m7" {
		t.Errorf("question's message id not recorded: %+v", run.Waiting)
	}
	// A question answered before its post was confirmed keeps its run.
	r.Status, r.Waiting = bot.RunWorking, nil
	_ = s.SaveRun(ctx, r)
	if err := s.Delivered(ctx, q, "m8"); err != nil {
		t.Fatal(err)
	}
	if run, _ := s.Run(ctx, "r1"); run.Status != bot.RunWorking || run.Waiting != nil {
		t.Errorf("a late delivery changed the resumed run: %+v", run)
	}
	if err := s.Delivered(ctx, got[1], ""); err != nil {
		t.Fatal(err)
	}
	if left, _ := s.Outbox(ctx); len(left) != 0 {
		t.Errorf("outbox after delivery: %+v", left)
	}
	check(t, s)
}

// Each Todoist account's snapshot is kept under its own key and survives
// a reopen.
func testSnapshots(t *testing.T, open Open) {
	s, reopen := open(t)
	ctx := t.Context()
	if got, err := s.LoadSnapshot(ctx, "a"); got != nil || err != nil {
		t.Fatalf("empty store: %q %v", got, err)
	}
	for key, data := range map[string]string{"a": `{"sync_token":"1"}`, "b": `{"sync_token":"2"}`} {
		if err := s.SaveSnapshot(ctx, key, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveSnapshot(ctx, "a", []byte(`{"sync_token":"3"}`)); err != nil {
		t.Fatal(err)
	}
	s = reopen()
	a, _ := s.LoadSnapshot(ctx, "a")
	b, _ := s.LoadSnapshot(ctx, "b")
	if string(a) != `{"sync_token":"3"}` || string(b) != `{"sync_token":"2"}` {
		t.Errorf("snapshots after reopen: %s, %s", a, b)
	}
	check(t, s)
}

// DeleteSnapshot (/disconnect) deletes an account's snapshot, and only
// that account's.
func testDeleteSnapshot(t *testing.T, open Open) {
	s := fresh(t, open)
	ctx := t.Context()
	for i := range 3 {
		if err := s.SaveSnapshot(ctx, "acct", []byte(`{"items":["a"],"n":`+strconv.Itoa(i)+`}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveSnapshot(ctx, "other", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSnapshot(ctx, "acct"); err != nil {
		t.Fatal(err)
	}
	if snap, err := s.LoadSnapshot(ctx, "acct"); err != nil || snap != nil {
		t.Errorf("snapshot after delete: %s, %v", snap, err)
	}
	if snap, err := s.LoadSnapshot(ctx, "other"); err != nil || string(snap) != "{}" {
		t.Errorf("another account's snapshot: %s, %v", snap, err)
	}
	if err := s.DeleteSnapshot(ctx, "never"); err != nil {
		t.Errorf("deleting a snapshot never saved: %v", err)
	}
}
