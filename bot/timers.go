package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"
)

// Timer is a durable timer: once Due has passed, the handler registered
// for Kind (HandleTimer) runs with it, in one process of however many
// share the store. Timers live in the store, not in memory, so a restart
// finds them and a timer due during downtime fires at the next start
// (its handler decides whether it is too late).
type Timer struct {
	// Kind names the handler ("digest", "autopilot").
	Kind string `json:"kind"`
	// Key is the timer's name within its kind (a person:
	// "telegram:42"); Kind and Key identify a timer.
	Key string `json:"key"`
	// Due is when it fires.
	Due time.Time `json:"due"`
	// Data is the handler's own small state (no personal text: it is
	// stored in the clear).
	Data string `json:"data,omitempty"`
	// Claim is set on a timer ClaimTimers returned: the claimant's
	// token, which FinishTimer must show.
	Claim string `json:"claim,omitempty"`
}

// TimerStore keeps durable timers. The bbolt and PostgreSQL stores
// implement it; the bot uses it when its Store does.
type TimerStore interface {
	// SetTimer creates or replaces timer (t.Kind, t.Key). It drops any
	// claim on it: the claimant's FinishTimer then changes nothing.
	SetTimer(ctx context.Context, t Timer) error
	// Timer returns a timer, or ErrNotFound.
	Timer(ctx context.Context, kind, key string) (Timer, error)
	// DeleteTimer deletes a timer; one that does not exist is no error.
	DeleteTimer(ctx context.Context, kind, key string) error
	// ClaimTimers claims up to n timers of the given kinds due at or
	// before now that hold no live claim, for lease, and returns them,
	// earliest first, with Claim set to claim. A timer is claimed by one
	// caller at a time, also across processes sharing the store; a claim
	// not finished within its lease (its process died) lapses and the
	// timer may be claimed again. The lease is measured on the store's
	// clock: the database's where processes share it (their clocks may
	// differ), now's in a store of one process.
	ClaimTimers(ctx context.Context, now time.Time, kinds []string, claim string, lease time.Duration, n int) ([]Timer, error)
	// ExtendTimer renews t's claim for lease (from now, on the clock
	// ClaimTimers measures leases with) and reports whether t.Claim still
	// held it: false when the timer was set, deleted or claimed by
	// another meanwhile.
	ExtendTimer(ctx context.Context, now time.Time, t Timer, lease time.Duration) (bool, error)
	// FinishTimer ends t's claim: the timer is due again at next, or
	// deleted when next is zero. When the timer was set or deleted
	// meanwhile, or is claimed by another (t.Claim differs), nothing
	// changes.
	FinishTimer(ctx context.Context, t Timer, next time.Time) error
}

// TimerHandler handles a timer that is due. It returns when the timer
// is due next (zero: never, it is deleted). An error is logged and the
// timer is tried again after timerRetry.
type TimerHandler func(ctx context.Context, t Timer) (next time.Time, err error)

const (
	// timerLease is how long a claim holds a timer without being
	// extended; a running handler's claim is extended every
	// timerLease/3, and a handler whose claim is lost even so (its
	// process stalled longer than the lease) has its context cancelled.
	timerLease = 5 * time.Minute
	// timerRetry is when a timer whose handler failed is tried again.
	timerRetry = 5 * time.Minute
)

// HandleTimer registers the handler of a timer kind; call it before
// Start. Timers of a kind without a handler stay stored, unclaimed.
func (b *Bot) HandleTimer(kind string, fn TimerHandler) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.timerFns == nil {
		b.timerFns = map[string]TimerHandler{}
	}
	b.timerFns[kind] = fn
}

// timers returns the store's timers, or an error when it keeps none.
func (b *Bot) timers() (TimerStore, error) {
	ts, ok := b.store.(TimerStore)
	if !ok {
		return nil, fmt.Errorf("bot: the store keeps no timers")
	}
	return ts, nil
}

// SetTimer stores a timer (see TimerStore.SetTimer).
func (b *Bot) SetTimer(ctx context.Context, t Timer) error {
	ts, err := b.timers()
	if err != nil {
		return err
	}
	if err := ts.SetTimer(ctx, t); err != nil {
		return fmt.Errorf("bot: set timer %s %s: %w", t.Kind, t.Key, err)
	}
	return nil
}

// DeleteTimer deletes a timer.
func (b *Bot) DeleteTimer(ctx context.Context, kind, key string) error {
	ts, err := b.timers()
	if err != nil {
		return err
	}
	if err := ts.DeleteTimer(ctx, kind, key); err != nil {
		return fmt.Errorf("bot: delete timer %s %s: %w", kind, key, err)
	}
	return nil
}

// RunTimers claims the timers due now (by Config.Now) and runs their
// handlers, one after another, and returns how many ran. Each timer is
// claimed just before its handler runs: a claim taken for a batch would
// lapse behind slow handlers before its own, and another replica would
// run the timer too (issue 35). The bot calls
// it every Config.TimerEvery once started; tests with a settable clock
// call it after moving the clock.
func (b *Bot) RunTimers(ctx context.Context) (int, error) {
	b.timerPasses.Add(1)
	defer b.timerPasses.Add(-1)
	b.mu.Lock()
	fns := maps.Clone(b.timerFns)
	b.mu.Unlock()
	if len(fns) == 0 {
		return 0, nil
	}
	ts, err := b.timers()
	if err != nil {
		return 0, err
	}
	kinds := slices.Sorted(maps.Keys(fns))
	ran := 0
	// again holds the timers this pass ran that are due again already
	// (a late one catching up): each runs once per pass, so they are
	// claimed along with the next and let go.
	again := map[[2]string]bool{}
	for {
		now := b.cfg.Now()
		due, err := ts.ClaimTimers(ctx, now, kinds, newID(), timerLease, len(again)+1)
		if err != nil {
			return ran, fmt.Errorf("bot: claim timers: %w", err)
		}
		var t *Timer
		for i := range due {
			if t != nil || again[[2]string{due[i].Kind, due[i].Key}] {
				if err := ts.FinishTimer(context.WithoutCancel(ctx), due[i], due[i].Due); err != nil {
					return ran, fmt.Errorf("bot: let timer %s %s go: %w", due[i].Kind, due[i].Key, err)
				}
				continue
			}
			t = &due[i]
		}
		if t == nil {
			return ran, nil
		}
		log := b.log.With(slog.String("timer_kind", t.Kind), slog.String("timer_key", t.Key))
		next, err := b.runTimer(ctx, ts, *t, fns[t.Kind], log)
		if err != nil {
			log.Error("timer failed; trying again later", slog.Any("err", err))
			next = b.cfg.Now().Add(timerRetry)
		}
		if err := ts.FinishTimer(context.WithoutCancel(ctx), *t, next); err != nil {
			log.Error("finish timer", slog.Any("err", err))
		}
		if !next.IsZero() && !next.After(b.cfg.Now()) {
			again[[2]string{t.Kind, t.Key}] = true
		}
		ran++
	}
}

// runTimer runs fn with t, extending t's claim every timerLease/3 while
// it runs. When the claim is lost (another process took the timer after
// this one stalled past its lease), fn's context is cancelled.
func (b *Bot) runTimer(ctx context.Context, ts TimerStore, t Timer, fn TimerHandler, log *slog.Logger) (time.Time, error) {
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done, kept := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(kept)
		tick := time.NewTicker(timerLease / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			ok, err := ts.ExtendTimer(hctx, b.cfg.Now(), t, timerLease)
			switch {
			case err != nil:
				log.Warn("extend timer claim", slog.Any("err", err))
			case !ok:
				log.Warn("timer claim lost: its handler is stopped")
				cancel()
				return
			}
		}
	}()
	next, err := fn(hctx, t)
	close(done)
	<-kept
	return next, err
}

// timerLoop repairs the timers (repairTimers) and runs the due ones at
// start (what fell due during downtime), then runs those due every
// Config.TimerEvery. startWorkers counts its first pass in timerPasses
// (WaitIdle waits for it), which the loop ends.
func (b *Bot) timerLoop(ctx context.Context) {
	defer b.workLoops.Done()
	if _, ok := b.store.(TimerStore); !ok {
		b.timerPasses.Add(-1)
		return
	}
	if err := b.repairTimers(ctx); err != nil {
		b.log.Error("timer repair", slog.Any("err", err))
	}
	_, err := b.RunTimers(ctx)
	b.timerPasses.Add(-1)
	if err != nil {
		b.log.Error("timers", slog.Any("err", err))
	}
	t := time.NewTicker(b.cfg.TimerEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.quit:
			return
		case <-t.C:
		}
		if _, err := b.RunTimers(ctx); err != nil {
			b.log.Error("timers", slog.Any("err", err))
		}
	}
}

// repairTimers sets again the digest and autopilot timers that are gone
// of the people whose settings want them, and their place in the
// autopilot people (AutopilotPeople). Timers go missing with the
// database, not with a message: one copied by tidybot migrate --from
// before it copied timers holds none, nor one written by a tidybot that
// kept autopilot's looks in memory. So the repair runs once per start,
// before the first timer pass (a repaired timer already due runs in
// it), and a run's start reads no timer. A person whose repair fails is
// logged and the others are repaired; the next start tries again.
func (b *Bot) repairTimers(ctx context.Context) error {
	ls, ok := b.store.(SettingLister)
	if !ok {
		return nil
	}
	all, err := ls.SettingsWithPrefix(ctx, PersonSettingPrefix)
	if err != nil {
		return fmt.Errorf("bot: list the people's settings: %w", err)
	}
	for _, key := range slices.Sorted(maps.Keys(all)) {
		select {
		case <-b.quit:
			return nil // stopping: the next start repairs the rest
		default:
		}
		platform, userID := personOf(strings.TrimPrefix(key, PersonSettingPrefix))
		log := b.log.With(slog.String("platform", platform), slog.String("user_id", userID))
		var ps PersonSettings
		if err := json.Unmarshal([]byte(all[key]), &ps); err != nil {
			log.Error("timer repair: unreadable settings", slog.Any("err", err))
			continue
		}
		if !b.servesPerson(platform, userID) {
			// Removed from the allowed users: no digest, and autopilot
			// is off (armAutopilot forgets its state).
			ps.Digest = ""
		}
		if err := b.repairDigest(ctx, platform, userID, ps); err != nil {
			log.Error("timer repair: digest", slog.Any("err", err))
		}
		if ps.Autopilot {
			if err := b.armAutopilot(ctx, platform, userID, true); err != nil {
				log.Error("timer repair: autopilot", slog.Any("err", err))
			}
			if err := b.indexAutopilot(ctx, platform, userID, true); err != nil {
				log.Error("timer repair: autopilot people", slog.Any("err", err))
			}
		}
	}
	// The index above replaces the list of a tidybot before issue 35.
	if err := b.store.SetSetting(ctx, legacyAutopilotPeople, ""); err != nil {
		return fmt.Errorf("bot: delete the old autopilot list: %w", err)
	}
	return nil
}

// servesPerson reports whether the bot still serves a person, for the
// work it does for them unasked (digest, autopilot): allowedIn without
// their workspace, which is known only from their messages, so in team
// mode any slack:team:T… entry serves them.
func (b *Bot) servesPerson(platform, userID string) bool {
	if b.allowedIn(Incoming{Platform: platform, UserID: userID}) {
		return true
	}
	if b.cfg.Accounts == nil {
		return false
	}
	for u := range b.allowed {
		if strings.HasPrefix(u, platform+":team:") {
			return true
		}
	}
	return false
}
