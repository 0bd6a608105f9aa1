package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

// The tests of what is deleted: retention (Prune) and /reset
// (DeleteConversation).

// seedConversation stores a thread with a message, an ended run with a
// transcript and a journal entry, and a working run, all at at.
func seedConversation(t *testing.T, s Store, key string, at time.Time) {
	t.Helper()
	ctx := t.Context()
	_ = s.SaveThread(ctx, bot.Thread{Key: key})
	_ = s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: key, Role: bot.RoleUser, Text: "old", At: at}})
	_ = s.SaveRun(ctx, &bot.Run{ID: key + "/done", ThreadKey: key, Status: bot.RunDone, Transcript: []byte(`{"secret":"x"}`), Created: at, Updated: at})
	_ = s.SaveRun(ctx, &bot.Run{ID: key + "/working", ThreadKey: key, Status: bot.RunWorking, Created: at, Updated: at})
	_ = s.Commit(ctx, bot.Change{Audit: []bot.AuditEntry{{RunID: key + "/done", ThreadKey: key, Write: agent.Write{}, At: at}}})
}

func testPruneDeletesWhatIsOlderThanRetention(t *testing.T, open Open) {
	s := fresh(t, open)
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
	check(t, s)
}

// A pending request (a person not yet connected) is pruned with
// retention: it was kept for ever.
func testPrunePendingRequests(t *testing.T, open Open) {
	s := fresh(t, open)
	ctx := t.Context()
	for k, at := range map[string]time.Time{"pending:telegram:1": t0, "pending:telegram:2": t0.Add(48 * time.Hour)} {
		raw := fmt.Sprintf(`{"platform":"telegram","text":"file it","at":%q}`, at.Format(time.RFC3339))
		if err := s.SetSetting(ctx, k, raw); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Prune(ctx, t0.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Setting(ctx, "pending:telegram:1"); err == nil && v != "" {
		t.Errorf("a request older than retention is kept: %s", v)
	}
	if v, err := s.Setting(ctx, "pending:telegram:2"); err != nil || v == "" {
		t.Errorf("a recent request was pruned: %q, %v", v, err)
	}
}

// A snapshot not saved for the retention period (its account unused
// that long) is pruned; one saved since is kept. The store dates a save
// by its own clock: the cut-offs are an hour either side of now.
func testPruneUnusedSnapshots(t *testing.T, open Open) {
	s := fresh(t, open)
	ctx := t.Context()
	if err := s.SaveSnapshot(ctx, "acct", []byte(`{"sync_token":"1"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prune(ctx, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if snap, err := s.LoadSnapshot(ctx, "acct"); err != nil || string(snap) != `{"sync_token":"1"}` {
		t.Errorf("a snapshot saved within retention: %s, %v", snap, err)
	}
	if _, err := s.Prune(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if snap, err := s.LoadSnapshot(ctx, "acct"); err != nil || snap != nil {
		t.Errorf("a snapshot unused for longer than retention is kept: %s, %v", snap, err)
	}
	check(t, s)
}

func testDeleteConversation(t *testing.T, open Open) {
	s := fresh(t, open)
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
	check(t, s)
}

// testDeleteConversationRacingMessages: messages stored while /reset
// runs (a replica's intake, or the same process's) leave every job of
// the conversation readable: none is sealed with a key the reset
// destroyed (issue 35: on PostgreSQL one was, and the conversation was
// never answered again).
func testDeleteConversationRacingMessages(t *testing.T, open Open) {
	s := fresh(t, open)
	ctx := t.Context()
	const key = "telegram:1:"
	const rounds = 30
	for i := range rounds {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			j := bot.Job{ID: fmt.Sprint("job-", i), ThreadKey: key, Kind: bot.JobIncoming, Enqueued: t0}
			if err := s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: key, Role: bot.RoleUser, Text: "msg", At: t0}, Job: &j}); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := s.DeleteConversation(ctx, key); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
	}
	jobs, err := s.Jobs(ctx)
	if err != nil || len(jobs) != rounds {
		t.Fatalf("jobs after messages raced /reset: %d, %v; want %d", len(jobs), err, rounds)
	}
	check(t, s)
}

// Deleting a run, by prune or by /reset, deletes it with its transcript
// and its wait key; a working run keeps its transcript.
func testDeletedRunsLeaveNothing(t *testing.T, open Open) {
	for _, tt := range []struct {
		name string
		del  func(t *testing.T, s Store)
	}{
		{"Prune", func(t *testing.T, s Store) {
			if n, err := s.Prune(t.Context(), t0.Add(time.Hour)); err != nil || n.Runs != 2 {
				t.Fatalf("pruned %+v, %v; want 2 runs", n, err)
			}
		}},
		{"DeleteConversation", func(t *testing.T, s Store) {
			if err := s.DeleteConversation(t.Context(), "k"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := fresh(t, open)
			ctx := t.Context()
			for _, r := range []*bot.Run{
				{ID: "done", ThreadKey: "k", Status: bot.RunDone, Transcript: json.RawMessage(`{"secret":"a"}`), Created: t0, Updated: t0},
				{ID: "waits", ThreadKey: "k", Status: bot.RunWaiting, Transcript: json.RawMessage(`{"secret":"b"}`), Created: t0, Updated: t0,
					Waiting: &bot.Waiting{Kind: "confirm", Key: "w1"}},
				{ID: "busy", ThreadKey: "k", Status: bot.RunWorking, Transcript: json.RawMessage(`{"step":1}`), Created: t0, Updated: t0},
			} {
				if err := s.SaveRun(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			tt.del(t, s)
			for _, id := range []string{"done", "waits"} {
				if _, err := s.Run(ctx, id); !errors.Is(err, bot.ErrNotFound) {
					t.Errorf("run %s after its deletion: %v, want ErrNotFound", id, err)
				}
			}
			if r, err := s.WaitingRunByKey(ctx, "w1"); r != nil || err != nil {
				t.Errorf("WaitingRunByKey(w1) = %+v, %v; want none", r, err)
			}
			if r, err := s.WaitingRun(ctx, "k"); r != nil || err != nil {
				t.Errorf("WaitingRun(k) = %+v, %v; want none", r, err)
			}
			if got, _ := s.Run(ctx, "busy"); string(got.Transcript) != `{"step":1}` {
				t.Errorf("the working run's transcript: %s", got.Transcript)
			}
			check(t, s)
		})
	}
}
