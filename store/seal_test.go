package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

// clock is a settable clock for data keys.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func openAt(t *testing.T, path string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// leftovers reads the file as someone who copied it would: it reports
// whether marker is there in plain text, and opens with the keys the
// file still holds every sealed value found anywhere in it, free pages
// included, counting those that hold marker, and those that no key
// opens any more.
func leftovers(t *testing.T, s *Store, path, marker string) (plain bool, opened, shredded int) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	plain = bytes.Contains(raw, []byte(marker))
	err = s.db.View(func(tx *bolt.Tx) error {
		for i := bytes.Index(raw, sealedMagic); i >= 0; {
			rest := raw[i:]
			if id := sealedKeyID(rest); id != nil {
				a, err := s.keys.aead(tx, id)
				switch {
				case errors.Is(err, errKeyGone):
					shredded++
				case err != nil:
					return err
				default:
					// The value's length is not known here: try each.
					head := len(sealedMagic) + keyIDLen
					for end := head + a.NonceSize() + a.Overhead(); end <= len(rest) && end <= head+16<<10; end++ {
						pt, err := a.Open(nil, rest[head:head+a.NonceSize()], rest[head+a.NonceSize():end], rest[:head])
						if err == nil {
							if bytes.Contains(pt, []byte(marker)) {
								opened++
							}
							break
						}
					}
				}
			}
			j := bytes.Index(raw[i+1:], sealedMagic)
			if j < 0 {
				break
			}
			i += 1 + j
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return plain, opened, shredded
}

// seedMarked stores a conversation whose every value holds marker: a
// message, a job, an ended run with a transcript and a journal entry.
func seedMarked(t *testing.T, s *Store, key, marker string, at time.Time) {
	t.Helper()
	ctx := t.Context()
	for _, c := range []bot.Change{
		{Thread: &bot.Thread{Key: key}, Message: &bot.Message{ThreadKey: key, Role: bot.RoleUser, Text: "file " + marker, At: at},
			Job: &bot.Job{ID: key + "/job", ThreadKey: key, Incoming: bot.Incoming{Text: "file " + marker}, Enqueued: at}},
		{Run: &bot.Run{ID: key + "/run", ThreadKey: key, Status: bot.RunDone, Instruction: "file " + marker, Answer: "filed " + marker,
			Transcript: json.RawMessage(`{"steps":["` + marker + `"]}`), Created: at, Updated: at}, DeleteJob: key + "/job",
			Audit: []bot.AuditEntry{{RunID: key + "/run", ThreadKey: key, Summary: "moved " + marker, Write: agent.Write{}, At: at}}},
		{Message: &bot.Message{ThreadKey: key, Role: bot.RoleAssistant, Text: "filed " + marker, At: at}},
	} {
		if err := s.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
}

// After /reset (DeleteConversation), what the conversation held cannot
// be read from the file: not in plain text, and no sealed copy left on
// a free page opens with a key the file still holds. What it keeps (a
// run still working, a job still queued) stays readable.
func TestDeletedConversationIsUnreadableInTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tidybot.db")
	s := openAt(t, path)
	ctx := t.Context()
	const gone, kept = "GONE-7f3a9c", "KEPT-51be02"
	seedMarked(t, s, "telegram:1:", gone, t0)
	seedMarked(t, s, "telegram:2:", kept, t0) // another conversation
	for i := range 40 {
		// A longer history, so that not every page it freed is reused
		// by the time the file is read.
		if err := s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: "telegram:1:", Role: bot.RoleUser, Text: fmt.Sprint(i, " ", gone, strings.Repeat(".", 200)), At: t0}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit(ctx, bot.Change{
		Run: &bot.Run{ID: "working", ThreadKey: "telegram:1:", Status: bot.RunWorking, Instruction: "busy " + kept, Transcript: json.RawMessage(`["` + kept + `"]`), Created: t0, Updated: t0},
		Job: &bot.Job{ID: "queued", ThreadKey: "telegram:1:", Incoming: bot.Incoming{Text: "next " + kept}, Enqueued: t0},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteConversation(ctx, "telegram:1:"); err != nil {
		t.Fatal(err)
	}
	plain, opened, shredded := leftovers(t, s, path, gone)
	if plain || opened > 0 {
		t.Errorf("after DeleteConversation the file still shows %q: in plain text %v, in %d sealed values that open", gone, plain, opened)
	}
	if shredded == 0 {
		t.Error("no sealed value whose key was destroyed was found: the test looks at nothing")
	}
	r, err := s.Run(ctx, "working")
	if err != nil || !strings.Contains(r.Instruction, kept) || !strings.Contains(string(r.Transcript), kept) {
		t.Errorf("the working run after the reset: %+v, %v", r, err)
	}
	jobs, err := s.Jobs(ctx)
	if err != nil || len(jobs) != 1 || jobs[0].ID != "queued" || !strings.Contains(jobs[0].Incoming.Text, kept) {
		t.Errorf("jobs after the reset: %+v, %v", jobs, err)
	}
	if msgs, _ := s.RecentMessages(ctx, "telegram:2:", time.Time{}, 10); len(msgs) != 2 {
		t.Errorf("the other conversation lost messages: %+v", msgs)
	}
	if err := s.Check(); err != nil {
		t.Error(err)
	}
	// And after a restart.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	if r, err := s.Run(ctx, "working"); err != nil || !strings.Contains(r.Instruction, kept) {
		t.Errorf("the working run after a restart: %+v, %v", r, err)
	}
	if plain, opened, _ := leftovers(t, s, path, gone); plain || opened > 0 {
		t.Errorf("after a restart the file shows %q: plain %v, %d opened", gone, plain, opened)
	}
}

// Retention deletes, and destroys the data keys of the periods it
// passed: the deleted text does not open from free pages either. What
// an old key still sealed and is kept (a working run, a queued job, an
// undelivered answer) is sealed again first.
func TestPrunedDataIsUnreadableInTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tidybot.db")
	c := &clock{t: t0}
	s := openAt(t, path, withClock(c.now))
	ctx := t.Context()
	const gone, kept = "GONE-0c1d2e", "KEPT-9a8b7c"
	seedMarked(t, s, "telegram:old:", gone, t0)
	if err := s.Commit(ctx, bot.Change{
		Run:  &bot.Run{ID: "working", ThreadKey: "telegram:old:", Status: bot.RunWorking, Instruction: kept, Transcript: json.RawMessage(`["` + kept + `"]`), Created: t0, Updated: t0},
		Job:  &bot.Job{ID: "queued", ThreadKey: "telegram:old:", Incoming: bot.Incoming{Text: kept}, Enqueued: t0},
		Send: []bot.Outbound{{ID: "out", Msg: bot.Outgoing{Text: kept}, Created: t0}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSetting(ctx, "pending:telegram:9", `{"text":"`+gone+`","at":"2026-11-22T09:00:00Z"}`); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveSnapshot(ctx, "acct", []byte(`{"items":["`+gone+`"]}`)); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(40 * 24 * time.Hour)
	c.set(later)
	seedMarked(t, s, "telegram:new:", kept, later)
	n, err := s.Prune(ctx, later.Add(-30*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n != (bot.Pruned{Messages: 2, Runs: 1, Audit: 1}) {
		t.Errorf("pruned %+v", n)
	}
	plain, opened, shredded := leftovers(t, s, path, gone)
	if plain || opened > 0 {
		t.Errorf("after Prune the file still shows %q: in plain text %v, in %d sealed values that open", gone, plain, opened)
	}
	if shredded == 0 {
		t.Error("no sealed value whose key was destroyed was found: the test looks at nothing")
	}
	if r, err := s.Run(ctx, "working"); err != nil || r.Instruction != kept || !strings.Contains(string(r.Transcript), kept) {
		t.Errorf("the working run after the prune: %+v, %v", r, err)
	}
	if jobs, err := s.Jobs(ctx); err != nil || len(jobs) != 1 || jobs[0].Incoming.Text != kept {
		t.Errorf("jobs after the prune: %+v, %v", jobs, err)
	}
	if out, err := s.Outbox(ctx); err != nil || len(out) != 1 || out[0].Msg.Text != kept {
		t.Errorf("outbox after the prune: %+v, %v", out, err)
	}
	if _, err := s.Setting(ctx, "pending:telegram:9"); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("an old pending request outlived retention: %v", err)
	}
	if snap, err := s.LoadSnapshot(ctx, "acct"); err != nil || snap != nil {
		t.Errorf("a snapshot unused for longer than retention is kept: %s, %v", snap, err)
	}
	if msgs, _ := s.RecentMessages(ctx, "telegram:new:", time.Time{}, 10); len(msgs) != 2 {
		t.Errorf("recent messages pruned: %+v", msgs)
	}
	if err := s.Check(); err != nil {
		t.Error(err)
	}
}

// Nothing a person wrote is stored in plain text.
func TestValuesAreSealed(t *testing.T) {
	s, path := open(t)
	ctx := t.Context()
	const m = "MARK-3e4f5a"
	seedMarked(t, s, "slack:C1:", m, t0)
	if err := s.Commit(ctx, bot.Change{Send: []bot.Outbound{{ID: "o", Msg: bot.Outgoing{Text: m}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSetting(ctx, "pending:slack:U1", m); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveSnapshot(ctx, "acct", []byte(`{"items":["`+m+`"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.Index(raw, []byte(m)); i >= 0 {
		t.Errorf("the file holds %q in plain text: …%q…", m, raw[max(0, i-80):i+len(m)])
	}
	s = openAt(t, path)
	if v, err := s.Setting(ctx, "pending:slack:U1"); err != nil || v != m {
		t.Errorf("pending = %q, %v", v, err)
	}
	if snap, err := s.LoadSnapshot(ctx, "acct"); err != nil || !bytes.Contains(snap, []byte(m)) {
		t.Errorf("snapshot = %s, %v", snap, err)
	}
	if err := s.Check(); err != nil {
		t.Error(err)
	}
}

// TIDYBOT_SECRET_KEY seals the data keys: the file opens with it (and
// with the old key listed after a new one), not with another key. A
// key generated before the secret was set is replaced by it.
func TestSecretKeySealsTheDataKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tidybot.db")
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	ctx := t.Context()
	s := openAt(t, path) // no secret: a generated master key
	seedMarked(t, s, "telegram:1:", "first", t0)
	_ = s.Close()

	s = openAt(t, path, WithSecretKeys([][]byte{k1}))
	if err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta).Get(keyMaster) != nil {
			t.Error("the generated master key is kept once TIDYBOT_SECRET_KEY seals every data key")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if msgs, err := s.RecentMessages(ctx, "telegram:1:", time.Time{}, 10); err != nil || len(msgs) != 2 {
		t.Fatalf("messages with the secret key: %+v, %v", msgs, err)
	}
	seedMarked(t, s, "telegram:2:", "second", t0)
	_ = s.Close()

	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "TIDYBOT_SECRET_KEY") {
		t.Errorf("Open without the secret key: %v, want an error naming TIDYBOT_SECRET_KEY", err)
	}
	if _, err := Open(path, WithSecretKeys([][]byte{k2})); err == nil {
		t.Error("Open with another secret key succeeded")
	}
	s = openAt(t, path, WithSecretKeys([][]byte{k2, k1})) // a rotation
	_ = s.Close()
	s = openAt(t, path, WithSecretKeys([][]byte{k2})) // the old key is no longer needed
	for _, k := range []string{"telegram:1:", "telegram:2:"} {
		if msgs, err := s.RecentMessages(ctx, k, time.Time{}, 10); err != nil || len(msgs) != 2 {
			t.Errorf("messages of %s after the rotation: %+v, %v", k, msgs, err)
		}
	}
	_ = s.Close()
	ro, err := Open(path, ReadOnly(), WithSecretKeys([][]byte{k2}))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if r, err := ro.Run(ctx, "telegram:1:/run"); err != nil || !strings.Contains(r.Instruction, "first") {
		t.Errorf("a read-only open reads sealed runs: %+v, %v", r, err)
	}
}

// A file of schema version 2 holds every value in plain text: opening it
// seals them (version 3), and they read as before.
func TestVersion2FileIsSealed(t *testing.T) {
	s, path := open(t)
	ctx := t.Context()
	const m = "OLD-77aa11"
	if err := s.db.Update(func(tx *bolt.Tx) error {
		mb, err := tx.Bucket(bucketMessages).CreateBucketIfNotExists([]byte("k"))
		if err != nil {
			return err
		}
		for _, w := range []struct {
			b   *bolt.Bucket
			key string
			v   any
		}{
			{mb, "\x00\x00\x00\x00\x00\x00\x00\x01", bot.Message{ThreadKey: "k", Text: m, At: t0}},
			{tx.Bucket(bucketRuns), "r", bot.Run{ID: "r", ThreadKey: "k", Status: bot.RunDone, Instruction: m, Created: t0, Updated: t0}},
			{tx.Bucket(bucketJobs), "\x00\x00\x00\x00\x00\x00\x00\x01", bot.Job{ID: "j", ThreadKey: "k", Incoming: bot.Incoming{Text: m}}},
			{tx.Bucket(bucketOutbox), "\x00\x00\x00\x00\x00\x00\x00\x01", bot.Outbound{ID: "o", Msg: bot.Outgoing{Text: m}}},
			{tx.Bucket(bucketSettings), "pending:telegram:1", `{"text":"` + m + `"}`},
		} {
			if err := put(w.b, []byte(w.key), w.v); err != nil {
				return err
			}
		}
		if err := indexRun(tx, runKeys{id: "r", threadKey: "k", status: bot.RunDone}); err != nil {
			return err
		}
		if err := tx.Bucket(bucketTranscripts).Put([]byte("r"), []byte(`["`+m+`"]`)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketSnapshots).Put([]byte("acct"), []byte(`{"items":["`+m+`"]}`)); err != nil {
			return err
		}
		for _, b := range [][]byte{bucketDataKeys, bucketScopeKeys, bucketCurrentKeys, bucketSnapshotUsed} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketMeta).Delete(keyMaster); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchema, u64(2))
	}); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, path)
	// The plain text the sealed values replaced is not left on free
	// pages either: the file was copied without them.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(m)) {
		t.Errorf("after the upgrade the file still holds %q in plain text", m)
	}
	if _, err := os.Stat(path + ".compact"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the copy is left beside the file: %v", err)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta).Get(keyCompact) != nil {
			t.Error("the file is still marked to copy")
		}
		n := 0
		allValues(tx, func(l loc, v []byte) {
			n++
			if sealedKeyID(v) == nil {
				t.Errorf("%s/%s/%q is not sealed", l.top, l.nested, l.key)
			}
		})
		if n != 7 {
			t.Errorf("%d values, want 7", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if msgs, err := s.RecentMessages(ctx, "k", time.Time{}, 10); err != nil || len(msgs) != 1 || msgs[0].Text != m {
		t.Errorf("messages: %+v, %v", msgs, err)
	}
	if r, err := s.Run(ctx, "r"); err != nil || r.Instruction != m || string(r.Transcript) != `["`+m+`"]` {
		t.Errorf("run: %+v, %v", r, err)
	}
	if v, err := s.Setting(ctx, "pending:telegram:1"); err != nil || !strings.Contains(v, m) {
		t.Errorf("pending: %q, %v", v, err)
	}
	if snap, err := s.LoadSnapshot(ctx, "acct"); err != nil || !bytes.Contains(snap, []byte(m)) {
		t.Errorf("snapshot: %s, %v", snap, err)
	}
	if err := s.Check(); err != nil {
		t.Error(err)
	}
	// The conversation is deleted as any other.
	if err := s.DeleteConversation(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Error(err)
	}
}

// A new pending request replaces the old one, whose key is destroyed;
// "" deletes it.
func TestPendingRequestKeys(t *testing.T) {
	s, path := open(t)
	ctx := t.Context()
	const first = "FIRST-aa01"
	if err := s.SetSetting(ctx, "pending:telegram:5", first); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSetting(ctx, "pending:telegram:5", "second"); err != nil {
		t.Fatal(err)
	}
	if _, opened, shredded := leftovers(t, s, path, first); opened > 0 || shredded == 0 {
		t.Errorf("the replaced request: %d copies open, %d shredded", opened, shredded)
	}
	if err := s.SetSetting(ctx, "pending:telegram:5", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Setting(ctx, "pending:telegram:5"); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("a cleared request: %v", err)
	}
	if _, opened, _ := leftovers(t, s, path, "second"); opened > 0 {
		t.Errorf("the cleared request still opens")
	}
}

// DeleteSnapshot (/disconnect) destroys the keys of the account's
// snapshot: no copy left on a free page opens (storetest's
// DeleteSnapshot tests what LoadSnapshot returns).
func TestDeleteSnapshot(t *testing.T) {
	s, path := open(t)
	ctx := t.Context()
	const m = "TASK-5d6e7f"
	for i := range 3 {
		if err := s.SaveSnapshot(ctx, "acct", []byte(`{"items":["`+m+`"],"n":`+string(rune('0'+i))+`}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteSnapshot(ctx, "acct"); err != nil {
		t.Fatal(err)
	}
	if plain, opened, shredded := leftovers(t, s, path, m); plain || opened > 0 || shredded == 0 {
		t.Errorf("the deleted snapshot: plain %v, %d copies open, %d shredded", plain, opened, shredded)
	}
}

// BenchmarkSeal is what sealing adds to one value (a 1 KiB run record):
// sealing it in a write transaction and opening it in a read.
func BenchmarkSeal(b *testing.B) {
	s, _ := open(b)
	plain := bytes.Repeat([]byte("x"), 1024)
	var sealed []byte
	if err := s.db.Update(func(tx *bolt.Tx) error {
		var err error
		sealed, err = s.keys.seal(tx, "telegram:1:", plain)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		fn   func(tx *bolt.Tx) error
	}{
		{"seal", func(tx *bolt.Tx) error { _, err := s.keys.seal(tx, "telegram:1:", plain); return err }},
		{"open", func(tx *bolt.Tx) error { _, err := s.keys.open(tx, sealed); return err }},
	} {
		b.Run(tt.name, func(b *testing.B) {
			tx, err := s.db.Begin(true)
			if err != nil {
				b.Fatal(err)
			}
			defer tx.Rollback()
			b.ReportAllocs()
			for b.Loop() {
				if err := tt.fn(tx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
