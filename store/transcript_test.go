package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/storetest"
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
// given (storetest's TranscriptOnlyFromRun tests what Run returns).
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
	// Deleting the run deletes its transcript.
	if err := s.DeleteConversation(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if got := transcriptOf(t, s, "r1"); got != nil {
		t.Errorf("the transcript outlived its run: %s", got)
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

// A file written before the index of wait keys gets it at Open, from
// the runs not ended (storetest's WaitingRunByKey tests the lookups).
func TestWaitKeyIndexBuiltOnOpen(t *testing.T) {
	s, path := open(t)
	ctx := t.Context()
	want := func(key, id string) { t.Helper(); storetest.WantWaitingByKey(t, s, key, id) }
	waiting := func(id, thread, key string) *bot.Run {
		return &bot.Run{ID: id, ThreadKey: thread, Status: bot.RunWaiting, Created: t0, Transcript: json.RawMessage(`{}`),
			Waiting: &bot.Waiting{Kind: "ask", Key: key, UserID: "u"}}
	}
	// Ended with its Waiting kept: not waiting.
	b := waiting("b", "telegram:9:", "kb")
	b.Status = bot.RunDone
	for _, r := range []*bot.Run{b, waiting("c", "k1", "same"), waiting("d", "k2", "same")} {
		if err := s.SaveRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
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
