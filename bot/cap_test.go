package bot

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// readerScript reads again and again ("read a lot": 30 reads, each with
// new arguments so no loop is seen, then an answer); "file the lists"
// asks which project.
func readerScript(mt modelTurn) (string, any) {
	switch {
	case mt.instruction == "file the lists" && len(mt.tools) == 0:
		return agent.ActAskUser, map[string]any{"question": "Which project?"}
	case strings.HasPrefix(mt.instruction, "read a lot") && len(mt.tools) < 30:
		return agent.ActGetTasks, map[string]any{"filter": "search: " + strconv.Itoa(len(mt.tools))}
	}
	return agent.ActFinalAnswer, map[string]string{"answer": "Done."}
}

// capHarness is a bot with the real engine behind Metered (as
// cmd/tidybot wires it), a daily cap and a script whose every call costs
// 110 tokens (scriptModel).
type capHarness struct {
	*engineHarness
	mu      sync.Mutex
	n       int           // model calls made
	hold    chan struct{} // when set, each call waits for a value
	entered chan struct{} // gets a value as a call begins
}

const callTokens = 110 // scriptModel's usage of one call

func newCapHarness(t *testing.T, limit int, workers int) *capHarness {
	t.Helper()
	h := &capHarness{engineHarness: &engineHarness{store: newMemStore(), tasks: newMemTasks("Old shopping list", "Old packing list"),
		tg: &fakePlatform{name: "telegram", interval: time.Millisecond}}, entered: make(chan struct{}, 1000)}
	h.model = &scriptModel{fn: func(mt modelTurn) (string, any) {
		h.mu.Lock()
		h.n++
		hold := h.hold
		h.mu.Unlock()
		h.entered <- struct{}{}
		if hold != nil {
			<-hold
		}
		time.Sleep(time.Millisecond) // runs of parallel conversations overlap
		return readerScript(mt)
	}}
	eng := agent.New(Metered(h.model), h.tasks, agent.Config{Confirm: agent.ConfirmDestructive, MaxSteps: 100})
	h.bot = New(h.store, eng, Config{Workers: workers, AllowedUsers: []string{"telegram:42"}, UserDailyTokens: limit})
	h.bot.AddPlatform(h.tg)
	ctx, cancel := context.WithCancel(t.Context())
	if err := h.bot.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.bot.Stop(); cancel() })
	return h
}

func (h *capHarness) spent() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n * callTokens
}

func (h *capHarness) handle(t *testing.T, in Incoming) {
	t.Helper()
	if err := h.bot.Handle(t.Context(), in); err != nil {
		t.Fatal(err)
	}
}

func (h *capHarness) idle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := h.bot.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

// inGroup is the person's message in group chat g: a conversation of
// its own.
func inGroup(g int, text string) Incoming {
	return Incoming{Platform: "telegram", ChatID: fmt.Sprint("-", g), UserID: "42", Text: text, EventID: newID()}
}

// TestDailyCapHoldsAcrossParallelConversations: one person's runs in
// four conversations at once, on four workers, spend less than the cap
// plus one call's tokens, not four runs' worth each up to the cap.
func TestDailyCapHoldsAcrossParallelConversations(t *testing.T) {
	const limit = 1000
	h := newCapHarness(t, limit, 4)
	for g := 1; g <= 4; g++ {
		h.handle(t, inGroup(g, "read a lot"))
	}
	h.idle(t)
	if got := h.spent(); got >= limit+callTokens {
		t.Errorf("spent %d tokens with a cap of %d, want less than %d (the cap plus one call)", got, limit, limit+callTokens)
	}
	if got := h.bot.usageOf(t.Context(), usageKey("telegram", "42", time.Now())); got != h.spent() {
		t.Errorf("the day's count = %d, want every token spent: %d", got, h.spent())
	}
	stopped := 0
	for _, m := range h.tg.texts() {
		if strings.HasPrefix(m, "You have used your 1000 model tokens for today") {
			stopped++
		}
	}
	if stopped != 4 {
		t.Errorf("%d runs were told of the cap, want 4:\n%s", stopped, strings.Join(h.tg.texts(), "\n---\n"))
	}
}

// TestDailyCapCountsTokensAsTheRunGoes: the tokens of a run are in the
// person's count with each save, before the run ends: a crash then
// forgets none of them.
func TestDailyCapCountsTokensAsTheRunGoes(t *testing.T) {
	h := newCapHarness(t, 1_000_000, 2)
	h.hold = make(chan struct{})
	h.handle(t, inGroup(1, "read a lot"))
	for range 5 {
		<-h.entered
		h.hold <- struct{}{}
	}
	<-h.entered // the sixth call: five were made and saved
	key := usageKey("telegram", "42", time.Now())
	deadline := time.Now().Add(5 * time.Second)
	for h.bot.usageOf(t.Context(), key) < 5*callTokens && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := h.bot.usageOf(t.Context(), key); got != 5*callTokens {
		t.Errorf("counted mid-run: %d tokens, want %d (five calls, each saved)", got, 5*callTokens)
	}
	close(h.hold)
	h.mu.Lock()
	h.hold = nil
	h.mu.Unlock()
	h.idle(t)
	if got := h.bot.usageOf(t.Context(), key); got != h.spent() {
		t.Errorf("counted at the end: %d tokens, want %d", got, h.spent())
	}
}

// TestDailyCapCheckedOnResume: an answer to a run's question, once the
// person has reached the cap (in another conversation), makes no model
// call: the run stops with the cap's message.
func TestDailyCapCheckedOnResume(t *testing.T) {
	const limit = 1000
	h := newCapHarness(t, limit, 2)
	h.handle(t, inGroup(1, "file the lists"))
	h.idle(t)
	if got := h.tg.last().Text; got != "Which project?" {
		t.Fatalf("question = %q", got)
	}
	h.handle(t, inGroup(2, "read a lot"))
	h.idle(t)
	calls := h.spent() / callTokens
	answer := inGroup(1, "Home")
	h.handle(t, answer)
	h.idle(t)
	if got := h.spent() / callTokens; got != calls {
		t.Errorf("the answer over the cap made %d model calls, want none", got-calls)
	}
	if got := h.tg.last().Text; !strings.HasPrefix(got, "You have used your 1000 model tokens for today") {
		t.Errorf("answer over the cap: %q, want the cap's message", got)
	}
}

// TestLedgerAdmitsWhatFits: calls of one person run side by side while
// their reservations fit under the cap together; a call that does not fit
// waits for one to end; none starts once the count reaches the cap.
func TestLedgerAdmitsWhatFits(t *testing.T) {
	b := New(newMemStore(), &mockAgent{}, Config{UserDailyTokens: 1000})
	key := usageKey("telegram", "42", time.Now())
	ctx := t.Context()
	if err := b.ledger.reserve(ctx, b, key, 400); err != nil {
		t.Fatal(err)
	}
	if err := b.ledger.reserve(ctx, b, key, 400); err != nil { // 800 fits
		t.Fatal(err)
	}
	third := make(chan error, 1)
	go func() { third <- b.ledger.reserve(ctx, b, key, 400) }() // 1,200 does not
	select {
	case err := <-third:
		t.Fatalf("a third call started beside two (err %v); its reservation does not fit", err)
	case <-time.After(20 * time.Millisecond):
	}
	b.ledger.settle(key, 400, 100) // 100 spent + 400 + 400 fits
	if err := <-third; err != nil {
		t.Fatal(err)
	}
	b.ledger.settle(key, 400, 500)
	b.ledger.settle(key, 400, 400) // 1,000 spent: the cap
	if err := b.ledger.reserve(ctx, b, key, 1); !errors.Is(err, errDailyCap) {
		t.Errorf("reserve at the cap = %v, want errDailyCap", err)
	}
	// Alone, a call may start while the count is under the cap, whatever
	// its reservation: the cap is then passed by at most that call.
	other := usageKey("telegram", "43", time.Now())
	if err := b.ledger.reserve(ctx, b, other, 5000); err != nil {
		t.Errorf("a lone call under the cap: %v", err)
	}
}

// TestLedgerReadsOtherReplicasCounts: with a Shared store, a person's
// count is read again from the store (where other replicas add theirs)
// once no call of theirs is in flight here.
func TestLedgerReadsOtherReplicasCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		b := New(st, &mockAgent{}, Config{UserDailyTokens: 1000})
		b.feed = &feeder{} // as New does for a Shared store
		key := usageKey("telegram", "42", time.Now())
		ctx := t.Context()
		if err := b.ledger.reserve(ctx, b, key, 100); err != nil {
			t.Fatal(err)
		}
		b.ledger.settle(key, 100, 100)
		if err := st.SetSetting(ctx, key, "1000"); err != nil { // another replica's calls
			t.Fatal(err)
		}
		if got := b.ledger.spent(ctx, b, key); got != 100 {
			t.Errorf("spent at once = %d, want 100 (read a moment ago)", got)
		}
		time.Sleep(2 * rereadTally)
		if err := b.ledger.reserve(ctx, b, key, 1); !errors.Is(err, errDailyCap) {
			t.Errorf("reserve once another replica reached the cap = %v, want errDailyCap", err)
		}
	})
}
