package agent

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// LanguageMessage is the system message that sets the language of a
// run's answers (Input.Language). The name is the person's own setting,
// checked by the bot: letters, spaces and hyphens only.
func LanguageMessage(lang string) string {
	msg := "Always answer in " + strings.TrimSpace(lang) + ", whatever language the tasks are written in."
	if !english(lang) {
		// tidybot's own report of the writes is in English: a
		// final_answer without answer would be refused (a call more).
		msg += " Always give final_answer's answer."
	}
	return msg + "\n"
}

// TimeZone returns the user's time zone as the to-do service knows it
// (Todoist's tz_info), or UTC when it does not say.
func (e *Engine) TimeZone(ctx context.Context) (*time.Location, error) {
	tz, ok := e.tasks.(TimeZoner)
	if !ok {
		return time.UTC, nil
	}
	loc, err := tz.TimeZone(ctx)
	if err != nil {
		return nil, fmt.Errorf("agent: read the time zone: %w", err)
	}
	if loc == nil {
		return time.UTC, nil
	}
	return loc, nil
}

// Snapshot reads the user's projects and open tasks without a model
// call: one request (an incremental /sync on the Todoist client after
// the first). The bot's morning digest is made from it.
func (e *Engine) Snapshot(ctx context.Context) (Snapshot, error) {
	snap, err := e.tasks.Snapshot(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("agent: read the account: %w", err)
	}
	return snap, nil
}

// now is the current time in the run's own time zone (Input.TimeZone)
// when it has one, else as Engine.now reads it.
func (r *runner) now(ctx context.Context) time.Time {
	if r.tr.TimeZone != "" {
		if loc, err := time.LoadLocation(r.tr.TimeZone); err == nil {
			return r.e.cfg.Now().In(loc)
		}
	}
	return r.e.now(ctx)
}
