package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/bot"
)

// transcriptOf is the transcript stored apart for run id; nil for none.
func transcriptOf(t *testing.T, s *Store, id string) []byte {
	t.Helper()
	var out []byte
	if err := s.db.View(func(tx *bolt.Tx) error {
		if tr := tx.Bucket(bucketTranscripts).Get([]byte(id)); tr != nil {
			pt, err := s.keys.open(tx, tr)
			out = append([]byte{}, pt...)
			return err
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// record is run id's stored record, decoded as it is.
func record(t *testing.T, s *Store, id string) bot.Run {
	t.Helper()
	var r bot.Run
	if err := s.db.View(func(tx *bolt.Tx) error { return s.decodeSealed(tx, tx.Bucket(bucketRuns).Get([]byte(id)), &r) }); err != nil {
		t.Fatal(err)
	}
	return r
}

// saveOld stores r as a file written before transcripts were kept
// apart holds it: its transcript inside its record.
func saveOld(t *testing.T, s *Store, r *bot.Run) {
	t.Helper()
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := put(tx.Bucket(bucketRuns), []byte(r.ID), r); err != nil {
			return err
		}
		return indexRun(tx, keysOf(r))
	}); err != nil {
		t.Fatal(err)
	}
}

// A run's transcript is stored apart from its record, byte for byte as
// given; Run returns it, the lists do not.
func TestTranscriptKeptApart(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	// Not compact, and with HTML characters json.Marshal would escape:
	// stored as given, it is not encoded again.
	tr := json.RawMessage(`{"v":1, "messages":["<a> & b"]}`)
	r := &bot.Run{ID: "r1", ThreadKey: "k", Status: bot.RunWaiting, Transcript: tr, Created: t0,
		Waiting: &bot.Waiting{Kind: "ask", Key: "w1"}}
	if err := s.SaveRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got := transcriptOf(t, s, "r1"); string(got) != string(tr) {
		t.Errorf("stored transcript %s, want %s", got, tr)
	}
	if rec := record(t, s, "r1"); rec.Transcript != nil {
		t.Errorf("the record holds the transcript too: %s", rec.Transcript)
	}
	got, err := s.Run(ctx, "r1")
	if err != nil || string(got.Transcript) != string(tr) {
		t.Fatalf("Run = %s, %v; want its transcript", got.Transcript, err)
	}

	listed := map[string]func() ([]*bot.Run, error){
		"Runs":        func() ([]*bot.Run, error) { return s.Runs(ctx) },
		"Runs(open)":  func() ([]*bot.Run, error) { return s.Runs(ctx, bot.RunWaiting) },
		"ThreadRuns":  func() ([]*bot.Run, error) { return s.ThreadRuns(ctx, "k") },
		"WaitingRun":  func() ([]*bot.Run, error) { r, err := s.WaitingRun(ctx, "k"); return []*bot.Run{r}, err },
		"ByKey(w1)":   func() ([]*bot.Run, error) { r, err := s.WaitingRunByKey(ctx, "w1"); return []*bot.Run{r}, err },
		"Runs(ended)": func() ([]*bot.Run, error) { return s.Runs(ctx, bot.RunDone, bot.RunWaiting) },
	}
	for name, list := range listed {
		t.Run(name, func(t *testing.T) {
			runs, err := list()
			if err != nil || len(runs) != 1 || runs[0] == nil || runs[0].ID != "r1" {
				t.Fatalf("%s = %v, %v; want r1", name, runs, err)
			}
			if runs[0].Transcript != nil {
				t.Errorf("%s returned a transcript", name)
			}
		})
	}

	// A run taken from a list, saved again, keeps its transcript.
	ws, _ := s.Runs(ctx, bot.RunWaiting)
	ws[0].Status, ws[0].Waiting = bot.RunCancelled, nil
	if err := s.SaveRun(ctx, ws[0]); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Run(ctx, "r1"); got.Status != bot.RunCancelled || string(got.Transcript) != string(tr) {
		t.Errorf("after saving the listed run: %s %s, want cancelled with its transcript", got.Status, got.Transcript)
	}
	// A new transcript replaces the stored one.
	r.Transcript = json.RawMessage(`{"v":1,"steps":2}`)
	if err := s.Commit(ctx, bot.Change{Run: r}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Run(ctx, "r1"); string(got.Transcript) != `{"v":1,"steps":2}` {
		t.Errorf("after a commit: %s", got.Transcript)
	}
	if err := s.Check(); err != nil {
		t.Error(err)
	}
}

// Deleting a run, by prune or by /reset, deletes its transcript and its
// wait key.
func TestTranscriptDeletedWithItsRun(t *testing.T) {
	for _, tt := range []struct {
		name string
		del  func(t *testing.T, s *Store)
	}{
		{"Prune", func(t *testing.T, s *Store) {
			if n, err := s.Prune(t.Context(), t0.Add(time.Hour)); err != nil || n.Runs != 2 {
				t.Fatalf("pruned %+v, %v; want 2 runs", n, err)
			}
		}},
		{"DeleteConversation", func(t *testing.T, s *Store) {
			if err := s.DeleteConversation(t.Context(), "k"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := open(t)
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
				if got := transcriptOf(t, s, id); got != nil {
					t.Errorf("the transcript of %s outlived it: %s", id, got)
				}
			}
			if r, err := s.WaitingRunByKey(ctx, "w1"); r != nil || err != nil {
				t.Errorf("WaitingRunByKey(w1) = %+v, %v; want none", r, err)
			}
			if got, _ := s.Run(ctx, "busy"); string(got.Transcript) != `{"step":1}` {
				t.Errorf("the working run's transcript: %s", got.Transcript)
			}
			if err := s.Check(); err != nil {
				t.Error(err)
			}
		})
	}
}

// Check finds a transcript that is not JSON or whose run is gone.
func TestCheckTranscripts(t *testing.T) {
	for _, tt := range []struct {
		name, id, tr, want string
	}{
		{"orphan", "gone", `{}`, "outlived its run"},
		{"not JSON", "r1", `{"v":`, "not JSON"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := open(t)
			if err := s.SaveRun(t.Context(), &bot.Run{ID: "r1", ThreadKey: "k", Status: bot.RunDone, Transcript: json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
			if err := s.db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(bucketTranscripts).Put([]byte(tt.id), []byte(tt.tr))
			}); err != nil {
				t.Fatal(err)
			}
			if err := s.Check(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check() = %v, want %q", err, tt.want)
			}
		})
	}
}

// A button press finds its run by the button's key, in any
// conversation, and only while the run waits on that key.
func TestWaitingRunByKey(t *testing.T) {
	s, path := open(t)
	ctx := t.Context()
	save := func(r *bot.Run) {
		t.Helper()
		if err := s.SaveRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	want := func(key, id string) {
		t.Helper()
		r, err := s.WaitingRunByKey(ctx, key)
		got := ""
		if r != nil {
			got = r.ID
		}
		if err != nil || got != id {
			t.Errorf("WaitingRunByKey(%q) = %q (%v), want %q", key, got, err, id)
		}
	}
	waiting := func(id, thread, key string) *bot.Run {
		return &bot.Run{ID: id, ThreadKey: thread, Status: bot.RunWaiting, Created: t0, Transcript: json.RawMessage(`{}`),
			Waiting: &bot.Waiting{Kind: "ask", Key: key, UserID: "u"}}
	}
	a, b := waiting("a", "slack:T:C1::u", "ka"), waiting("b", "telegram:9:", "kb")
	save(a)
	save(b)
	want("ka", "a")
	want("kb", "b")
	want("", "")
	want("nope", "")

	// A new question: the old key no longer finds the run.
	a.Waiting = &bot.Waiting{Kind: "confirm", Key: "ka2"}
	save(a)
	want("ka", "")
	want("ka2", "a")
	// Answered: it no longer waits.
	a.Status, a.Waiting = bot.RunWorking, nil
	save(a)
	want("ka2", "")
	// A run whose Waiting is kept after it ended is not waiting.
	b.Status = bot.RunDone
	save(b)
	want("kb", "")

	// Two runs on one key (keys are short): the later save has it, and
	// the other giving it up leaves it.
	c, d := waiting("c", "k1", "same"), waiting("d", "k2", "same")
	save(c)
	save(d)
	want("same", "d")
	c.Status, c.Waiting = bot.RunCancelled, nil
	save(c)
	want("same", "d")

	// A file written before the index: it is built on open, from the
	// runs not ended.
	saveOld(t, s, waiting("old", "k3", "kold"))
	forgetIndex(t, s, keyWaitKeys, bucketWaitKeys, bucketRunWaitKey)
	want("kold", "")
	s = reopen(t, s, path)
	want("kold", "old")
	want("same", "d")
	want("kb", "")
	if err := s.Check(); err != nil {
		t.Error(err)
	}
}

// The index of wait keys holds only runs that wait, each once.
func TestWaitKeyIndexFollowsRuns(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	for i := range 20 {
		r := &bot.Run{ID: fmt.Sprint("r", i), ThreadKey: "k", Status: bot.RunWaiting, Waiting: &bot.Waiting{Key: fmt.Sprint("w", i)}}
		_ = s.SaveRun(ctx, r)
		if i%2 == 0 {
			r.Status, r.Waiting = bot.RunDone, nil
			_ = s.SaveRun(ctx, r)
		}
	}
	var byKey, byRun int
	_ = s.db.View(func(tx *bolt.Tx) error {
		byKey, byRun = tx.Bucket(bucketWaitKeys).Stats().KeyN, tx.Bucket(bucketRunWaitKey).Stats().KeyN
		return nil
	})
	if byKey != 10 || byRun != 10 {
		t.Errorf("index holds %d keys and %d runs, want the 10 that wait", byKey, byRun)
	}
}

// A file of schema version 1 holds transcripts inside their runs' records:
// opening it moves them out and marks the file version 2, which a tidybot
// of version 1 refuses rather than read its runs without transcripts.
func TestVersion1FileMigrates(t *testing.T) {
	s, path := open(t)
	ctx := t.Context()
	tr := json.RawMessage(`{"v":1,"pending":{"uuids":["u1"]}}`)
	saveOld(t, s, &bot.Run{ID: "old", ThreadKey: "k", Status: bot.RunWorking, Transcript: tr, Created: t0})
	saveOld(t, s, &bot.Run{ID: "bare", ThreadKey: "k", Status: bot.RunDone, Created: t0})
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketTranscripts); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchema, u64(1))
	}); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, path)
	if err := s.db.View(func(tx *bolt.Tx) error {
		if v := binary.BigEndian.Uint64(tx.Bucket(bucketMeta).Get(keySchema)); v != SchemaVersion || SchemaVersion != 3 {
			t.Errorf("schema version %d after open, want 3", v)
		}
		if rec := tx.Bucket(bucketRuns).Get([]byte("old")); bytes.Contains(rec, []byte("uuids")) {
			t.Errorf("the record still holds its transcript: %s", rec)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := transcriptOf(t, s, "old"); string(got) != string(tr) {
		t.Errorf("moved transcript = %s, want %s", got, tr)
	}
	r, err := s.Run(ctx, "old")
	if err != nil || string(r.Transcript) != string(tr) || r.Status != bot.RunWorking {
		t.Errorf("Run after the migration = %+v (%v)", r, err)
	}
	if r, err := s.Run(ctx, "bare"); err != nil || len(r.Transcript) != 0 {
		t.Errorf("a run without a transcript: %+v (%v)", r, err)
	}
	if err := s.Check(); err != nil {
		t.Error(err)
	}
}
