package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// storeViaProxy opens a store whose every connection goes through a
// relay that counts its commits; u is its database's URL, not relayed.
func storeViaProxy(t *testing.T) (s *Store, p *pgtest.Proxy, u string) {
	t.Helper()
	u = pgtest.URL(t)
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p = pgtest.NewProxy(t, pu.Host)
	if s, err = Open(context.Background(), p.Via(t, u)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, p, u
}

// commits is the number of write transactions p saw committed.
func commits(p *pgtest.Proxy) int64 {
	var n int64
	for _, c := range p.Commits() {
		n += c
	}
	return n
}

// bumpEpoch moves the lease of key to another epoch, as another
// replica's take does: a write fenced by the old one is refused.
func bumpEpoch(t *testing.T, s *Store, key string) {
	t.Helper()
	if _, err := s.pool.Exec(context.Background(), `UPDATE leases SET epoch = epoch + 1000 WHERE thread_key = $1`, key); err != nil {
		t.Fatal(err)
	}
}

// TestWritesShareACommit: fenced writes of several conversations made
// while another is being committed (a run's end with its answer in the
// outbox, its journal and its tokens; a run's save; a delivery) go in
// one transaction, each fenced by its own lease; when one of them was
// fenced out meanwhile, it alone is refused (bot.ErrFenced) and writes
// nothing, the others are made.
func TestWritesShareACommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, p, _ := storeViaProxy(t)
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("one fenced out %v", stale), func(t *testing.T) {
			keys := make([]string, 3)
			fences := make([]context.Context, 3)
			for i := range keys {
				keys[i] = fmt.Sprintf("telegram:%v%d:", stale, i)
				if ok, err := s.Hold(ctx, keys[i]); !ok || err != nil {
					t.Fatalf("hold %s: %v %v", keys[i], ok, err)
				}
				fences[i] = s.Fence(ctx, keys[i])
			}
			now := time.Now()
			id := func(what string, i int) string { return fmt.Sprintf("%s-%v-%d", what, stale, i) }
			runs := make([]*bot.Run, 3)
			for i := range runs {
				runs[i] = &bot.Run{ID: id("r", i), ThreadKey: keys[i], Platform: "telegram", Status: bot.RunWorking, Instruction: "add a task", Created: now, Updated: now}
				if err := s.SaveRun(fences[i], runs[i]); err != nil { // its keys are kept from here on
					t.Fatal(err)
				}
			}
			ob := bot.Outbound{ID: id("o", 2), Platform: "telegram", RunID: runs[2].ID, Msg: bot.Outgoing{ChatID: "c", Text: "answer"}, Created: now}
			if err := s.Commit(fences[2], bot.Change{Send: []bot.Outbound{ob}}); err != nil {
				t.Fatal(err)
			}
			fenced := -1
			if stale {
				fenced = 1
				bumpEpoch(t, s, keys[fenced])
			}
			end := *runs[0]
			end.Status, end.Answer = bot.RunDone, "Added."
			answer := bot.Outbound{ID: id("o", 0), Platform: "telegram", RunID: end.ID, Msg: bot.Outgoing{ChatID: "c", Text: "Added."}, Created: now}
			saved := *runs[1]
			saved.Transcript = []byte(`{"v":1}`)
			writes := []func() error{
				func() error {
					return s.Commit(fences[0], bot.Change{Run: &end, Send: []bot.Outbound{answer},
						Message: &bot.Message{ThreadKey: keys[0], Role: bot.RoleAssistant, Text: "Added.", RunID: end.ID, At: now},
						Audit:   []bot.AuditEntry{{RunID: end.ID, ThreadKey: keys[0], Summary: "added a task", At: now}},
						Count:   map[string]int{"usage:test:" + id("u", 0): 10}})
				},
				func() error { return s.SaveRun(fences[1], &saved) },
				func() error { return s.Delivered(fences[2], ob, "") },
			}
			errs := together(t, s, p, writes...)
			for i := range writes {
				err := <-errs[i]
				if (i == fenced) != errors.Is(err, bot.ErrFenced) || i != fenced && err != nil {
					t.Errorf("write %d: %v, want fenced %v", i, err, i == fenced)
				}
			}
			want := int64(1) // one for all
			if stale {
				want = 2 // refused together, then each alone: the others'
			}
			if c := commits(p); c != want {
				t.Errorf("%d commits (%v), want %d", c, p.Commits(), want)
			}
			// What each made, or not.
			if r, err := s.Run(ctx, end.ID); err != nil || r.Status != bot.RunDone {
				t.Errorf("the ended run: %+v %v", r, err)
			}
			if audit, err := s.RunAudit(ctx, end.ID); err != nil || len(audit) != 1 {
				t.Errorf("its journal: %v %v", audit, err)
			}
			if r, err := s.Run(ctx, saved.ID); err != nil || (string(r.Transcript) == `{"v":1}`) == stale {
				t.Errorf("the saved run (fenced out %v): %+v %v", stale, r, err)
			}
			left, err := s.Outbox(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, ob := range left {
				ids = append(ids, ob.ID)
			}
			if len(ids) != 1 || ids[0] != answer.ID {
				t.Errorf("outbox after: %v, want the new answer only", ids)
			}
			if _, err := s.pool.Exec(ctx, `DELETE FROM outbox`); err != nil { // none for the next case
				t.Fatal(err)
			}
		})
	}
}

// TestClaimThreadWithNothingCommitsNothing: a claim of a conversation's
// outbox that finds nothing to take commits no transaction (its lease's
// guard locked a row: a commit would be a WAL flush), and is still
// refused when the lease was taken since.
func TestClaimThreadWithNothingCommitsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, p, _ := storeViaProxy(t)
	const key = "telegram:claim:"
	if ok, err := s.Hold(ctx, key); !ok || err != nil {
		t.Fatalf("hold: %v %v", ok, err)
	}
	p.Reset()
	if got, err := s.ClaimThread(ctx, key); err != nil || len(got) != 0 {
		t.Fatalf("claim: %v %v, want nothing", got, err)
	}
	if c := commits(p); c != 0 {
		t.Errorf("an empty claim committed %d write transactions (%v), want none", c, p.Commits())
	}
	bumpEpoch(t, s, key)
	if got, err := s.ClaimThread(ctx, key); !errors.Is(err, bot.ErrFenced) || len(got) != 0 {
		t.Errorf("a claim under a lease taken since: %v %v, want bot.ErrFenced", got, err)
	}
}

// together makes writes while a shared transaction is in flight, so
// that they all wait to share the next one; once they do, it resets p
// (when not nil), lets them go and returns each write's error, to
// receive.
func together(t *testing.T, s *Store, p *pgtest.Proxy, writes ...func() error) []chan error {
	t.Helper()
	s.group.slot <- struct{}{}
	errs := make([]chan error, len(writes))
	for i, w := range writes {
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- w() }()
	}
	waitUntil(t, func() bool {
		s.group.mu.Lock()
		defer s.group.mu.Unlock()
		return len(s.group.waiting) == len(writes)
	})
	if p != nil {
		p.Reset()
	}
	<-s.group.slot
	return errs
}

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSharedWritesDoNotWaitBehindALockedRow: when one write of a shared
// transaction needs a row another transaction holds (a frozen
// replica's), the others are made without waiting for it; that one is
// made once the row is free.
func TestSharedWritesDoNotWaitBehindALockedRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	keys := []string{"telegram:lk0:", "telegram:lk1:", "telegram:lk2:"}
	now := time.Now()
	runs := make([]*bot.Run, len(keys))
	fences := make([]context.Context, len(keys))
	for i, key := range keys {
		if ok, err := s.Hold(ctx, key); !ok || err != nil {
			t.Fatalf("hold %s: %v %v", key, ok, err)
		}
		fences[i] = s.Fence(ctx, key)
		runs[i] = &bot.Run{ID: fmt.Sprintf("lk-r%d", i), ThreadKey: key, Platform: "telegram", Status: bot.RunWorking, Created: now, Updated: now}
		if err := s.SaveRun(fences[i], runs[i]); err != nil {
			t.Fatal(err)
		}
	}
	// Another transaction holds run 1's row.
	other, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(ctx) }()
	if _, err := other.Exec(ctx, `SELECT 1 FROM runs WHERE id = $1 FOR UPDATE`, runs[1].ID); err != nil {
		t.Fatal(err)
	}
	writes := make([]func() error, len(keys))
	for i := range keys {
		r := *runs[i]
		r.Status = bot.RunDone
		writes[i] = func() error { return s.SaveRun(fences[i], &r) }
	}
	errs := together(t, s, nil, writes...)
	for _, i := range []int{0, 2} {
		select {
		case err := <-errs[i]:
			if err != nil {
				t.Errorf("save %d: %v", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("save %d waited behind the locked row of run 1", i)
		}
	}
	select {
	case err := <-errs[1]:
		t.Fatalf("save 1 made while its row was locked: %v", err)
	default:
	}
	if err := other.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errs[1]; err != nil {
		t.Errorf("save 1 once its row was free: %v", err)
	}
	for _, r := range runs {
		if got, err := s.Run(ctx, r.ID); err != nil || got.Status != bot.RunDone {
			t.Errorf("run %s: %+v %v", r.ID, got, err)
		}
	}
}

// TestWriteDoesNotWaitForAHungSharedTransaction: a shared transaction
// in flight that does not end (its connection cut, until keepalives
// end it) holds up the next writes no longer than groupWait: they are
// made alone.
func TestWriteDoesNotWaitForAHungSharedTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	const key = "telegram:hung:"
	if ok, err := s.Hold(ctx, key); !ok || err != nil {
		t.Fatalf("hold: %v %v", ok, err)
	}
	now := time.Now()
	r := &bot.Run{ID: "hung-r", ThreadKey: key, Platform: "telegram", Status: bot.RunWorking, Created: now, Updated: now}
	s.group.slot <- struct{}{} // in flight, for ever
	defer func() { <-s.group.slot }()
	done := make(chan error, 1)
	go func() { done <- s.SaveRun(s.Fence(ctx, key), r) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the save waited for the shared transaction in flight")
	}
	if got, err := s.Run(ctx, r.ID); err != nil || got.Status != bot.RunWorking {
		t.Errorf("the run: %+v %v", got, err)
	}
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	if len(s.group.waiting) != 0 {
		t.Errorf("%d writes left waiting", len(s.group.waiting))
	}
}

// TestIntakesShareACommit: messages' intakes (an event key, a person's
// setting's fields merged) and another merge of the same setting made
// at once share one transaction, which reads what they need in one
// round trip and keeps every field; a duplicate among them gets
// bot.ErrDuplicate alone, the others are stored.
func TestIntakesShareACommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, p, _ := storeViaProxy(t)
	for _, dup := range []bool{false, true} {
		t.Run(fmt.Sprintf("a duplicate %v", dup), func(t *testing.T) {
			person := fmt.Sprintf("person:test:%v", dup)
			key := fmt.Sprintf("telegram:in%v:", dup)
			now := time.Now()
			field := func(name, v string) map[string]map[string]json.RawMessage {
				return map[string]map[string]json.RawMessage{person: {name: json.RawMessage(v)}}
			}
			// Keys kept for the conversation, the event key seen once.
			if err := s.Commit(ctx, bot.Change{EventKey: "ev-old-" + key, Message: &bot.Message{ThreadKey: key, Role: bot.RoleUser, Text: "first", At: now}}); err != nil {
				t.Fatal(err)
			}
			intake := func(event, text string, fields map[string]map[string]json.RawMessage) bot.Change {
				j := bot.Job{ID: "job-" + event, ThreadKey: key, Kind: bot.JobIncoming, Enqueued: now}
				return bot.Change{EventKey: event, EventAt: now, Thread: &bot.Thread{Key: key, Platform: "telegram", ChatID: "c"},
					Message: &bot.Message{ThreadKey: key, Role: bot.RoleUser, Text: text, At: now}, Job: &j, Fields: fields}
			}
			changes := []bot.Change{
				intake("ev-1-"+key, "hello", field("conversation", `"`+key+`"`)),
				{Fields: field("language", `"fr"`)}, // as /settings merges
			}
			if dup {
				changes = append(changes, intake("ev-old-"+key, "first again", nil))
			}
			writes := make([]func() error, len(changes))
			for i, c := range changes {
				writes[i] = func() error { return s.Commit(ctx, c) }
			}
			errs := together(t, s, p, writes...)
			for i := range changes {
				err := <-errs[i]
				if isDup := dup && i == 2; isDup != errors.Is(err, bot.ErrDuplicate) || !isDup && err != nil {
					t.Errorf("change %d: %v, want duplicate %v", i, err, isDup)
				}
			}
			want := int64(1)
			if dup {
				want = 2 // refused together, then each alone: the others'
			}
			if c := commits(p); c != want {
				t.Errorf("%d commits (%v), want %d", c, p.Commits(), want)
			}
			v, err := s.Setting(ctx, person)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]string
			if err := json.Unmarshal([]byte(v), &got); err != nil || got["conversation"] != key || got["language"] != "fr" {
				t.Errorf("the person's setting: %s (%v), want both fields", v, err)
			}
			msgs, err := s.RecentMessages(ctx, key, time.Time{}, 10)
			if err != nil {
				t.Fatal(err)
			}
			var texts []string
			for _, m := range msgs {
				texts = append(texts, m.Text)
			}
			if !slices.Equal(texts, []string{"first", "hello"}) {
				t.Errorf("messages: %q, want the first and the new one", texts)
			}
		})
	}
}

// TestNewConversationsShareACommit: the first messages of conversations
// new to the store (no data key yet: 200 people writing at once, their
// first words) share one transaction too, whose keys are made with its
// writes, in two round trips whatever their number (the first reads the
// scopes' keys, finding none; the second writes keys and messages and
// commits); each message is stored, sealed with its conversation's key.
func TestNewConversationsShareACommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, p, _ := storeViaProxy(t)
	const n = 20
	now := time.Now()
	// Two rounds, the first on fresh connections, where pgx prepares
	// each statement at its first use (a round trip of its own); the
	// second is measured.
	for round := range 2 {
		key := func(i int) string { return fmt.Sprintf("telegram:new%d-%d:", round, i) }
		writes := make([]func() error, n)
		for i := range n {
			writes[i] = func() error {
				j := bot.Job{ID: fmt.Sprint("job-new-", round, "-", i), ThreadKey: key(i), Kind: bot.JobIncoming, Enqueued: now}
				return s.Commit(ctx, bot.Change{EventKey: fmt.Sprint("ev-new-", round, "-", i), EventAt: now,
					Thread:  &bot.Thread{Key: key(i), Platform: "telegram", ChatID: fmt.Sprint(i)},
					Message: &bot.Message{ThreadKey: key(i), Role: bot.RoleUser, Text: fmt.Sprint("hello ", i), At: now}, Job: &j})
			}
		}
		errs := together(t, s, p, writes...)
		for i := range n {
			if err := <-errs[i]; err != nil {
				t.Errorf("intake %d: %v", i, err)
			}
		}
		if c := commits(p); c != 1 {
			t.Errorf("round %d: %d commits (%v), want 1 for all", round, c, p.Commits())
		}
		if rt := p.RoundTrips(); round == 1 && rt > 2 {
			t.Errorf("%d round trips for %d new conversations' first messages, want 2: %v", rt, n, p.Statements())
		}
		for i := range n {
			msgs, err := s.RecentMessages(ctx, key(i), time.Time{}, 10)
			if err != nil || len(msgs) != 1 || msgs[0].Text != fmt.Sprint("hello ", i) {
				t.Errorf("conversation %d: %+v %v", i, msgs, err)
			}
		}
	}
}
