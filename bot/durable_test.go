package bot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot/outbound"
)

// restart starts a new bot on st, as a new process would after a crash,
// and waits until it is idle.
func restart(t *testing.T, st *memStore, ag *mockAgent) *fakePlatform {
	t.Helper()
	plat := &fakePlatform{name: "telegram", interval: 2 * time.Second}
	b := New(st, ag, Config{Workers: 2, AllowedUsers: []string{"telegram:42"}})
	b.AddPlatform(plat)
	startUntilIdle(t, b)
	return plat
}

// startUntilIdle starts b (as at a restart: it picks up the work its
// store holds), waits until it is idle, and stops it.
func startUntilIdle(t *testing.T, b *Bot) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	b.Stop()
}

// TestFailedJobWriteLeavesTheEventRetriable: when the job cannot be
// stored, Handle fails (the adapter does not acknowledge) and the
// platform's retry of the same event is accepted, not dropped as a
// duplicate.
func TestFailedJobWriteLeavesTheEventRetriable(t *testing.T) {
	h := newHarness(t, &mockAgent{})
	h.store.mu.Lock()
	h.store.failJobs = 1
	h.store.mu.Unlock()
	if err := h.bot.Handle(t.Context(), msg("what's due today?", "u1")); err == nil {
		t.Fatal("Handle succeeded although the job was not stored")
	}
	h.handle(t, msg("what's due today?", "u1")) // the platform's retry
	h.idle(t)
	if got := h.agent.startedList(); len(got) != 1 {
		t.Errorf("runs started: %q, want the retried message's", got)
	}
	if n := len(h.store.messages); n != 2 { // the question and the answer
		t.Errorf("stored messages: %d, want 2", n)
	}
}

// TestCrashAfterAnswerResumesNotRestarts: a crash right after the user's
// answer resumed a waiting run resumes that run with the answer at the
// next start; it never starts a second run whose instruction is the
// answer.
func TestCrashAfterAnswerResumesNotRestarts(t *testing.T) {
	ag := &mockAgent{StartFn: asking("Work", "Home")}
	h := newHarness(t, ag)
	h.handle(t, msg("file the dentist task", "e1"))
	h.idle(t)
	var crashed *memStore
	ag.mu.Lock()
	ag.ResumeFn = func(_ context.Context, tr *agent.Transcript, answer string, _ agent.Hooks) agent.Outcome {
		if crashed == nil {
			crashed = h.store.snapshot()
		}
		return done(tr, "answered: "+answer)
	}
	ag.mu.Unlock()
	h.handle(t, msg("Home", "e2"))
	h.idle(t)
	if crashed == nil {
		t.Fatal("the answer did not resume the run")
	}

	ag2 := &mockAgent{}
	plat := restart(t, crashed, ag2)
	if got := ag2.startedList(); len(got) != 0 {
		t.Errorf("after the restart runs started with %q: the answer became a new request", got)
	}
	if joined(ag2.resumed) != "Home" {
		t.Errorf("resumed with %q, want the answer Home", ag2.resumed)
	}
	if got := joined(plat.texts()); !strings.Contains(got, "answered: Home") {
		t.Errorf("sent after the restart: %s", got)
	}
}

// TestCrashBeforeAnswerPostedPostsItAtRestart: the process dies while the
// final answer is being posted (after the run is saved as done); the next
// start posts it.
func TestCrashBeforeAnswerPostedPostsItAtRestart(t *testing.T) {
	h := newHarness(t, &mockAgent{})
	var crashed *memStore
	h.plat.onSend = func(m Outgoing) error {
		if strings.HasPrefix(m.Text, "did: ") && crashed == nil {
			crashed = h.store.snapshot()
			return errors.New("killed")
		}
		return nil
	}
	h.handle(t, msg("tidy", "e1"))
	h.idle(t)
	if crashed == nil {
		t.Fatal("the answer was never posted")
	}
	if r, _ := crashed.Runs(t.Context(), RunDone); len(r) != 1 {
		t.Fatalf("the run was not saved as done before the post")
	}
	plat := restart(t, crashed, &mockAgent{})
	if got := plat.texts(); !slices.Contains(got, "did: tidy") {
		t.Errorf("after the restart sent %q, want the lost answer", got)
	}
	if left, _ := crashed.Outbox(t.Context()); len(left) != 0 {
		t.Errorf("outbox after delivery: %+v", left)
	}
	// Delivered now: a second restart posts nothing again.
	if got := restart(t, crashed, &mockAgent{}).texts(); len(got) != 0 {
		t.Errorf("a second restart posted %q", got)
	}
}

// TestQuestionPostedOnlyOnceTheRunWaits: when the question reaches the
// platform, the run is already saved as waiting on the buttons' key, so a
// press at once finds it open; the posted message's id is then recorded.
func TestQuestionPostedOnlyOnceTheRunWaits(t *testing.T) {
	ag := &mockAgent{StartFn: asking("Work", "Home")}
	h := newHarness(t, ag)
	var checked bool
	h.plat.onSend = func(m Outgoing) error {
		if len(m.Buttons) == 0 || !m.Question {
			return nil
		}
		checked = true
		key, _, _ := parseButton(m.Buttons[0].Data)
		runs, _ := h.store.Runs(context.Background(), RunWaiting)
		if len(runs) != 1 || runs[0].Waiting.Key != key {
			t.Errorf("question posted before its run waits on it: waiting runs %+v", runs)
		}
		return nil
	}
	h.handle(t, msg("file the dentist task", "e1"))
	h.idle(t)
	if !checked {
		t.Fatal("no question posted")
	}
	runs, _ := h.store.Runs(t.Context(), RunWaiting)
	if len(runs) != 1 || runs[0].Waiting.MessageID == "" {
		t.Fatalf("the question's message id is not recorded: %+v", runs)
	}
	q := h.plat.last()
	h.handle(t, Incoming{Platform: "telegram", ChatID: "c1", UserID: "42", Button: q.Buttons[1].Data, ButtonRef: "cb1"})
	h.idle(t)
	if joined(ag.resumed) != "Home" {
		t.Errorf("resumed with %q", ag.resumed)
	}
}

// logBuffer is a slog handler's target safe for concurrent writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestRunStartingWhileStoppingIsCancelled: a run that a worker starts
// after Stop cancelled the running ones is cancelled too, so Stop does not
// wait out its grace period; Stop logs what it waited for.
func TestRunStartingWhileStoppingIsCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := make(chan struct{})
		ag := &mockAgent{StartFn: blocking(block, nil)}
		st := newMemStore()
		var logs logBuffer
		b := New(st, ag, Config{AllowedUsers: []string{"telegram:42"}, ShutdownGrace: time.Hour,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		b.AddPlatform(&fakePlatform{name: "telegram"})
		stopped := make(chan time.Duration, 1)
		st.onThread = func() {
			if len(stopped) > 0 || b.isStopped() {
				return
			}
			// Stop runs now, between the job being handed out and the
			// run starting.
			go func() {
				start := time.Now()
				b.Stop()
				stopped <- time.Since(start)
			}()
			for !b.isStopped() {
				time.Sleep(time.Millisecond)
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		if err := b.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.Handle(ctx, msg("tidy", "e1")); err != nil {
			t.Fatal(err)
		}
		if took := <-stopped; took >= time.Minute {
			t.Errorf("Stop took %v: the run that started while stopping was not cancelled", took)
		}
		runs, _ := st.Runs(t.Context())
		if len(runs) != 1 || runs[0].Status != RunWorking {
			t.Errorf("runs %+v: want the interrupted run kept working, to resume", runs)
		}
		out := logs.String()
		for _, want := range []string{"shutting down", "sends=", "shut down"} {
			if !strings.Contains(out, want) {
				t.Errorf("shutdown log lacks %q:\n%s", want, out)
			}
		}
	})
}

// TestShutdownLogsTheRunsItWaitsFor: the runs in progress are named.
func TestShutdownLogsTheRunsItWaitsFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := make(chan struct{})
		ag := &mockAgent{StartFn: blocking(block, nil)}
		var logs logBuffer
		b := New(newMemStore(), ag, Config{AllowedUsers: []string{"telegram:42"}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		b.AddPlatform(&fakePlatform{name: "telegram"})
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := b.Handle(t.Context(), msg("tidy", "e1")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		b.mu.Lock()
		var id string
		for _, ar := range b.running {
			id = ar.runID
		}
		b.mu.Unlock()
		b.Stop()
		if id == "" || !strings.Contains(logs.String(), id) {
			t.Errorf("shutdown log does not name run %q:\n%s", id, logs.String())
		}
	})
}

// TestOneRefusalPerUnknownUserPerDay: a flood from a user who is not
// allowed gets one refusal a day, remembered across a restart.
func TestOneRefusalPerUnknownUserPerDay(t *testing.T) {
	st := newMemStore()
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	run := func(n int) []string {
		plat := &fakePlatform{name: "telegram"}
		b := New(st, &mockAgent{}, Config{AllowedUsers: []string{"telegram:42"}, Now: clock})
		b.AddPlatform(plat)
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			in := msg("hi", fmt.Sprintf("%s-%d", now.Format(time.DateOnly), i))
			in.UserID, in.At = "666", now
			if err := b.Handle(t.Context(), in); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		b.Stop()
		return plat.texts()
	}
	if got := run(500); len(got) != 1 {
		t.Errorf("500 messages got %d refusals, want 1", len(got))
	}
	if got := run(5); len(got) != 0 {
		t.Errorf("after a restart the same day: %d refusals, want 0", len(got))
	}
	now = now.Add(24 * time.Hour)
	if got := run(5); len(got) != 1 {
		t.Errorf("the next day: %d refusals, want 1", len(got))
	}
}

// TestSendsAreQueuedPerPlatform: refusals to 300 different users, each
// in their own chat, while the platform is slow make at most outbound.Lanes
// calls at a time (never one goroutine per send), and the queue is
// bounded; one chat's calls are made one at a time, in order.
func TestSendsAreQueuedPerPlatform(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var mu sync.Mutex
		inFlight, most, calls := 0, 0, 0
		perChat := map[string]int{}
		plat := &fakePlatform{name: "telegram"}
		plat.onSend = func(m Outgoing) error {
			mu.Lock()
			inFlight++
			calls++
			most = max(most, inFlight)
			perChat[m.ChatID]++
			if perChat[m.ChatID] > 1 {
				t.Errorf("two calls at once for chat %s", m.ChatID)
			}
			mu.Unlock()
			<-release
			mu.Lock()
			inFlight--
			perChat[m.ChatID]--
			mu.Unlock()
			return nil
		}
		b := New(newMemStore(), &mockAgent{}, Config{AllowedUsers: []string{"telegram:42"}})
		b.AddPlatform(plat)
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		for i := range 300 {
			in := msg("hi", fmt.Sprint("e", i))
			in.UserID = fmt.Sprint(1000 + i)
			in.ChatID = fmt.Sprint("c", i%20) // 15 refusals per chat
			if err := b.Handle(t.Context(), in); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		mu.Lock()
		if most < 2 || most > outbound.Lanes {
			t.Errorf("%d sends in flight at once, want 2 to %d (one per lane)", most, outbound.Lanes)
		}
		mu.Unlock()
		close(release)
		if err := b.WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		b.Stop()
		if calls > outbound.QueueSize+1 || calls < outbound.QueueSize {
			t.Errorf("%d sends made for 300 refusals, want the queue's bound (%d) plus the one in flight", calls, outbound.QueueSize)
		}
	})
}

// rateLimited is a platform's 429.
type rateLimited time.Duration

func (r rateLimited) Error() string             { return "429 Too Many Requests" }
func (r rateLimited) RetryAfter() time.Duration { return time.Duration(r) }

// TestSendQueueHonoursRetryAfter: after a 429 the chat's calls wait for
// Retry-After, then the message is tried again; another chat's call is
// made meanwhile (a 429 names one chat's or one method's limit, not the
// platform's: issue 38).
func TestSendQueueHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var at []time.Duration
		var to []string
		start := time.Now()
		plat := &fakePlatform{name: "telegram"}
		plat.onSend = func(m Outgoing) error {
			mu.Lock()
			defer mu.Unlock()
			at, to = append(at, time.Since(start)), append(to, m.ChatID)
			if len(at) == 1 {
				return rateLimited(30 * time.Second)
			}
			return nil
		}
		b := New(newMemStore(), &mockAgent{}, Config{AllowedUsers: []string{"telegram:42"}})
		b.AddPlatform(plat)
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		for i, user := range []string{"666", "667"} {
			in := msg("hi", fmt.Sprint("e", i))
			in.UserID, in.ChatID = user, "chat"+user // two chats
			if lane := b.queue("telegram").s.Lane; i == 1 && lane("chat666") == lane("chat667") {
				t.Fatal("both chats share a lane; pick chats on two")
			}
			if err := b.Handle(t.Context(), in); err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // the first call has had its 429
		}
		if err := b.WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		b.Stop()
		if texts := plat.texts(); len(texts) != 2 {
			t.Fatalf("sent %q, want both refusals", texts)
		}
		if len(at) != 3 || to[0] != "chat666" || to[1] != "chat667" || at[1] != 0 || to[2] != "chat666" || at[2] < 30*time.Second {
			t.Errorf("calls at %v to %v: want the 429 for chat666, the other chat's call at once, then chat666's retry after the 30 s pause", at, to)
		}
	})
}

// TestRetentionPrunesOldData: at start (and hourly) messages and runs
// older than the retention are deleted.
func TestRetentionPrunesOldData(t *testing.T) {
	st := newMemStore()
	now := time.Now()
	old := now.Add(-31 * 24 * time.Hour)
	_ = st.AppendMessage(t.Context(), Message{ThreadKey: "telegram:c1:", Role: RoleUser, Text: "old", At: old})
	_ = st.AppendMessage(t.Context(), Message{ThreadKey: "telegram:c1:", Role: RoleUser, Text: "new", At: now})
	_ = st.SaveRun(t.Context(), &Run{ID: "old", ThreadKey: "telegram:c1:", Status: RunDone, Created: old, Updated: old})
	_ = st.Commit(t.Context(), Change{Audit: []AuditEntry{{RunID: "old", At: old}}})
	restart(t, st, &mockAgent{})
	if len(st.messages) != 1 || st.messages[0].Text != "new" || len(st.runs) != 0 || len(st.audit) != 0 {
		t.Errorf("after start: messages %+v, %d runs, %d audit entries", st.messages, len(st.runs), len(st.audit))
	}
}

// TestResetDeletesTheConversation: /reset deletes the thread's stored
// messages and runs, not only hides them.
func TestResetDeletesTheConversation(t *testing.T) {
	h := newHarness(t, &mockAgent{})
	h.handle(t, msg("remember pineapple", "e1"))
	h.idle(t)
	other := msg("elsewhere", "e2")
	other.ChatID = "c2"
	h.handle(t, other)
	h.idle(t)
	reset := msg("", "e3")
	reset.Command = "reset"
	h.handle(t, reset)
	h.idle(t)
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	for _, m := range h.store.messages {
		if m.ThreadKey == "telegram:c1:" {
			t.Errorf("message kept after /reset: %+v", m)
		}
	}
	for _, r := range h.store.runs {
		if r.ThreadKey == "telegram:c1:" {
			t.Errorf("run kept after /reset: %s %q", r.ID, r.Instruction)
		}
	}
	if len(h.store.messages) != 2 || len(h.store.runs) != 1 {
		t.Errorf("another conversation was touched: %d messages, %d runs", len(h.store.messages), len(h.store.runs))
	}
}

// TestNoSendAfterStop: a reply that an event being handled queues while
// Stop runs is never made by a goroutine Stop did not wait for (before,
// each reply got its own goroutine, added to the WaitGroup after Stop's
// Wait had begun).
func TestNoSendAfterStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		b := New(st, &mockAgent{}, Config{AllowedUsers: []string{"telegram:42"}})
		var mu sync.Mutex
		stopped, late := false, 0
		plat := &fakePlatform{name: "telegram"}
		plat.onSend = func(Outgoing) error {
			mu.Lock()
			defer mu.Unlock()
			if stopped {
				late++
			}
			return nil
		}
		b.AddPlatform(plat)
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		st.onMarkEvent = func() {
			// The bot stops between Handle's check and its reply.
			b.Stop()
			mu.Lock()
			stopped = true
			mu.Unlock()
		}
		in := msg("", "e1")
		in.Command = "help"
		_ = b.Handle(t.Context(), in)
		synctest.Wait() // a stray goroutine would have sent by now
		mu.Lock()
		defer mu.Unlock()
		if late != 0 {
			t.Errorf("%d sends after Stop returned", late)
		}
	})
}

// TestRunEndingDuringShutdownPostsItsAnswer: a run whose final reply
// arrives while the bot stops still posts its answer within the grace
// period (the send queues stop after the workers).
func TestRunEndingDuringShutdownPostsItsAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		ag := &mockAgent{StartFn: scripted(func(context.Context, agent.Hooks) { <-release })}
		st, plat := newMemStore(), &fakePlatform{name: "telegram"}
		b := New(st, ag, Config{AllowedUsers: []string{"telegram:42"}})
		b.AddPlatform(plat)
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := b.Handle(t.Context(), msg("tidy", "e1")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		stopped := make(chan struct{})
		go func() { b.Stop(); close(stopped) }()
		synctest.Wait()
		close(release) // the model's final reply comes in as we stop
		<-stopped
		if got := plat.texts(); !slices.Contains(got, "did: tidy") {
			t.Errorf("sent %q, want the answer posted before the bot stopped", got)
		}
		if left, _ := st.Outbox(t.Context()); len(left) != 0 {
			t.Errorf("left in the outbox: %+v", left)
		}
	})
}

// TestCrashBeforeUndoReportPostedPostsItAtRestart: the /undo report is
// stored in the outbox with the run marked undone, so a crash before the
// post loses neither.
func TestCrashBeforeUndoReportPostedPostsItAtRestart(t *testing.T) {
	h := newEngineHarness(t)
	var crashed *memStore
	h.tg.onSend = func(m Outgoing) error {
		if strings.HasPrefix(m.Text, "↩️ Undid") && crashed == nil {
			crashed = h.store.snapshot()
			return errors.New("killed")
		}
		return nil
	}
	h.say(t, Incoming{Platform: "telegram", ChatID: "42", UserID: "42", DM: true, Text: "move the lists home"})
	h.say(t, Incoming{Platform: "telegram", ChatID: "42", UserID: "42", DM: true, Command: "undo"})
	if crashed == nil {
		t.Fatal("the undo report was never posted")
	}
	left, _ := crashed.Outbox(t.Context())
	if len(left) != 1 || !strings.HasPrefix(left[0].Msg.Text, "↩️ Undid 2 of 2 changes") {
		t.Fatalf("outbox at the crash: %+v, want the undo report", left)
	}
	if got := restart(t, crashed, &mockAgent{}).texts(); len(got) != 1 || !strings.HasPrefix(got[0], "↩️ Undid") {
		t.Errorf("after the restart sent %q, want the lost undo report", got)
	}
	if left, _ := crashed.Outbox(t.Context()); len(left) != 0 {
		t.Errorf("outbox after delivery: %+v", left)
	}
}

// TestCrashBeforeResetConfirmationPostedPostsItAtRestart: the /reset
// confirmation goes through the outbox too.
func TestCrashBeforeResetConfirmationPostedPostsItAtRestart(t *testing.T) {
	h := newHarness(t, &mockAgent{})
	var crashed *memStore
	h.plat.onSend = func(m Outgoing) error {
		if strings.HasPrefix(m.Text, "I forgot our conversation") && crashed == nil {
			crashed = h.store.snapshot()
			return errors.New("killed")
		}
		return nil
	}
	reset := msg("", "e1")
	reset.Command = "reset"
	h.handle(t, reset)
	h.idle(t)
	if crashed == nil {
		t.Fatal("the confirmation was never posted")
	}
	left, _ := crashed.Outbox(t.Context())
	if len(left) != 1 || !strings.HasPrefix(left[0].Msg.Text, "I forgot our conversation") {
		t.Fatalf("outbox at the crash: %+v, want the confirmation", left)
	}
	if got := restart(t, crashed, &mockAgent{}).texts(); len(got) != 1 || !strings.HasPrefix(got[0], "I forgot our conversation") {
		t.Errorf("after the restart sent %q, want the lost confirmation", got)
	}
	if got := h.plat.texts(); len(got) != 0 {
		t.Errorf("posted before the crash: %q", got)
	}
}

// TestRunsDoNotWaitForThePlatform: while the platform is slow to post, a
// run that answers at once still ends (its answer safe in the outbox)
// and a second chat's run goes through too: workers wait for the model
// and the store, not for posts. Each chat then sees its status message,
// that message settled, and its answer.
func TestRunsDoNotWaitForThePlatform(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		plat := newTelegram()
		plat.onSend = func(Outgoing) error { <-release; return nil }
		ag := &mockAgent{}
		h := startHarness(t, ag, plat, Config{Workers: 1, AllowedUsers: []string{"telegram:42"}})
		h.handle(t, msg("one", "e1"))
		second := msg("two", "e2")
		second.ChatID = "c2"
		h.handle(t, second)
		synctest.Wait()
		h.store.mu.Lock()
		done := 0
		for _, r := range h.store.runs {
			if r.Status == RunDone {
				done++
			}
		}
		queued := len(h.store.outbox)
		h.store.mu.Unlock()
		if done != 2 || queued != 2 {
			t.Fatalf("while the platform is stuck: %d runs done, %d answers in the outbox; want 2 and 2", done, queued)
		}
		close(release)
		h.idle(t)
		if got := plat.texts(); len(got) != 4 {
			t.Fatalf("posted %q, want two status messages and two answers", got)
		}
		plat.mu.Lock()
		defer plat.mu.Unlock()
		for _, chat := range []string{"c1", "c2"} {
			var seen []string
			for _, m := range plat.sent {
				if m.ChatID == chat {
					seen = append(seen, m.Text)
				}
			}
			if len(seen) != 2 || seen[0] != "🤔 Working on it…" || !strings.HasPrefix(seen[1], "did: ") {
				t.Errorf("chat %s saw %q, want the status message, then the answer", chat, seen)
			}
		}
		var want []string // the fake's id of a message is its place in sent
		for i, m := range plat.sent {
			if m.Text == "🤔 Working on it…" {
				want = append(want, fmt.Sprintf("m%d: ✅ Done", i+1))
			}
		}
		slices.Sort(plat.edits)
		if !slices.Equal(plat.edits, want) {
			t.Errorf("edits %q, want %q: each status message settled once it was posted", plat.edits, want)
		}
	})
}

// TestFailedRunEndKeepsTheJob: when the commit of a run's end fails (a
// full disk), the user is told, and the job that started the run stays
// stored: the next start runs it again and answers.
func TestFailedRunEndKeepsTheJob(t *testing.T) {
	st := newMemStore()
	st.commitErr = func(c Change) error {
		if c.Run != nil && c.Run.Status == RunDone {
			return errors.New("disk full")
		}
		return nil
	}
	h := &harness{store: st, agent: &mockAgent{}, plat: newTelegram()}
	h.bot = New(st, h.agent, Config{Workers: 2, AllowedUsers: []string{"telegram:42"}})
	h.bot.AddPlatform(h.plat)
	if err := h.bot.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.handle(t, msg("tidy", "e1"))
	h.idle(t)
	h.bot.Stop()
	if texts := h.plat.texts(); len(texts) == 0 || texts[len(texts)-1] != jobFailedText {
		t.Fatalf("posted %q, want the failure said last", texts)
	}
	st.mu.Lock()
	jobs, runs := len(st.jobs), len(st.runs)
	st.mu.Unlock()
	if jobs != 1 || runs != 0 {
		t.Fatalf("after the failed commit: %d jobs, %d runs stored; want the job kept and no run", jobs, runs)
	}
	st.commitErr = nil
	plat := restart(t, st, &mockAgent{})
	if texts := plat.texts(); len(texts) == 0 || texts[len(texts)-1] != "did: tidy" {
		t.Errorf("after restart: posted %q, want the answer", texts)
	}
}
