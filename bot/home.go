package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// settingRow is one setting of /settings, as every place that shows the
// settings shows it: its one-press choices are Telegram's /settings
// keyboard (settingsButtons) and the controls of Slack's Home tab
// (home), and a choice is applied by applySettings as "NAME VALUE".
// A new setting is a new row.
type settingRow struct {
	// name is the NAME of "/settings NAME VALUE".
	name string
	// label names the setting for people.
	label string
	// value says the person's choice in words.
	value func(ps PersonSettings) string
	// choices are the values one press sets; none for a setting typed
	// (a time zone, a language).
	choices func(ps PersonSettings) []settingChoice
}

// settingChoice is one press's value of a setting.
type settingChoice struct {
	label, value string
}

// settingRows is every setting, in the order they are shown.
var settingRows = []settingRow{
	{name: "autopilot", label: "Autopilot",
		value: func(ps PersonSettings) string {
			if !ps.Autopilot {
				return "off"
			}
			if ps.AutopilotScope == "projects" {
				return "on (projects and sections only)"
			}
			return "on (project, section, labels, due date)"
		},
		choices: func(ps PersonSettings) []settingChoice {
			if ps.Autopilot {
				return []settingChoice{{"Turn autopilot off", "off"}}
			}
			return []settingChoice{{"Turn autopilot on", "on"}}
		}},
	{name: "digest", label: "Morning digest",
		value: func(ps PersonSettings) string {
			if hm, ok := digestOn(ps); ok {
				return hm
			}
			return "off"
		},
		choices: func(ps PersonSettings) []settingChoice {
			if _, ok := digestOn(ps); ok {
				return []settingChoice{{"No morning digest", "off"}}
			}
			return []settingChoice{{"Morning digest at 08:00", "08:00"}}
		}},
	{name: "confirm", label: "Confirm",
		value: func(ps PersonSettings) string {
			if ps.Confirm == "" {
				return "the bot's default"
			}
			return ps.Confirm + " (" + confirmLevels[ps.Confirm] + ")"
		},
		choices: func(ps PersonSettings) []settingChoice {
			var cs []settingChoice
			for _, lv := range []string{string(agent.ConfirmDestructive), string(agent.ConfirmWrites), string(agent.ConfirmNever)} {
				if lv != ps.Confirm {
					cs = append(cs, settingChoice{"Confirm " + confirmLevels[lv], lv})
				}
			}
			return cs
		}},
	{name: "timezone", label: "Time zone",
		value: func(ps PersonSettings) string {
			if ps.TimeZone == "" {
				return "Todoist's"
			}
			return ps.TimeZone
		},
		choices: func(PersonSettings) []settingChoice { return nil }},
	{name: "language", label: "Language",
		value: func(ps PersonSettings) string {
			if ps.Language == "" {
				return "the one you write in"
			}
			return ps.Language
		},
		choices: func(PersonSettings) []settingChoice { return nil }},
}

// Home is what a platform's settings page shows one person (Slack's App
// Home tab): built by the bot from settingRows, drawn by the platform.
type Home struct {
	// Allowed is false for a person the bot does not serve: the page
	// then says so (Notice) and shows no settings.
	Allowed bool
	// Notice comes first: what a press did, or why the person is not
	// served.
	Notice string
	// Settings are the person's settings with their controls.
	Settings []HomeSetting
	// Filings are autopilot's last filings that can be undone, newest
	// first (lastFilings), each with its Undo.
	Filings []HomeFiling
	// Typed says how to change a setting that has no button.
	Typed string
	// Account is the connected Todoist account in team mode; nil
	// otherwise.
	Account *HomeAccount
	// Usage is today's model tokens (against the daily cap, if any).
	Usage string
}

// HomeSetting is one setting on the Home.
type HomeSetting struct {
	Label, Value string
	// Buttons set it with one press; their Data is a HomePrefix press.
	Buttons []Button
}

// HomeFiling is one of autopilot's last filings on the Home.
type HomeFiling struct {
	// Text says when and what autopilot filed, as its message said.
	Text string
	// Undo reverts it: the chat's Undo of the run (undoButtonPrefix)
	// behind HomePrefix, so that a press goes to the same undo.
	Undo Button
}

// HomeAccount is the person's Todoist connection (team mode).
type HomeAccount struct {
	Connected bool
	// Text says the state and how to change it.
	Text string
	// Disconnect, when connected, disconnects it with one press;
	// Connect, when not, posts a Connect link in the person's DM.
	Disconnect, Connect *Button
}

// HomePublisher is a platform with a settings page of its own per
// person (Slack's App Home tab, views.publish).
type HomePublisher interface {
	PublishHome(ctx context.Context, userID string, h Home) error
}

// HomePrefix starts the data of the Home's buttons: "home:set:NAME:VALUE"
// applies /settings NAME VALUE; "home:disconnect" is /disconnect;
// "home:u:RUN" is the Undo of an autopilot filing.
const HomePrefix = "home:"

const (
	homeDisconnect = HomePrefix + "disconnect"
	homeConnect    = HomePrefix + "connect"
)

// OpenHome publishes a person's Home on platform (Slack's
// app_home_opened): their settings, or, for a person the bot does not
// serve, that it does not (teamID is their workspace, for slack:team:
// entries). It returns once the publish is queued (publishHome).
func (b *Bot) OpenHome(ctx context.Context, platform, userID, teamID string) error {
	in := Incoming{Platform: platform, UserID: userID, TeamID: teamID}
	return b.publishHome(ctx, in, "")
}

// pressHome handles a press on the Home: the change goes through
// applySettings (or /disconnect's Accounts.Disconnect), then the Home is
// published again, saying what the press did. A press seen before does
// nothing.
func (b *Bot) pressHome(ctx context.Context, in Incoming) error {
	if dup, err := b.seen(ctx, in); err != nil || dup {
		return err
	}
	if runID, ok := undoButton(in.Button); ok && strings.HasPrefix(in.Button, HomePrefix) {
		// The chat's Undo, pressed on the Home: the same undo, answered
		// on the Home (answerButtonLater). The press is marked seen
		// above: its job is this press's.
		in.EventID = ""
		// The connection is looked up once for the press: the Homes
		// its answer publishes show what it found (accountKnown).
		err := b.accountErr(ctx, in.Platform, in.UserID)
		ctx = accountKnown(ctx, in.Platform, in.UserID, err)
		if err != nil {
			return b.publishHome(ctx, in, "No Todoist is connected for you: there is nothing I can undo.")
		}
		return b.pressUndo(ctx, in, runID)
	}
	var said string
	switch {
	case in.Button == homeDisconnect && b.cfg.Accounts != nil:
		err := b.cfg.Accounts.Disconnect(ctx, in.Platform, in.UserID)
		switch {
		case errors.Is(err, ErrNotConnected):
			said = "No Todoist is connected for you."
		case err != nil:
			return fmt.Errorf("bot: disconnect %s:%s: %w", in.Platform, in.UserID, err)
		default:
			if err := b.store.SetSetting(ctx, promptedKey(in.Platform, in.UserID), ""); err != nil {
				b.log.Error("clear the Connect prompt's time", slog.Any("err", err))
			}
			said = "Disconnected: I revoked my access to your Todoist and deleted the token."
		}
	case in.Button == homeConnect && b.cfg.Accounts != nil:
		if !in.DM || in.ChatID == "" {
			said = "Send me " + b.commandName(in.Platform, "connect") + " in a direct message: I answer with a link that connects your Todoist."
			break
		}
		// The Connect flow of /connect: the link, bound to the person
		// and their DM, is posted there.
		b.promptConnect(ctx, in, "To connect your Todoist:")
		said = "I sent you a Connect link in our direct messages; it works for a few minutes."
	case strings.HasPrefix(in.Button, HomePrefix+settingButton):
		name, value, ok := settingOf(in.Button)
		if !ok {
			said = "I don't know that button."
			break
		}
		_, done, bad, err := b.applySettings(ctx, in.Platform, in.UserID, "", name+" "+value)
		if err != nil {
			return err
		}
		said = "✓ " + done
		if bad != "" {
			said = bad
		}
	default:
		said = "I don't know that button."
	}
	return b.publishHome(ctx, in, said)
}

// publishHome queues the build and publish of in's person's Home on
// the platform's send queue, without waiting: the platform's request
// (Slack's app_home_opened or a press, to be acknowledged within 3
// seconds) is answered at once, and the Home is read from the store
// and published after, in the order queued (a press's "Undoing…"
// before the undo's report), the queue waiting out a 429. A build or
// publish that fails is logged (the queue's "send" error); a full or
// stopped queue drops it, logged, as a reply. An error means the
// platform has no Home.
func (b *Bot) publishHome(ctx context.Context, in Incoming, notice string) error {
	q := b.queue(in.Platform)
	if q == nil {
		return fmt.Errorf("bot: no platform %q", in.Platform)
	}
	hp, ok := q.p.(HomePublisher)
	if !ok {
		return fmt.Errorf("bot: %s has no Home", in.Platform)
	}
	// A connection already looked up for this press goes with the build.
	known, _ := ctx.Value(accountKey{}).(*accountLookup)
	// One lane per person: their Homes are published in order.
	q.s.Post(HomePrefix+in.UserID, "publish the Home", func(ctx context.Context) error {
		if known != nil {
			ctx = context.WithValue(ctx, accountKey{}, known)
		}
		h, err := b.home(ctx, in, notice)
		if err != nil {
			return fmt.Errorf("bot: build the Home of %s:%s: %w", in.Platform, in.UserID, err)
		}
		if err := hp.PublishHome(ctx, in.UserID, h); err != nil {
			return fmt.Errorf("bot: publish the Home of %s:%s: %w", in.Platform, in.UserID, err)
		}
		return nil
	})
	return nil
}

// home is in's person's Home, from settingRows and the model tiers.
func (b *Bot) home(ctx context.Context, in Incoming, notice string) (Home, error) {
	if !b.allowedIn(in) {
		return Home{Notice: fmt.Sprintf("Sorry, I only work for the people my owner allowed. Your id is %s; ask the owner to add it to TIDYBOT_ALLOWED_USERS.",
			PersonID(in.Platform, in.UserID))}, nil
	}
	ps, err := b.Settings(ctx, in.Platform, in.UserID)
	if err != nil {
		return Home{}, err
	}
	h := Home{Allowed: true, Notice: notice}
	for _, row := range settingRows {
		s := HomeSetting{Label: row.label, Value: row.value(ps)}
		for _, c := range row.choices(ps) {
			s.Buttons = append(s.Buttons, Button{Label: c.label, Data: HomePrefix + settingData(row.name, c.value)})
		}
		h.Settings = append(h.Settings, s)
	}
	if v, ok := b.modelValue(ps); ok { // the tiers, as /settings offers them
		s := HomeSetting{Label: "Model", Value: v}
		for _, bt := range b.modelButtons(ps) {
			s.Buttons = append(s.Buttons, Button{Label: bt.Label, Data: HomePrefix + bt.Data})
		}
		h.Settings = append(h.Settings, s)
	}
	cmd := b.commandName(in.Platform, "settings")
	h.Typed = fmt.Sprintf("Set the others in a message to me: %[1]s timezone Europe/Amsterdam, %[1]s language Dutch, %[1]s digest 07:30, %[1]s autopilot scope projects.", cmd)
	if b.cfg.Accounts != nil {
		h.Account = b.homeAccount(ctx, in)
	}
	if h.Account == nil || h.Account.Connected {
		fs, err := b.lastFilings(ctx, in.Platform, in.UserID, ps)
		if err != nil {
			return Home{}, err
		}
		for _, f := range fs {
			h.Filings = append(h.Filings, HomeFiling{Text: f.Text, Undo: Button{Label: "↩️ Undo", Data: HomePrefix + undoButtonPrefix + f.RunID}})
		}
	}
	day := b.personUsage(ctx, in.Platform, in.UserID, b.cfg.Now())
	h.Usage = fmt.Sprintf("Today you used %s.", plural(day, "model token"))
	if b.cfg.UserDailyTokens > 0 {
		h.Usage = fmt.Sprintf("Today you used %d of your %d model tokens.", day, b.cfg.UserDailyTokens)
	}
	return h, nil
}

// accountLookup is what looking up a person's Todoist connection found
// (err nil: connected), carried by a context so that one press (a Home
// Undo, its job's report) looks it up once.
type accountLookup struct {
	person string
	err    error
}

type accountKey struct{}

// accountKnown returns ctx carrying what looking up the connection of
// platform's userID found.
func accountKnown(ctx context.Context, platform, userID string, err error) context.Context {
	return context.WithValue(ctx, accountKey{}, &accountLookup{person: PersonID(platform, userID), err: err})
}

// accountErr is nil when platform's userID has a Todoist to work in
// (always outside team mode), else why not (ErrNotConnected, or the
// lookup's failure): what ctx carries for them (accountKnown), else
// looked up.
func (b *Bot) accountErr(ctx context.Context, platform, userID string) error {
	if b.cfg.Accounts == nil {
		return nil
	}
	if k, ok := ctx.Value(accountKey{}).(*accountLookup); ok && k.person == PersonID(platform, userID) {
		return k.err
	}
	_, err := b.cfg.Accounts.Agent(ctx, platform, userID)
	return err
}

// Filing is one of autopilot's filings that can be undone.
type Filing struct {
	// RunID is the autopilot run that filed.
	RunID string
	// Text says when and what it filed: its message, after the time.
	Text string
}

const (
	// shownFilings bounds the filings the settings show: with two
	// blocks each, well within a Home's 100 blocks.
	shownFilings = 5
	// filingJournals bounds the journals read for them: those of the
	// person's newest ended autopilot runs not undone. A settings page
	// (each /settings, each Home publish) reads at most this many, not
	// one per run of a DM that holds thousands; an autopilot run has
	// tasks to file, so most of those runs filed something.
	filingJournals = 3 * shownFilings
)

// lastFilings are the person's last autopilot filings (up to
// shownFilings, newest first): autopilot runs of their conversation
// that ended, are not undone, and wrote something Undo can revert
// (undoable, as for the Undo under their message), among the newest
// filingJournals such runs (one read of the runs, at most
// filingJournals of journals). Whether
// a press may undo one now (a later run changed things since) is undo's
// to say, as for the chat's Undo.
func (b *Bot) lastFilings(ctx context.Context, platform, userID string, ps PersonSettings) ([]Filing, error) {
	if ps.Conversation == "" {
		return nil, nil
	}
	runs, err := b.store.ThreadRuns(ctx, ps.Conversation)
	if err != nil {
		return nil, fmt.Errorf("bot: list runs of %s: %w", ps.Conversation, err)
	}
	loc := time.UTC
	if l, err := time.LoadLocation(ps.TimeZone); err == nil && ps.TimeZone != "" {
		loc = l
	}
	var out []Filing
	for i, read := len(runs)-1, 0; i >= 0 && read < filingJournals && len(out) < shownFilings; i-- {
		r := runs[i]
		if !r.Autopilot || r.Platform != platform || r.UserID != userID || r.Undone || !r.Status.Final() {
			continue
		}
		read++
		entries, err := b.store.RunAudit(ctx, r.ID)
		if err != nil {
			return nil, fmt.Errorf("bot: read journal of %s: %w", r.ID, err)
		}
		if !undoable(appliedOf(entries)) {
			continue
		}
		out = append(out, Filing{RunID: r.ID, Text: r.Created.In(loc).Format("Mon 2 Jan 15:04 MST") + ": " + strings.TrimPrefix(r.Answer, "🤖 ")})
	}
	return out, nil
}

// homeAccount is the person's Todoist connection (team mode).
func (b *Bot) homeAccount(ctx context.Context, in Incoming) *HomeAccount {
	connect := b.commandName(in.Platform, "connect")
	err := b.accountErr(ctx, in.Platform, in.UserID)
	switch {
	case err == nil:
		return &HomeAccount{Connected: true, Text: "Your Todoist is connected.",
			Disconnect: &Button{Label: "Disconnect Todoist", Data: homeDisconnect}}
	case errors.Is(err, ErrNotConnected):
		return &HomeAccount{Text: "No Todoist is connected. Connect Todoist posts a link in our direct messages (as " + connect + " does) that connects yours.",
			Connect: &Button{Label: "Connect Todoist", Data: homeConnect}}
	default:
		b.log.Error("read the Todoist connection", slog.String("platform", in.Platform), slog.String("user_id", in.UserID), slog.Any("err", err))
		return &HomeAccount{Text: "I cannot tell whether your Todoist is connected right now."}
	}
}
