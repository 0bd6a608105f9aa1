package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// The periodic trigger of the autopilot: every TIDYBOT_AUTOPILOT_INTERVAL
// it looks at the inbox of every person with autopilot on (Autopilot),
// the safety net behind Todoist's webhooks, which may be late or lost.
// It is in memory: several replicas each look (a look is one small
// incremental /sync; see autopilotLocks for what two at once do).

// autopilotPeopleKey is the setting listing, as JSON, the people
// ("platform:user id") whose autopilot is on; SaveSettings keeps it.
const autopilotPeopleKey = "autopilot-people"

// AutopilotPeople returns the people whose autopilot is on, as
// "platform:user id".
func (b *Bot) AutopilotPeople(ctx context.Context) ([]string, error) {
	raw, err := b.store.Setting(ctx, autopilotPeopleKey)
	if errors.Is(err, ErrNotFound) || (err == nil && raw == "") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bot: read autopilot people: %w", err)
	}
	var people []string
	if err := json.Unmarshal([]byte(raw), &people); err != nil {
		return nil, fmt.Errorf("bot: decode autopilot people: %w", err)
	}
	return people, nil
}

// indexAutopilot adds a person to the autopilot people, or removes them.
func (b *Bot) indexAutopilot(ctx context.Context, platform, userID string, on bool) error {
	b.autopilotLocks.mu.Lock()
	defer b.autopilotLocks.mu.Unlock()
	people, err := b.AutopilotPeople(ctx)
	if err != nil {
		return err
	}
	who := platform + ":" + userID
	if on == slices.Contains(people, who) {
		return nil
	}
	if on {
		people = append(people, who)
	} else {
		people = slices.DeleteFunc(people, func(p string) bool { return p == who })
	}
	raw, err := json.Marshal(people)
	if err != nil {
		return fmt.Errorf("bot: encode autopilot people: %w", err)
	}
	if err := b.store.SetSetting(ctx, autopilotPeopleKey, string(raw)); err != nil {
		return fmt.Errorf("bot: save autopilot people: %w", err)
	}
	return nil
}

// AutopilotAll looks once at the inbox of every person with autopilot
// on; a failure for one is logged and the others are looked at.
func (b *Bot) AutopilotAll(ctx context.Context) error {
	people, err := b.AutopilotPeople(ctx)
	if err != nil {
		return err
	}
	for _, who := range people {
		platform, userID, _ := strings.Cut(who, ":")
		if err := b.Autopilot(ctx, platform, userID); err != nil {
			if errors.Is(err, ErrStopped) {
				return err
			}
			b.log.Warn("autopilot look failed", slog.String("platform", platform), slog.String("user_id", userID), slog.Any("err", err))
		}
	}
	return nil
}

// AutopilotLoop calls AutopilotAll at every tick until ctx ends or the
// bot stops. cmd/tidybot passes a time.Ticker's channel at
// TIDYBOT_AUTOPILOT_INTERVAL; a test sends the ticks itself.
func (b *Bot) AutopilotLoop(ctx context.Context, ticks <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.quit:
			return
		case <-ticks:
			if err := b.AutopilotAll(ctx); err != nil && !errors.Is(err, ErrStopped) {
				b.log.Warn("autopilot", slog.Any("err", err))
			}
			if b.cfg.autopilotPassed != nil {
				b.cfg.autopilotPassed()
			}
		}
	}
}

// Todoist's webhooks (team mode) say that a task was added to some
// Todoist account, by the account's Todoist user id. The person it
// belongs to is learned: the first webhook of an unknown user id looks
// at every person with autopilot on, and the one whose look finds the
// task is recorded for that id (setting autopilotUserPrefix+id); later
// webhooks of the id look at that person only. A user id that matched
// nobody (a person without autopilot) is not searched again for
// unmatchedFor, per process: the periodic look covers them meanwhile.

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
		platform, userID, _ := strings.Cut(who, ":")
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
		platform, userID, _ := strings.Cut(who, ":")
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
