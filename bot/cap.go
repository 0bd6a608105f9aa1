package bot

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// The daily cap (Config.UserDailyTokens) holds across a person's runs in
// parallel conversations: every model call is reserved against the
// person's running total — tokens counted plus tokens of calls in flight
// — before it is made (Metered), and a run's tokens are counted in the
// store with every save of the run, so that a crash forgets none.
//
// A call starts only while the person's counted tokens are under the cap.
// It runs beside the person's other calls in flight only if all their
// reservations fit under the cap together; otherwise it waits for them to
// end. A reservation is the call's upper bound (agent.PromptBound of its
// request plus its max_tokens), so calls that ran side by side stay under
// the cap, and the day's total exceeds the cap by less than the usage of
// one call: the last one, started alone while the total was under it.

// Metered wraps the engine's model so that every call of a run the bot
// executes is first reserved against its person's daily tokens (see
// Config.UserDailyTokens). A call outside such a run (no cap, an eval)
// goes straight through. cmd/tidybot wraps every engine's model with it.
func Metered(m agent.Model) agent.Model { return meteredModel{m: m} }

type meteredModel struct{ m agent.Model }

// Complete implements agent.Model.
func (mm meteredModel) Complete(ctx context.Context, req agent.Request) (agent.Response, error) {
	rm, _ := ctx.Value(meterKey{}).(*runMeter)
	if rm == nil || rm.b.cfg.UserDailyTokens <= 0 {
		return mm.m.Complete(ctx, req)
	}
	return rm.complete(ctx, mm.m, req)
}

type meterKey struct{}

// runMeter is one execution of a run, as its model calls see it.
type runMeter struct {
	b                *Bot
	platform, userID string
	stop             context.CancelCauseFunc // stops the run at the cap

	// mu protects the fields below.
	mu sync.Mutex
	// unsaved are tokens of calls that ended, already in the ledger but
	// not yet counted in the store (the next save counts them).
	unsaved int
	// metered is set once a call went through Metered.
	metered bool
}

func (rm *runMeter) complete(ctx context.Context, m agent.Model, req agent.Request) (agent.Response, error) {
	rm.mu.Lock()
	rm.metered = true
	rm.mu.Unlock()
	n := agent.PromptBound(req) + req.MaxTokens
	if req.MaxTokens <= 0 {
		n += agent.DefaultMaxTokens
	}
	key := usageKey(rm.platform, rm.userID, rm.b.cfg.Now())
	if err := rm.b.ledger.reserve(ctx, rm.b, key, n); err != nil {
		if errors.Is(err, errDailyCap) {
			rm.stop(errDailyCap) // the engine sees its context end: the run stops here
		}
		return agent.Response{}, fmt.Errorf("bot: reserve a model call: %w", err)
	}
	resp, err := m.Complete(ctx, req)
	used := resp.Usage.Total()
	rm.b.ledger.settle(key, n, used)
	rm.mu.Lock()
	rm.unsaved += used
	rm.mu.Unlock()
	return resp, err
}

// counted tells the ledger that a save of the run counted spent tokens in
// the store: those the run's calls added to it already are no longer
// unsaved; any others (a model not wrapped in Metered) are added.
func (rm *runMeter) counted(spent int) {
	if spent <= 0 {
		return
	}
	rm.mu.Lock()
	seen := min(spent, rm.unsaved)
	rm.unsaved -= seen
	rm.mu.Unlock()
	if extra := spent - seen; extra > 0 {
		rm.b.ledger.add(usageKey(rm.platform, rm.userID, rm.b.cfg.Now()), extra)
	}
}

// wasMetered reports whether the run's calls go through Metered.
func (rm *runMeter) wasMetered() bool {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return rm.metered
}

// rereadTally is how old a person's count may be, with a Shared store,
// before it is read again from the store (where other replicas add
// theirs) when no call of theirs is in flight here.
const rereadTally = time.Second

// ledger is every person's running total of the day, by usageKey: the
// tokens counted (read from the store once, then kept up to date) and
// the reservations of calls in flight.
type ledger struct {
	// mu protects people.
	mu     sync.Mutex
	people map[string]*tally
}

type tally struct {
	read     time.Time // when spent was last read from the store
	spent    int       // counted in the store, or about to be (calls that ended)
	reserved int       // the bounds of calls in flight
	// changed is closed and replaced when a call ends.
	changed chan struct{}
}

// get returns key's tally, reading the day's count from the store the
// first time. mu must be held.
func (l *ledger) get(ctx context.Context, b *Bot, key string) *tally {
	if t := l.people[key]; t != nil {
		if b.feed != nil && t.reserved == 0 && time.Since(t.read) > rereadTally {
			// Other replicas count this person's calls in the store.
			t.saw(b.usageOf(ctx, key), time.Now())
		}
		return t
	}
	return l.start(key, b.usageOf(ctx, key), time.Now())
}

// start begins key's tally with spent, read from the store at read,
// forgetting earlier days' tallies. mu must be held.
func (l *ledger) start(key string, spent int, read time.Time) *tally {
	if l.people == nil {
		l.people = map[string]*tally{}
	}
	day := key[strings.LastIndexByte(key, ':')+1:]
	for k := range l.people {
		if !strings.HasSuffix(k, ":"+day) {
			delete(l.people, k) // an earlier day's
		}
	}
	t := &tally{spent: spent, read: read, changed: make(chan struct{})}
	l.people[key] = t
	return t
}

// counted records raw, key's count read from the store at read with the
// reads a run's start makes at once (StartQuery.Usage), so that get does
// not read it again on its own.
func (l *ledger) counted(key, raw string, read time.Time) {
	n, _ := strconv.Atoi(raw) // "" (none yet) is 0, as usageOf reads it
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.people[key]; t != nil {
		t.saw(n, read)
	} else {
		l.start(key, n, read)
	}
}

// saw takes n, the count read from the store at read (where other
// replicas add theirs), unless the tally was read later.
func (t *tally) saw(n int, read time.Time) {
	if read.After(t.read) {
		t.spent, t.read = max(t.spent, n), read
	}
}

// reserve waits until a call bounded by n tokens may start for key (see
// the top of this file) and reserves n; errDailyCap once the count has
// reached the cap, the context's cause when it ends first.
func (l *ledger) reserve(ctx context.Context, b *Bot, key string, n int) error {
	limit := b.cfg.UserDailyTokens
	for {
		l.mu.Lock()
		t := l.get(ctx, b, key)
		if t.spent >= limit {
			l.mu.Unlock()
			return errDailyCap
		}
		if t.reserved == 0 || t.spent+t.reserved+n <= limit {
			t.reserved += n
			l.mu.Unlock()
			return nil
		}
		changed := t.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// settle ends a call reserved with n that used tokens.
func (l *ledger) settle(key string, n, used int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.people[key]
	if t == nil {
		return // a new day began; the new day's count is read from the store
	}
	t.reserved -= n
	t.spent += used
	close(t.changed)
	t.changed = make(chan struct{})
}

// add counts tokens no call reported to the ledger.
func (l *ledger) add(key string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.people[key]; t != nil {
		t.spent += n
	}
}

// spent returns key's counted tokens.
func (l *ledger) spent(ctx context.Context, b *Bot, key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.get(ctx, b, key).spent
}
