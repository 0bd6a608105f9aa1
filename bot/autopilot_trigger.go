package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"
)

// The periodic trigger of the autopilot is a durable timer (timers.go)
// of kind TimerAutopilot per person with autopilot on, keyed
// "platform:user id": every Config.AutopilotEvery it looks at their
// inbox (Autopilot), the safety net behind Todoist's webhooks, which may
// be late or lost. The timer lives in the store, so it survives a
// restart, and one process at a time claims it, so a person's inbox is
// looked at once per interval however many replicas share the store. It
// runs at the bot's timer passes (Config.TimerEvery), so a look comes at
// most TimerEvery late.

// TimerAutopilot is the kind of the autopilot's timers.
const TimerAutopilot = "autopilot"

// registerAutopilot makes the bot look at inboxes at the autopilot's
// timers.
func (b *Bot) registerAutopilot() { b.HandleTimer(TimerAutopilot, b.autopilotTimer) }

// armAutopilot follows the person's autopilot setting (SaveSettings
// calls it with every save, repairTimers at start). Off (or the person
// not allowed): it forgets the
// autopilot state and deletes the timer. On: a switch-on makes the
// first look at once (switchAutopilot), and the timer is set when it
// has none (turned on, or lost: a database copied by tidybot migrate
// --from holds no timers): due an interval on after a first look made
// here, else due now, for the timer's pass to make it.
func (b *Bot) armAutopilot(ctx context.Context, platform, userID string, on bool) error {
	ts, ok := b.store.(TimerStore)
	if !ok {
		if on {
			return fmt.Errorf("bot: autopilot needs a store that keeps timers")
		}
		return nil
	}
	key := PersonID(platform, userID)
	// A person removed from the allowed users is off: at a start that
	// allows them again, autopilot starts with a first look.
	on = on && b.servesPerson(platform, userID)
	noted, err := b.switchAutopilot(ctx, platform, userID, on)
	if err != nil {
		return err
	}
	if !on {
		if err := ts.DeleteTimer(ctx, TimerAutopilot, key); err != nil {
			return fmt.Errorf("bot: delete the autopilot timer of %s: %w", key, err)
		}
		return nil
	}
	_, err = ts.Timer(ctx, TimerAutopilot, key)
	if err == nil {
		return nil
	}
	if !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("bot: read the autopilot timer of %s: %w", key, err)
	}
	due := b.cfg.Now()
	if noted {
		due = due.Add(b.cfg.AutopilotEvery)
	}
	return b.SetTimer(ctx, Timer{Kind: TimerAutopilot, Key: key, Due: due})
}

// autopilotTimer looks once at the inbox of the timer's person and
// returns when to look next: Config.AutopilotEvery from now (after
// downtime one look, never a burst), never when autopilot is off. A
// failed look is logged and the next comes an interval later, as usual.
func (b *Bot) autopilotTimer(ctx context.Context, t Timer) (time.Time, error) {
	platform, userID := personOf(t.Key)
	ps, err := b.Settings(ctx, platform, userID)
	if err != nil {
		return time.Time{}, err
	}
	if !ps.Autopilot {
		return time.Time{}, nil // turned off meanwhile: no timer
	}
	if !b.servesPerson(platform, userID) {
		// Removed from the allowed users: no timer (repairTimers sets it
		// again at a start that allows them).
		b.log.Info("autopilot stopped: the person is no longer allowed", slog.String("platform", platform), slog.String("user_id", userID))
		return time.Time{}, nil
	}
	if b.queue(platform) == nil {
		// This process does not serve the person's platform (tidybot
		// chat on a shared database): due again at once, for one that
		// does.
		return b.cfg.Now(), nil
	}
	if err := b.Autopilot(ctx, platform, userID); err != nil {
		if errors.Is(err, ErrStopped) {
			return b.cfg.Now(), nil // shutting down: the next start looks
		}
		b.log.Warn("autopilot look failed", slog.String("platform", platform), slog.String("user_id", userID), slog.Any("err", err))
	}
	return b.cfg.Now().Add(b.cfg.AutopilotEvery), nil
}

// The webhook below finds the people with autopilot on in an index kept
// beside their settings (SaveSettings): a setting per person, so that
// replicas turning autopilot on for two people at once lose neither
// (one list, read, changed and written back, lost one: issue 35).

// autopilotPersonPrefix starts the key of the setting ("on") that says
// a person ("platform:user id") has autopilot on; it is deleted when
// they turn it off.
const autopilotPersonPrefix = "autopilot-person:"

// legacyAutopilotPeople is the single setting that listed the people
// before the index had a setting per person; repairTimers rebuilds the
// index from the people's settings and deletes it.
const legacyAutopilotPeople = "autopilot-people"

// AutopilotPeople returns the people whose autopilot is on, as
// "platform:user id", in order.
func (b *Bot) AutopilotPeople(ctx context.Context) ([]string, error) {
	ls, ok := b.store.(SettingLister)
	if !ok {
		return nil, fmt.Errorf("bot: read autopilot people: the store lists no settings")
	}
	on, err := ls.SettingsWithPrefix(ctx, autopilotPersonPrefix)
	if err != nil {
		return nil, fmt.Errorf("bot: read autopilot people: %w", err)
	}
	people := make([]string, 0, len(on))
	for _, k := range slices.Sorted(maps.Keys(on)) {
		people = append(people, strings.TrimPrefix(k, autopilotPersonPrefix))
	}
	return people, nil
}

// indexAutopilot adds a person to the autopilot people, or removes them.
func (b *Bot) indexAutopilot(ctx context.Context, platform, userID string, on bool) error {
	v := "" // deletes
	if on {
		v = "on"
	}
	if err := b.store.SetSetting(ctx, autopilotPersonPrefix+PersonID(platform, userID), v); err != nil {
		return fmt.Errorf("bot: save autopilot people: %w", err)
	}
	return nil
}

// Todoist's webhooks (team mode) say that a task was added to some
// Todoist account, by the account's Todoist user id. The person it
// belongs to is learned: the first webhook of an unknown user id looks
// at every person with autopilot on, and the one whose look finds the
// task is recorded for that id (setting autopilotUserPrefix+id); later
// webhooks of the id look at that person only. A user id that matched
// nobody (a person without autopilot) is not searched again for
// unmatchedFor, per process: the timer's look covers them meanwhile.

// autopilotUserPrefix starts the key of the setting naming the person
// ("platform:user id") a Todoist user id belongs to.
const autopilotUserPrefix = "autopilot-todoist-user:"

// unmatchedFor is how long a Todoist user id that matched nobody is not
// searched for again.
const unmatchedFor = 10 * time.Minute

// AutopilotWebhook handles Todoist's item:added for taskID in the
// account of Todoist user todoistUserID: it looks at once at the inbox
// of the person it belongs to, if their autopilot is on.
func (b *Bot) AutopilotWebhook(ctx context.Context, todoistUserID, taskID string) error {
	if todoistUserID == "" {
		return nil
	}
	who, err := b.store.Setting(ctx, autopilotUserPrefix+todoistUserID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("bot: autopilot: read the person of Todoist user %s: %w", todoistUserID, err)
	}
	if who != "" {
		platform, userID := personOf(who)
		return b.Autopilot(ctx, platform, userID)
	}
	if b.autopilotLocks.unmatched(todoistUserID, b.cfg.Now()) {
		return nil
	}
	people, err := b.AutopilotPeople(ctx)
	if err != nil {
		return err
	}
	for _, who := range people {
		platform, userID := personOf(who)
		if err := b.Autopilot(ctx, platform, userID); err != nil {
			if errors.Is(err, ErrStopped) {
				return err
			}
			b.log.Warn("autopilot look failed", slog.String("platform", platform), slog.String("user_id", userID), slog.Any("err", err))
			continue
		}
		st, err := b.autopilotState(ctx, platform, userID)
		if err != nil {
			return err
		}
		if slices.Contains(st.Seen, taskID) {
			if err := b.store.SetSetting(ctx, autopilotUserPrefix+todoistUserID, who); err != nil {
				return fmt.Errorf("bot: autopilot: remember the person of Todoist user %s: %w", todoistUserID, err)
			}
			return nil
		}
	}
	b.autopilotLocks.noMatch(todoistUserID, b.cfg.Now())
	return nil
}
