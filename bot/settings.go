package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// PersonSettings is what one person chose with /settings (issue 27). A
// zero field means "the default": the environment's setting, or
// Todoist's own (the time zone from the account's tz_info).
type PersonSettings struct {
	// TimeZone is an IANA name (Europe/Amsterdam); empty: Todoist's.
	TimeZone string `json:"tz,omitempty"`
	// Confirm is when a write needs a yes: "destructive", "writes" or
	// "never"; empty: the bot's configured default.
	Confirm string `json:"confirm,omitempty"`
	// Autopilot files new inbox tasks without being asked.
	Autopilot bool `json:"autopilot,omitempty"`
	// AutopilotScope limits what autopilot may set: "all" (project,
	// section, labels, due date from the text) or "projects"; empty:
	// "all".
	AutopilotScope string `json:"autopilot_scope,omitempty"`
	// Digest is the morning digest's local time, "08:00", or "off";
	// empty: off.
	Digest string `json:"digest,omitempty"`
	// Language answers in this language (a name or BCP 47 tag); empty:
	// the language the person writes in.
	Language string `json:"lang,omitempty"`
	// ModelTier names one of TIDYBOT_MODELS's tiers; empty: the first.
	ModelTier string `json:"model_tier,omitempty"`
	// Conversation is where autopilot and the digest post for this
	// person: the thread key of the conversation they last used in
	// private (set by the bot, not by /settings).
	Conversation string `json:"conversation,omitempty"`
}

// PersonSettingPrefix starts the key of the setting holding a person's
// PersonSettings as JSON.
const PersonSettingPrefix = "person:"

// SettingLister lists settings by the start of their key. The bbolt and
// PostgreSQL stores implement it; the bot uses it, when its Store does,
// to find at start the people whose timers it repairs (repairTimers).
type SettingLister interface {
	// SettingsWithPrefix returns the settings whose key starts with
	// prefix, by key; none is an empty map, not an error.
	SettingsWithPrefix(ctx context.Context, prefix string) (map[string]string, error)
}

func personKey(platform, userID string) string {
	return PersonSettingPrefix + PersonID(platform, userID)
}

// conversationFields is a Change's Fields recording in's conversation
// as PersonSettings.Conversation of its person.
func conversationFields(in Incoming) map[string]map[string]json.RawMessage {
	v, _ := json.Marshal(in.ThreadKey()) // a string always encodes
	return map[string]map[string]json.RawMessage{personKey(in.Platform, in.UserID): {"conversation": v}}
}

// Settings returns a person's settings; zero when they set none.
func (b *Bot) Settings(ctx context.Context, platform, userID string) (PersonSettings, error) {
	raw, err := b.store.Setting(ctx, personKey(platform, userID))
	if errors.Is(err, ErrNotFound) {
		raw, err = "", nil
	}
	if err != nil {
		return PersonSettings{}, fmt.Errorf("bot: read settings of %s:%s: %w", platform, userID, err)
	}
	return decodeSettings(platform, userID, raw)
}

// decodeSettings returns a person's settings stored as raw ("" for
// none: zero).
func decodeSettings(platform, userID, raw string) (PersonSettings, error) {
	var ps PersonSettings
	if raw == "" {
		return ps, nil
	}
	if err := json.Unmarshal([]byte(raw), &ps); err != nil {
		return ps, fmt.Errorf("bot: decode settings of %s:%s: %w", platform, userID, err)
	}
	return ps, nil
}

// SaveSettings stores a person's settings, replacing what was stored.
func (b *Bot) SaveSettings(ctx context.Context, platform, userID string, ps PersonSettings) error {
	raw, err := json.Marshal(ps)
	if err != nil {
		return fmt.Errorf("bot: encode settings of %s:%s: %w", platform, userID, err)
	}
	return b.withAutopilot(ctx, platform, userID, ps.Autopilot, func() error {
		if err := b.store.SetSetting(ctx, personKey(platform, userID), string(raw)); err != nil {
			return fmt.Errorf("bot: save settings of %s:%s: %w", platform, userID, err)
		}
		return nil
	})
}

// changeSettings stores the fields in which ps differs from old (the
// settings as read before they were changed), each on its own in one
// transaction (Change.Fields): a field another replica changed meanwhile
// is kept, as a whole record written back would lose it (issue 35).
func (b *Bot) changeSettings(ctx context.Context, platform, userID string, old, ps PersonSettings) error {
	fields, err := changedFields(old, ps)
	if err != nil {
		return fmt.Errorf("bot: encode settings of %s:%s: %w", platform, userID, err)
	}
	return b.withAutopilot(ctx, platform, userID, ps.Autopilot, func() error {
		if len(fields) == 0 {
			return nil
		}
		c := Change{Fields: map[string]map[string]json.RawMessage{personKey(platform, userID): fields}}
		if err := b.store.Commit(ctx, c); err != nil {
			return fmt.Errorf("bot: save settings of %s:%s: %w", platform, userID, err)
		}
		return nil
	})
}

// withAutopilot stores a person's settings (save) and makes autopilot's
// timer and index follow them (on), in the one order that makes a stop
// final once it is stored: autopilot on is stored first, then armed (a
// timer that fires before sees it off and ends itself); autopilot off
// is disarmed first (timer and index deleted), then stored, so that a
// timer pass or a webhook that begins once the setting reads off finds
// nothing to run. A pass that claimed the timer before reads the
// setting as its look begins (autopilotTimer), and its end does not set
// the deleted timer again (FinishTimer).
func (b *Bot) withAutopilot(ctx context.Context, platform, userID string, on bool, save func() error) error {
	if on {
		if err := save(); err != nil {
			return err
		}
		return b.followAutopilot(ctx, platform, userID, true)
	}
	if err := b.followAutopilot(ctx, platform, userID, false); err != nil {
		return err
	}
	return save()
}

// followAutopilot makes the autopilot's timer and its index follow the
// setting: the webhook finds the people to look at in the index.
func (b *Bot) followAutopilot(ctx context.Context, platform, userID string, on bool) error {
	if err := b.armAutopilot(ctx, platform, userID, on); err != nil {
		return err
	}
	return b.indexAutopilot(ctx, platform, userID, on)
}

// changedFields returns the JSON fields of ps that differ from old's;
// one ps leaves out (its zero value) is null, which decodes as zero.
func changedFields(old, ps PersonSettings) (map[string]json.RawMessage, error) {
	var was, now map[string]json.RawMessage
	for _, x := range []struct {
		v   PersonSettings
		out *map[string]json.RawMessage
	}{{old, &was}, {ps, &now}} {
		raw, err := json.Marshal(x.v)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, x.out); err != nil {
			return nil, err
		}
	}
	fields := map[string]json.RawMessage{}
	for name, v := range now {
		if !bytes.Equal(was[name], v) {
			fields[name] = v
		}
	}
	for name := range was {
		if _, ok := now[name]; !ok {
			fields[name] = json.RawMessage("null")
		}
	}
	return fields, nil
}
