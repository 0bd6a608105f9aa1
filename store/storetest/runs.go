package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

// The tests of runs: their lists, transcripts, and the runs that wait
// for a person.

// ids lists the runs' ids, comma-separated.
func ids(rs []*bot.Run) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return strings.Join(out, ",")
}

func testRuns(t *testing.T, open Open) {
	s := fresh(t, open)
	ctx := t.Context()
	tr, _ := json.Marshal(map[string]any{"v": 1, "status": "asking"})
	runs := []*bot.Run{
		{ID: "b", ThreadKey: "k1", Status: bot.RunDone, Created: t0.Add(time.Minute), Usage: agent.Usage{PromptTokens: 10, Calls: 1}},
		{ID: "a", ThreadKey: "k1", Status: bot.RunWaiting, Created: t0, Transcript: tr, Waiting: &bot.Waiting{Kind: "ask", Options: []string{"x"}, Key: "k"}},
		{ID: "c", ThreadKey: "k2", Status: bot.RunWorking, Created: t0.Add(2 * time.Minute)},
	}
	for _, r := range runs {
		if err := s.SaveRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Run(ctx, "a")
	if err != nil || got.Waiting.Options[0] != "x" || string(got.Transcript) != string(tr) {
		t.Fatalf("run a = %+v, %v", got, err)
	}
	if _, err := s.Run(ctx, "zz"); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("missing run: %v", err)
	}
	all, _ := s.Runs(ctx)
	live, _ := s.Runs(ctx, bot.RunWorking, bot.RunWaiting)
	k1, _ := s.ThreadRuns(ctx, "k1")
	if ids(all) != "a,b,c" || ids(live) != "a,c" || ids(k1) != "a,b" {
		t.Errorf("all %s, live %s, k1 %s", ids(all), ids(live), ids(k1))
	}
}

// A run that ends leaves the lists of runs not ended.
func testRunsNotEndedFollowTheirStatus(t *testing.T, open Open) {
	s := fresh(t, open)
	ctx := t.Context()
	r := &bot.Run{ID: "r1", ThreadKey: "k", Status: bot.RunWorking, Created: t0}
	_ = s.SaveRun(ctx, r)
	if got, _ := s.Runs(ctx, bot.RunWorking, bot.RunWaiting); len(got) != 1 {
		t.Fatalf("open runs = %d, want 1", len(got))
	}
	r.Status = bot.RunDone
	_ = s.SaveRun(ctx, r)
	if got, _ := s.Runs(ctx, bot.RunWorking, bot.RunWaiting); len(got) != 0 {
		t.Errorf("an ended run is still listed as open")
	}
	if got, _ := s.Runs(ctx, bot.RunDone); ids(got) != "r1" {
		t.Errorf("done runs = %s, want r1", ids(got))
	}
}

// The run and the deletion of the job that fed it are one change.
func testCommitRetiresTheAnswerWithTheRun(t *testing.T, open Open) {
	s := fresh(t, open)
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
		t.Errorf("working runs: %d, want the committed run listed", len(open))
	}
}

// Run returns a run's transcript byte for byte as given; the lists do
// not, and a run taken from one and saved again keeps it.
func testTranscriptOnlyFromRun(t *testing.T, open Open) {
	s := fresh(t, open)
	ctx := t.Context()
	// Not compact, and with HTML characters json.Marshal would escape.
	tr := json.RawMessage(`{"v":1, "messages":["<a> & b"]}`)
	r := &bot.Run{ID: "r1", ThreadKey: "k", Status: bot.RunWaiting, Transcript: tr, Created: t0,
		Waiting: &bot.Waiting{Kind: "ask", Key: "w1"}}
	if err := s.SaveRun(ctx, r); err != nil {
		t.Fatal(err)
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
	check(t, s)
}

// WaitingRun finds the thread's newest waiting run, following every
// status change and deletion.
func testWaitingRun(t *testing.T, open Open) {
	s := fresh(t, open)
	ctx := t.Context()
	save := func(id, key string, st bot.RunStatus, at time.Time) *bot.Run {
		t.Helper()
		r := &bot.Run{ID: id, ThreadKey: key, Status: st, Created: at, Updated: at}
		if st == bot.RunWaiting {
			r.Waiting = &bot.Waiting{Kind: "ask", Question: "which?"}
		}
		if err := s.SaveRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	want := func(key, id string) { t.Helper(); WantWaiting(t, s, key, id) }
	want("k", "")
	save("done", "k", bot.RunDone, t0)
	old := save("old", "k", bot.RunWaiting, t0.Add(time.Minute))
	save("new", "k", bot.RunWaiting, t0.Add(2*time.Minute))
	save("other", "k2", bot.RunWaiting, t0.Add(3*time.Minute))
	want("k", "new")
	save("new", "k", bot.RunWorking, t0.Add(2*time.Minute))
	want("k", "old")
	old.Status, old.Waiting = bot.RunCancelled, nil
	if err := s.SaveRun(ctx, old); err != nil {
		t.Fatal(err)
	}
	want("k", "")
	want("k2", "other")
	if err := s.DeleteConversation(ctx, "k2"); err != nil {
		t.Fatal(err)
	}
	want("k2", "")
}

// A button press finds its run by the button's key, in any
// conversation, and only while the run waits on that key.
func testWaitingRunByKey(t *testing.T, open Open) {
	s := fresh(t, open)
	ctx := t.Context()
	save := func(r *bot.Run) {
		t.Helper()
		if err := s.SaveRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	want := func(key, id string) { t.Helper(); WantWaitingByKey(t, s, key, id) }
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
	check(t, s)
}

// A run's feedback (the asker's 👍 or 👎) is saved on a run that already
// has its transcript, without losing it, and comes back from every
// method that returns runs, across a restart.
func testFeedbackKeptWithTheRun(t *testing.T, open Open) {
	s, reopen := open(t)
	ctx := t.Context()
	tr, _ := json.Marshal(map[string]any{"v": 1, "status": "done"})
	r := &bot.Run{ID: "r", ThreadKey: "k", Status: bot.RunDone, Created: t0, Transcript: tr, Answer: "Done."}
	if err := s.SaveRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := s.Run(ctx, "r")
	if err != nil || got.Feedback != nil {
		t.Fatalf("run before feedback = %+v, %v", got, err)
	}
	got.Feedback = &bot.Feedback{Rating: bot.FeedbackBad, At: t0.Add(time.Minute)}
	if err := s.SaveRun(ctx, got); err != nil {
		t.Fatal(err)
	}
	s = reopen()
	one, err := s.Run(ctx, "r")
	if err != nil || one.Feedback == nil || one.Feedback.Rating != bot.FeedbackBad || !one.Feedback.At.Equal(t0.Add(time.Minute)) || string(one.Transcript) != string(tr) {
		t.Fatalf("run = %+v, %v: want the 👎 and the transcript", one, err)
	}
	all, _ := s.Runs(ctx)
	thread, _ := s.ThreadRuns(ctx, "k")
	for _, list := range [][]*bot.Run{all, thread} {
		if len(list) != 1 || list[0].Feedback == nil || list[0].Feedback.Rating != bot.FeedbackBad {
			t.Errorf("listed %+v: want the run with its 👎", list)
		}
	}
}
