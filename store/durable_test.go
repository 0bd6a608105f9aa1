package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

// TestCommitDuplicateAppliesNothing checks that the dedupe key is stored
// with the message and the job: a duplicate stores neither, and a change
// that was never stored leaves the key free for the platform's retry.
func TestCommitDuplicateAppliesNothing(t *testing.T) {
	s, _ := open(t)
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

// TestCommitRetiresTheAnswerWithTheRun checks that the run and the
// deletion of the job that fed it are one change.
func TestCommitRetiresTheAnswerWithTheRun(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	th := bot.Thread{Key: "telegram:1:"}
	if err := s.Commit(ctx, bot.Change{Thread: &th, Job: &bot.Job{ID: "answer", ThreadKey: th.Key}}); err != nil {
		t.Fatal(err)
	}
	r := &bot.Run{ID: "r1", ThreadKey: th.Key, Status: bot.RunWorking, Reply: "Home"}
	if err := s.Commit(ctx, bot.Change{Run: r, DeleteJob: "answer"}); err != nil {
		t.Fatal(err)
	}
	jobs, _ := s.Jobs(ctx)
	got, _ := s.Run(ctx, "r1")
	if len(jobs) != 0 || got.Reply != "Home" {
		t.Errorf("jobs %+v, run %+v", jobs, got)
	}
	if open, _ := s.Runs(ctx, bot.RunWorking); len(open) != 1 {
		t.Errorf("working runs: %d, want the committed run indexed", len(open))
	}
}

func TestOutbox(t *testing.T) {
	s, path := open(t)
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
	_ = s.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
	if err := s.Check(); err != nil {
		t.Error(err)
	}
}

func seedConversation(t *testing.T, s *Store, key string, at time.Time) {
	t.Helper()
	ctx := t.Context()
	_ = s.SaveThread(ctx, bot.Thread{Key: key})
	_ = s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: key, Role: bot.RoleUser, Text: "old", At: at}})
	_ = s.SaveRun(ctx, &bot.Run{ID: key + "/done", ThreadKey: key, Status: bot.RunDone, Transcript: []byte(`{"secret":"x"}`), Created: at, Updated: at})
	_ = s.SaveRun(ctx, &bot.Run{ID: key + "/working", ThreadKey: key, Status: bot.RunWorking, Created: at, Updated: at})
	_ = s.Commit(ctx, bot.Change{Audit: []bot.AuditEntry{{RunID: key + "/done", ThreadKey: key, Write: agent.Write{}, At: at}}})
}

func TestPruneDeletesWhatIsOlderThanRetention(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	seedConversation(t, s, "telegram:old:", t0)
	_ = s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: "telegram:old:", Role: bot.RoleUser, Text: "new", At: t0.Add(48 * time.Hour)}})
	seedConversation(t, s, "telegram:new:", t0.Add(48*time.Hour))
	n, err := s.Prune(ctx, t0.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n != (bot.Pruned{Messages: 1, Runs: 1, Audit: 1}) {
		t.Errorf("pruned %+v", n)
	}
	msgs, _ := s.RecentMessages(ctx, "telegram:old:", time.Time{}, 10)
	if len(msgs) != 1 || msgs[0].Text != "new" {
		t.Errorf("messages left: %+v", msgs)
	}
	if _, err := s.Run(ctx, "telegram:old:/done"); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("the old ended run is still there: %v", err)
	}
	if a, _ := s.RunAudit(ctx, "telegram:old:/done"); len(a) != 0 {
		t.Errorf("its journal is still there: %+v", a)
	}
	if _, err := s.Run(ctx, "telegram:old:/working"); err != nil {
		t.Errorf("a working run was pruned: %v", err)
	}
	if rs, _ := s.ThreadRuns(ctx, "telegram:new:"); len(rs) != 2 {
		t.Errorf("recent runs pruned: %d left", len(rs))
	}
	if err := s.Check(); err != nil {
		t.Error(err)
	}
}

func TestDeleteConversation(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	seedConversation(t, s, "telegram:1:", t0)
	seedConversation(t, s, "telegram:2:", t0)
	if err := s.DeleteConversation(ctx, "telegram:1:"); err != nil {
		t.Fatal(err)
	}
	if msgs, _ := s.RecentMessages(ctx, "telegram:1:", time.Time{}, 10); len(msgs) != 0 {
		t.Errorf("messages left: %+v", msgs)
	}
	if rs, _ := s.ThreadRuns(ctx, "telegram:1:"); len(rs) != 1 || rs[0].Status != bot.RunWorking {
		t.Errorf("runs left: %+v", rs)
	}
	if a, _ := s.RunAudit(ctx, "telegram:1:/done"); len(a) != 0 {
		t.Errorf("journal left: %+v", a)
	}
	if rs, _ := s.ThreadRuns(ctx, "telegram:2:"); len(rs) != 2 {
		t.Errorf("another conversation lost runs: %d left", len(rs))
	}
	if msgs, _ := s.RecentMessages(ctx, "telegram:2:", time.Time{}, 10); len(msgs) != 1 {
		t.Errorf("another conversation lost messages")
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
