package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // /settings timezone works where the system has no zoneinfo (a scratch container)
	"unicode"

	"github.com/tidybot/tidybot/agent"
)

// Reader is an Agent that reads a person's Todoist without a model call
// (*agent.Engine): their time zone (the default of /settings timezone)
// and the snapshot the morning digest is made of.
type Reader interface {
	// TimeZone returns the time zone of the person's Todoist account.
	TimeZone(ctx context.Context) (*time.Location, error)
	// Snapshot reads their projects and open tasks.
	Snapshot(ctx context.Context) (agent.Snapshot, error)
}

// Confirmation levels of /settings confirm (agent.ConfirmPolicy).
var confirmLevels = map[string]string{
	string(agent.ConfirmDestructive): "before deleting",
	string(agent.ConfirmWrites):      "before every change",
	string(agent.ConfirmNever):       "never",
}

// settingButton starts the data of a /settings button (settingData).
const settingButton = "set:"

// settingData is the data of the button that applies /settings NAME
// VALUE: "set:NAME:VALUE", behind HomePrefix on the Home.
func settingData(name, value string) string { return settingButton + name + ":" + value }

// settingOf reads a settingData back (after HomePrefix, if any); ok is
// false for other data.
func settingOf(data string) (name, value string, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(data, HomePrefix), settingButton)
	if !ok {
		return "", "", false
	}
	name, value, ok = strings.Cut(rest, ":")
	return name, value, ok && name != ""
}

// settingsUsage says how each setting is changed; %s is the command as
// typed on the platform ("/settings", "/tidy settings").
const settingsUsage = `Change one by typing it:
%[1]s timezone Europe/Amsterdam (or default: Todoist's)
%[1]s confirm destructive|writes|never
%[1]s autopilot on|off
%[1]s autopilot scope all|projects
%[1]s digest 08:00|off
%[1]s language Dutch (or default: the language you write in)`

// settingsCmd answers /settings: with no argument it shows the
// person's settings with buttons; "/settings NAME VALUE" changes one. A
// bad name or value changes nothing and says what would work.
func (b *Bot) settingsCmd(ctx context.Context, jobID string, in Incoming) error {
	conversation := ""
	if in.DM {
		conversation = in.ThreadKey()
	}
	ps, said, bad, err := b.applySettings(ctx, in.Platform, in.UserID, conversation, in.Text)
	if err != nil {
		return err
	}
	if bad != "" {
		b.replyLater(ctx, in.Platform, reply(in, bad+"\n\n"+fmt.Sprintf(settingsUsage, b.commandName(in.Platform, "settings"))))
		return nil
	}
	m := reply(in, b.settingsView(ctx, in.Platform, in.UserID, ps, said))
	m.Buttons = append(settingsButtons(ps), b.modelButtons(ps)...)
	if in.Button != "" && in.MessageID != "" {
		// A press: the settings message shows the new settings.
		if p, err := b.platform(in.Platform); err == nil {
			if ed, ok := p.(Editor); ok {
				if err := ed.Edit(ctx, in.MessageID, m); err == nil {
					return nil
				}
			}
		}
	}
	b.replyLater(ctx, in.Platform, m)
	return nil
}

// applySettings is the one place a person's settings change, whether
// they typed "/settings NAME VALUE", pressed a /settings button or a
// control of Slack's Home tab: it applies args ("NAME VALUE"; none
// changes nothing) to their stored settings, stores what changed and
// acts on it (timers). conversation, when not empty, becomes where
// autopilot and the digest post to them. It returns the settings as they
// are now and what it did in words, or why it cannot (bad), having
// changed nothing.
func (b *Bot) applySettings(ctx context.Context, platform, userID, conversation, args string) (ps PersonSettings, said, bad string, err error) {
	old, err := b.Settings(ctx, platform, userID)
	if err != nil {
		return old, "", "", err
	}
	ps = old
	if conversation != "" {
		ps.Conversation = conversation
	}
	if words := strings.Fields(args); len(words) > 0 {
		if name := strings.ToLower(words[0]); name == "model" || name == "tier" {
			said, bad = b.changeModel(&ps, strings.Join(words[1:], " "))
		} else {
			said, bad = changeSetting(&ps, name, strings.Join(words[1:], " "))
		}
		if bad != "" {
			return old, "", bad, nil
		}
	}
	if ps != old {
		if err := b.changeSettings(ctx, platform, userID, old, ps); err != nil {
			return old, "", "", err
		}
		if err := b.settingsChanged(ctx, platform, userID, old, ps); err != nil {
			return old, "", "", err
		}
	}
	return ps, said, "", nil
}

// changeSetting applies "NAME VALUE" to ps and returns what it did, in
// words, or why it cannot (bad), having changed nothing.
func changeSetting(ps *PersonSettings, name, value string) (said, bad string) {
	lower := strings.ToLower(strings.TrimSpace(value))
	reset := lower == "default" || lower == "auto" || lower == "reset"
	switch name {
	case "timezone", "tz", "zone", "time-zone", "time_zone":
		if reset {
			ps.TimeZone = ""
			return "Time zone: Todoist's from now on.", ""
		}
		if value == "" || strings.EqualFold(value, "local") {
			return "", "Which time zone? Give its name, such as Europe/Amsterdam or America/New_York."
		}
		loc, err := time.LoadLocation(strings.TrimSpace(value))
		if err != nil || strings.Contains(value, "..") {
			return "", fmt.Sprintf("I don't know the time zone %q. Use a name such as Europe/Amsterdam or America/New_York.", value)
		}
		ps.TimeZone = loc.String()
		return "Time zone: " + ps.TimeZone + ".", ""
	case "confirm", "confirmation", "confirmations":
		if reset {
			ps.Confirm = ""
			return "Confirmations: the bot's default.", ""
		}
		if _, ok := confirmLevels[lower]; !ok {
			return "", fmt.Sprintf("Confirm is destructive (ask before deleting), writes (ask before every change) or never, not %q.", value)
		}
		ps.Confirm = lower
		return "I'll ask " + confirmLevels[lower] + ".", ""
	case "autopilot":
		scope, rest, _ := strings.Cut(lower, " ")
		switch {
		case lower == "on":
			ps.Autopilot = true
			return "Autopilot is on: I file new inbox tasks as they come in and tell you what I did.", ""
		case lower == "off":
			ps.Autopilot = false
			return "Autopilot is off.", ""
		case scope == "scope":
			return changeSetting(ps, "scope", rest)
		}
		return "", fmt.Sprintf("Autopilot is on or off, not %q.", value)
	case "scope", "autopilot-scope", "autopilot_scope":
		switch lower {
		case "all", "default":
			ps.AutopilotScope = ""
			return "Autopilot may set project, section, labels and a due date the text names.", ""
		case "projects":
			ps.AutopilotScope = "projects"
			return "Autopilot only files tasks into projects and sections.", ""
		}
		return "", fmt.Sprintf("Autopilot's scope is all (project, section, labels, due date) or projects, not %q.", value)
	case "digest":
		if lower == "off" || lower == "none" || lower == "no" {
			ps.Digest = "off"
			return "No morning digest.", ""
		}
		hm, ok := parseClock(lower)
		if !ok {
			return "", fmt.Sprintf("The digest time is a time of day such as 08:00 (24 hours), or off; not %q.", value)
		}
		ps.Digest = hm
		return "Morning digest at " + hm + ".", ""
	case "language", "lang":
		if reset || lower == "" {
			ps.Language = ""
			return "I answer in the language you write in.", ""
		}
		if !languageName(value) {
			return "", fmt.Sprintf("A language is a name such as Dutch or Deutsch (letters only, up to 30), not %q.", value)
		}
		ps.Language = strings.TrimSpace(value)
		return "I answer in " + ps.Language + ".", ""
	case "":
		return "", "Which setting?"
	}
	return "", fmt.Sprintf("I don't know the setting %q.", name)
}

// parseClock reads a 24-hour time of day ("8:00", "08:30", "8") as
// "HH:MM".
func parseClock(s string) (string, bool) {
	h, m, found := strings.Cut(s, ":")
	if !found {
		m = "00"
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || len(h) > 2 || len(m) != 2 || hh < 0 || hh > 23 || mm < 0 || mm > 59 {
		return "", false
	}
	return fmt.Sprintf("%02d:%02d", hh, mm), true
}

// languageName reports whether s may be a language's name: it goes into
// the model's prompt, so letters, spaces and hyphens only.
func languageName(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" || len([]rune(s)) > 30 {
		return false
	}
	for _, r := range s {
		if !unicode.IsLetter(r) && r != ' ' && r != '-' {
			return false
		}
	}
	return true
}

// digestOn reports whether ps asks for a digest, and at what time.
func digestOn(ps PersonSettings) (string, bool) {
	return parseClock(ps.Digest)
}

// settingsView shows ps; said (if any) comes first.
func (b *Bot) settingsView(ctx context.Context, platform, userID string, ps PersonSettings, said string) string {
	var sb strings.Builder
	if said != "" {
		sb.WriteString("✓ " + said + "\n\n")
	}
	sb.WriteString("Your settings:\n")
	for _, row := range settingRows {
		value := row.value(ps)
		if row.name == "timezone" && ps.TimeZone == "" {
			if loc, err := b.todoistZone(ctx, platform, userID); err == nil {
				value += " (" + loc.String() + ")"
			}
		}
		fmt.Fprintf(&sb, "• %s: %s\n", row.label, value)
		if row.name == "autopilot" {
			sb.WriteString(b.filingLines(ctx, platform, userID, ps))
		}
	}
	row, usage := b.modelLine(ps, b.commandName(platform, "settings"))
	sb.WriteString(row + "\n" + fmt.Sprintf(settingsUsage, b.commandName(platform, "settings")) + usage)
	return sb.String()
}

// filingLines are autopilot's last filings (lastFilings, as Slack's
// Home shows them) under its setting, and where each is undone: its
// message's Undo (the Home has one per filing too; this message does
// not, as the Undo of a message reverts that message's run). "" for
// none.
func (b *Bot) filingLines(ctx context.Context, platform, userID string, ps PersonSettings) string {
	fs, err := b.lastFilings(ctx, platform, userID, ps)
	if err != nil {
		b.log.Warn("read autopilot's last filings", slog.String("platform", platform), slog.String("user_id", userID), slog.Any("err", err))
		return ""
	}
	if len(fs) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString("  Its last filings (↩️ Undo under a filing's message puts it back):\n")
	for _, f := range fs {
		sb.WriteString("  ◦ " + strings.ReplaceAll(f.Text, "\n", "\n    ") + "\n")
	}
	return sb.String()
}

// settingsButtons are the one-press changes under the settings: the
// choices of settingRows, as Telegram's keyboard and Slack's message
// show them.
func settingsButtons(ps PersonSettings) []Button {
	var bs []Button
	for _, row := range settingRows {
		for _, c := range row.choices(ps) {
			bs = append(bs, Button{Label: c.label, Data: settingData(row.name, c.value), Command: "settings"})
		}
	}
	return bs
}

// pressSetting turns a settings button into /settings NAME VALUE, a
// job in the presser's conversation: it changes the presser's own
// settings, whoever was shown them.
func (b *Bot) pressSetting(ctx context.Context, in Incoming, _ string) error {
	name, value, ok := settingOf(in.Button)
	if !ok {
		b.answerButtonLater(ctx, in, "I don't know that button.")
		return nil
	}
	b.answerButtonLater(ctx, in, "")
	in.Command, in.Text = "settings", name+" "+value
	return b.enqueue(ctx, in)
}

// settingsChanged acts on a change of a person's settings: the digest
// timer follows the digest time and the time zone, and any other change
// sets it again if it is gone (as SaveSettings does autopilot's).
func (b *Bot) settingsChanged(ctx context.Context, platform, userID string, old, ps PersonSettings) error {
	if old.Digest == ps.Digest && old.TimeZone == ps.TimeZone {
		return b.repairDigest(ctx, platform, userID, ps)
	}
	return b.scheduleDigest(ctx, platform, userID, ps)
}

// todoistZone is the time zone of the person's Todoist account.
func (b *Bot) todoistZone(ctx context.Context, platform, userID string) (*time.Location, error) {
	ag, err := b.agentFor(ctx, platform, userID)
	if err != nil {
		return nil, err
	}
	r, ok := ag.(Reader)
	if !ok {
		return nil, errors.New("bot: the agent reads no time zone")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return r.TimeZone(ctx)
}

// zone is the person's time zone: their setting, else Todoist's, else
// UTC (logged).
func (b *Bot) zone(ctx context.Context, platform, userID string, ps PersonSettings) *time.Location {
	if ps.TimeZone != "" {
		if loc, err := time.LoadLocation(ps.TimeZone); err == nil {
			return loc
		}
	}
	loc, err := b.todoistZone(ctx, platform, userID)
	if err != nil || loc == nil {
		b.log.Warn("time zone unknown; using UTC", slog.String("platform", platform), slog.String("user_id", userID), slog.Any("err", err))
		return time.UTC
	}
	return loc
}
