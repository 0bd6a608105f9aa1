package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// populate writes one of every kind the bbolt store keeps into s: a
// thread with its messages, a job and dedupe key; a waiting run with its
// transcript; a done run with its journal and an answer in the outbox;
// settings (a team-mode account's sealed token, a pending request, a
// person's settings); a Todoist snapshot; a digest and an autopilot
// timer, the latter claimed.
func populate(t *testing.T, s appStore) {
	t.Helper()
	ctx := t.Context()
	at := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	th := bot.Thread{Key: "slack:D1:", Platform: "slack", ChatID: "D1"}
	in := bot.Incoming{Platform: "slack", ChatID: "D1", UserID: "U1", Text: "file the cake task", EventID: "Ev1", DM: true}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Commit(ctx, bot.Change{EventKey: "slack:Ev1", EventAt: at, Thread: &th,
		Message: &bot.Message{ThreadKey: th.Key, Role: "user", Text: "file the cake task", At: at},
		Job:     &bot.Job{ID: "job-1", ThreadKey: th.Key, Incoming: in, Enqueued: at}}))
	waiting := &bot.Run{ID: "run-wait", ThreadKey: th.Key, Platform: "slack", ChatID: "D1", UserID: "U1", Status: bot.RunWaiting,
		Instruction: "delete the cake task", Transcript: json.RawMessage(`{"steps":[{"thought":"ask first"}]}`),
		Waiting: &bot.Waiting{Kind: "confirm", Question: "Delete “Buy cake”?", Key: "w:abcd1234", UserID: "U1"}, Created: at, Updated: at}
	must(s.SaveRun(ctx, waiting))
	done := &bot.Run{ID: "run-done", ThreadKey: th.Key, Platform: "slack", ChatID: "D1", UserID: "U1", Status: bot.RunDone,
		Instruction: "file the cake task", Transcript: json.RawMessage(`{"steps":[{"thought":"move it"}]}`), Answer: "Moved “Buy cake” to Birthday.",
		Created: at.Add(time.Minute), Updated: at.Add(2 * time.Minute)}
	must(s.Commit(ctx, bot.Change{Run: done,
		Message: &bot.Message{ThreadKey: th.Key, Role: "assistant", Text: done.Answer, RunID: done.ID, At: at.Add(2 * time.Minute)},
		Send:    []bot.Outbound{{ID: "out-1", Platform: "slack", Msg: bot.Outgoing{ChatID: "D1", Text: done.Answer}, Created: at.Add(2 * time.Minute)}},
		Audit:   []bot.AuditEntry{{RunID: done.ID, ThreadKey: th.Key, Summary: "moved “Buy cake” to Birthday", At: at.Add(2 * time.Minute)}}}))
	must(s.SetSetting(ctx, "todoist_token:slack:U1", "sealed-token-record"))
	must(s.SetSetting(ctx, bot.PendingPrefix+"connect:slack:U2", `{"state":"x"}`))
	must(s.SetSetting(ctx, "person:slack:U1", `{"timezone":"Europe/Berlin"}`))
	must(s.SaveSnapshot(ctx, "acct-1", []byte(`{"projects":[{"id":"p1","name":"Birthday"}]}`)))
	ts := s.(bot.TimerStore)
	must(ts.SetTimer(ctx, bot.Timer{Kind: bot.TimerDigest, Key: "slack:U1", Due: at.Add(23 * time.Hour)}))
	must(ts.SetTimer(ctx, bot.Timer{Kind: bot.TimerAutopilot, Key: "slack:U1", Due: at}))
	// The autopilot timer is claimed by the process that stopped: the
	// copy is not.
	claimed, err := ts.ClaimTimers(ctx, at, []string{bot.TimerAutopilot}, "old-process", time.Hour, 10)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("ClaimTimers = %v, %v", claimed, err)
	}
}

// contents reads back, through bot.Store, what populate wrote.
func contents(t *testing.T, s appStore) string {
	t.Helper()
	ctx := t.Context()
	var b strings.Builder
	th, err := s.Thread(ctx, "slack:D1:")
	fmt.Fprintf(&b, "thread %+v %v\n", th, err)
	msgs, err := s.RecentMessages(ctx, "slack:D1:", time.Time{}, 10)
	for _, m := range msgs {
		fmt.Fprintf(&b, "message %s %q %s %v\n", m.Role, m.Text, m.RunID, m.At.UTC())
	}
	fmt.Fprintf(&b, "messages err %v\n", err)
	for _, id := range []string{"run-wait", "run-done"} {
		r, err := s.Run(ctx, id)
		if err != nil {
			fmt.Fprintf(&b, "run %s: %v\n", id, err)
			continue
		}
		fmt.Fprintf(&b, "run %s %s %q %s %+v %q\n", r.ID, r.Status, r.Instruction, r.Transcript, r.Waiting, r.Answer)
		audit, err := s.RunAudit(ctx, id)
		for _, a := range audit {
			fmt.Fprintf(&b, "audit %s %q\n", a.RunID, a.Summary)
		}
		fmt.Fprintf(&b, "audit err %v\n", err)
	}
	w, err := s.WaitingRunByKey(ctx, "w:abcd1234")
	if w != nil {
		fmt.Fprintf(&b, "waiting by key %s %v\n", w.ID, err)
	}
	jobs, err := s.Jobs(ctx)
	for _, j := range jobs {
		fmt.Fprintf(&b, "job %s %s %q\n", j.ID, j.ThreadKey, j.Incoming.Text)
	}
	fmt.Fprintf(&b, "jobs err %v\n", err)
	out, err := s.Outbox(ctx)
	for _, o := range out {
		fmt.Fprintf(&b, "outbox %s %q\n", o.ID, o.Msg.Text)
	}
	fmt.Fprintf(&b, "outbox err %v\n", err)
	for _, k := range []string{"todoist_token:slack:U1", bot.PendingPrefix + "connect:slack:U2", "person:slack:U1"} {
		v, err := s.Setting(ctx, k)
		fmt.Fprintf(&b, "setting %s %q %v\n", k, v, err)
	}
	snap, err := s.LoadSnapshot(ctx, "acct-1")
	fmt.Fprintf(&b, "snapshot %s %v\n", snap, err)
	ts := s.(bot.TimerStore)
	for _, kind := range []string{bot.TimerDigest, bot.TimerAutopilot} {
		tm, err := ts.Timer(ctx, kind, "slack:U1")
		fmt.Fprintf(&b, "timer %s %s %v %v\n", tm.Kind, tm.Key, tm.Due.UTC(), err)
	}
	return b.String()
}

// TestMigrateFromCopiesEveryKindAndResumes: `tidybot migrate --from`
// copies a bbolt database holding one of everything into PostgreSQL,
// where the store reads back the same; a copy that fails part way
// writes nothing and runs again from the start; a finished copy is not
// repeated.
func TestMigrateFromCopiesEveryKindAndResumes(t *testing.T) {
	e := newEnv(t)
	e.cfg.DatabaseURL = ""
	e.cfg.SecretKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	src, err := openBolt(e.cfg, e.cfg.DB)
	if err != nil {
		t.Fatal(err)
	}
	populate(t, src)
	want := contents(t, src)
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	e.cfg.DatabaseURL = pgtest.URL(t)
	migrate := func(args ...string) (string, error) {
		var out bytes.Buffer
		m := &Main{Args: append([]string{"migrate"}, args...), Stdout: &out, Stderr: &bytes.Buffer{}, Config: &e.cfg}
		err := m.Run(t.Context())
		_ = m.Close()
		return out.String(), err
	}
	if _, err := migrate(); err != nil {
		t.Fatal(err)
	}
	// The copy fails at its last kinds (settings come after the outbox):
	// nothing of it may stay.
	conn, err := pgx.Connect(t.Context(), e.cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, q := range []string{
		`CREATE FUNCTION tidybot_test_fail() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'the disk is full'; END $$ LANGUAGE plpgsql`,
		`CREATE TRIGGER tidybot_test_fail BEFORE INSERT ON snapshots FOR EACH ROW EXECUTE FUNCTION tidybot_test_fail()`,
	} {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := migrate("--from", e.cfg.DB); err == nil || !strings.Contains(err.Error(), "the disk is full") {
		t.Fatalf("migrate --from with a failing database: %v", err)
	}
	for _, table := range []string{"threads", "messages", "runs", "jobs", "outbox", "audit", "settings", "events", "timers"} {
		var n int
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&n); err != nil || n != 0 {
			t.Errorf("%d rows in %s after a failed copy (%v), want 0", n, table, err)
		}
	}
	if _, err := conn.Exec(t.Context(), `DROP TRIGGER tidybot_test_fail ON snapshots`); err != nil {
		t.Fatal(err)
	}
	out, err := migrate("--from", e.cfg.DB)
	if err != nil {
		t.Fatalf("migrate --from again: %v", err)
	}
	mustContain(t, out, "audit 1", "events 1", "jobs 1", "messages 2", "outbox 1", "runs 2", "settings 3", "snapshots 1", "threads 1", "timers 2")
	if out, err := migrate("--from", e.cfg.DB); err != nil || !strings.Contains(out, "was copied before: nothing to do") {
		t.Errorf("a third migrate --from: %v\n%s", err, out)
	}
	dst, err := openPostgres(t.Context(), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if got := contents(t, dst); got != want {
		t.Errorf("PostgreSQL holds\n%s\nwant what bbolt held\n%s", got, want)
	}
	if fresh, err := dst.MarkEvent(t.Context(), "slack:Ev1", time.Now()); err != nil || fresh {
		t.Errorf("the dedupe key did not come along: fresh %v, %v", fresh, err)
	}
	// The claim of the process that stopped did not come along: the
	// autopilot timer is due in the copy.
	due, err := dst.ClaimTimers(t.Context(), time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC), []string{bot.TimerAutopilot, bot.TimerDigest}, "new-process", time.Minute, 10)
	if err != nil || len(due) != 1 || due[0].Kind != bot.TimerAutopilot {
		t.Errorf("the copy's due timers = %+v, %v; want the autopilot timer, unclaimed", due, err)
	}
}
