package storetest

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

// The reads a message's job begins with (bot.ReadStart): what they find,
// and, for a store that makes them at once (bot.StartReader), that it
// finds the same as the reads one by one.

// wantStart is what readStart should find, by the fields' meaning.
type wantStart struct {
	waiting  string // the waiting run's id, "" for none
	stored   bool
	thread   bool
	messages string // the texts, space-separated
	setting  string
	usage    string
	marked   bool // a cancel mark above 0
}

// readStart checks the reads of q in s against want, one by one and,
// when s is a bot.StartReader, at once (which must equal them).
func readStart(t *testing.T, s Store, q bot.StartQuery, want wantStart) {
	t.Helper()
	ctx := t.Context()
	one, err := bot.ReadStart(ctx, s, q)
	if err != nil {
		t.Fatalf("ReadStart(%+v): %v", q, err)
	}
	got := wantStart{stored: one.Stored, thread: one.Thread != nil, setting: one.Setting, usage: one.Usage, marked: one.CancelMark > 0}
	if one.Waiting != nil {
		got.waiting = one.Waiting.ID
	}
	for i, m := range one.Messages {
		if i > 0 {
			got.messages += " "
		}
		got.messages += m.Text
	}
	if got != want {
		t.Errorf("ReadStart(%+v) = %+v, want %+v", q, got, want)
	}
	sr, ok := s.(bot.StartReader)
	if !ok {
		return
	}
	all, err := sr.ReadStart(ctx, q)
	if err != nil {
		t.Fatalf("StartReader.ReadStart(%+v): %v", q, err)
	}
	if !reflect.DeepEqual(all, one) {
		t.Errorf("StartReader.ReadStart(%+v) =\n%s\nthe reads one by one:\n%s", q, dump(all), dump(one))
	}
}

// dump shows st with the records it points to.
func dump(st bot.StartReads) string {
	b, _ := json.Marshal(st)
	return string(b)
}

func testReadStart(t *testing.T, open Open) {
	s := fresh(t, open)
	ctx := t.Context()
	const key, person = "telegram:c:", "person:telegram:42"
	q := bot.StartQuery{Key: key, JobID: "j1", Setting: person, Messages: 3}
	readStart(t, s, q, wantStart{})

	// The thread, reset at t0, with five messages around it, and one
	// elsewhere.
	th := bot.Thread{Key: key, Platform: "telegram", ChatID: "c", ResetAt: t0}
	if err := s.SaveThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	readStart(t, s, q, wantStart{thread: true})
	for i := range 5 {
		m := bot.Message{ThreadKey: key, Role: bot.RoleUser, Text: string(rune('a' + i)), At: t0.Add(time.Duration(i-2) * time.Minute)}
		if err := s.Commit(ctx, bot.Change{Message: &m}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: "other", Text: "elsewhere", At: t0.Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	readStart(t, s, q, wantStart{thread: true, messages: "c d e"})
	q2 := q
	q2.Messages = 2
	readStart(t, s, q2, wantStart{thread: true, messages: "d e"})
	q2.Messages = 0
	readStart(t, s, q2, wantStart{thread: true})
	q2.Messages = 10
	readStart(t, s, q2, wantStart{thread: true, messages: "c d e"})

	// The person's settings, and runs: ended, waiting (the newest is
	// the one), the job's own, another conversation's.
	if err := s.SetSetting(ctx, person, `{"tz":"Europe/Amsterdam"}`); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSetting(ctx, "person:telegram:43", `{"tz":"UTC"}`); err != nil {
		t.Fatal(err)
	}
	settings := wantStart{thread: true, messages: "c d e", setting: `{"tz":"Europe/Amsterdam"}`}
	readStart(t, s, q, settings)
	// The person's token count of the day, when asked for: none yet,
	// then counted (Change.Count, as a run's end counts it).
	counted := q
	counted.Usage = "usage:telegram:42:2026-11-22"
	readStart(t, s, counted, settings)
	for _, n := range []int{10, 5} {
		if err := s.Commit(ctx, bot.Change{Count: map[string]int{counted.Usage: n, "usage:telegram:43:2026-11-22": 7}}); err != nil {
			t.Fatal(err)
		}
	}
	withUsage := settings
	withUsage.usage = "15"
	readStart(t, s, counted, withUsage)
	save := func(id, key string, st bot.RunStatus, at time.Time) *bot.Run {
		t.Helper()
		r := &bot.Run{ID: id, ThreadKey: key, Status: st, UserID: "42", Instruction: "do " + id, Created: at, Updated: at}
		if st == bot.RunWaiting {
			r.Waiting = &bot.Waiting{Kind: "ask", Question: "which?", Key: id, UserID: "42"}
		}
		if err := s.SaveRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	save("done", key, bot.RunDone, t0)
	save("old", key, bot.RunWaiting, t0.Add(time.Minute))
	save("new", key, bot.RunWaiting, t0.Add(2*time.Minute))
	save("elsewhere", "other", bot.RunWaiting, t0.Add(3*time.Minute))
	waiting := settings
	waiting.waiting = "new"
	readStart(t, s, q, waiting)
	save("j1", key, bot.RunWorking, t0.Add(4*time.Minute))
	waiting.stored = true
	readStart(t, s, q, waiting)

	// A /reset hides what came before it.
	th.ResetAt = t0.Add(2 * time.Minute)
	if err := s.SaveThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	waiting.messages = "e"
	readStart(t, s, q, waiting)

	// The cancels, with a Shared store: one stored while the job
	// waited is the job's own (its run is the one it stops), one stored
	// for a run working there is not.
	sh, ok := s.(bot.Shared)
	if !ok {
		return
	}
	q3 := bot.StartQuery{Key: "telegram:d:", JobID: "j2", Setting: person, Messages: 3}
	job := bot.Job{ID: "j2", ThreadKey: q3.Key, Incoming: bot.Incoming{Platform: "telegram", ChatID: "d", UserID: "42", Text: "hi"}, Enqueued: t0}
	if err := s.Commit(ctx, bot.Change{Job: &job}); err != nil {
		t.Fatal(err)
	}
	if _, err := sh.Cancel(ctx, q3.Key); err != nil {
		t.Fatal(err)
	}
	jobs := wantStart{setting: settings.setting}
	readStart(t, s, q3, jobs)
	other := q3
	other.JobID = "j3"
	readStart(t, s, other, wantStart{setting: settings.setting, marked: true})
	save("w", q3.Key, bot.RunWorking, t0)
	if _, err := sh.Cancel(ctx, q3.Key); err != nil {
		t.Fatal(err)
	}
	jobs.marked = true
	readStart(t, s, q3, jobs)
}
