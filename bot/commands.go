package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Command is one of the bot's commands: the one place that says what
// it is called, what it does and how it is handled. Adapters read their
// command words from LookupCommand; /help, Telegram's command menu
// (setMyCommands and deploy/telegram-commands.txt) and the Slack
// manifest's /tidy words are generated from Commands.
type Command struct {
	// Name is the command as the bot knows it ("tidy-inbox"); a platform
	// may spell it otherwise (CommandNamer: Telegram's "/tidy_inbox").
	Name string
	// Aliases are other words that mean it ("start", Telegram's greeting,
	// is help; "inbox" is tidy-inbox after Slack's /tidy).
	Aliases []string
	// Help is its one line in /help and, capitalised, in a platform's
	// command menu.
	Help string
	// Todoist says it acts on the person's Todoist: in team mode a
	// person who has not connected one is asked to first.
	Todoist bool
	// Queued says it waits its turn in the conversation as a durable
	// job (a worker handles it, after any run there); otherwise it is
	// answered at once, while a run may be working.
	Queued bool
	// TeamOnly says it exists only in team mode (TODOIST_CLIENT_ID): in
	// personal mode it is an unknown command.
	TeamOnly bool
	// Thread says it acts on one conversation: a Slack slash command in
	// a channel, which carries no thread, acts on the person's latest
	// conversation there.
	Thread bool
	// Bare says a direct chat may type the word alone ("undo").
	Bare bool
	// handle does it; jobID is the job of a Queued command ("" for one
	// answered at once), to retire with what it stores.
	handle func(b *Bot, ctx context.Context, jobID string, in Incoming) error
}

// commands is every command, in the order /help and the menus list them
// (set in init: the handlers read it back, for /help).
var commands []Command

func init() {
	commands = []Command{
		{Name: "tidy-inbox", Aliases: []string{"tidy_inbox", "inbox"}, Help: "sort the inbox into projects", Todoist: true, Queued: true,
			handle: func(b *Bot, ctx context.Context, jobID string, in Incoming) error {
				return b.startRun(ctx, jobID, in, TidyInboxInstruction)
			}},
		{Name: "undo", Help: "revert the last run's changes", Todoist: true, Queued: true, Thread: true, Bare: true, handle: (*Bot).undo},
		{Name: "cancel", Help: "stop the current run", Thread: true, Bare: true, handle: now((*Bot).cancel)},
		{Name: "reset", Help: "forget this conversation", Todoist: true, Queued: true, Thread: true, Bare: true, handle: (*Bot).reset},
		{Name: "usage", Help: "tokens used here", Thread: true, Bare: true, handle: now((*Bot).usage)},
		{Name: "settings", Help: "your time zone, confirmations, autopilot, morning digest and language", Todoist: true, Queued: true, Bare: true, handle: (*Bot).settingsCmd},
		{Name: "help", Aliases: []string{"start"}, Help: "what I can do", Bare: true, handle: now((*Bot).help)},
		{Name: "connect", Help: "connect your own Todoist", TeamOnly: true, handle: now(func(b *Bot, ctx context.Context, in Incoming) {
			b.promptConnect(ctx, in, "")
		})},
		{Name: "disconnect", Help: "revoke my access to your Todoist", Queued: true, TeamOnly: true,
			handle: func(b *Bot, ctx context.Context, _ string, in Incoming) error { return b.disconnect(ctx, in) }},
	}
}

// Menu is the command's help line as a platform's command menu shows
// it: capitalised ("Sort the inbox into projects").
func (c Command) Menu() string {
	r, n := utf8.DecodeRuneInString(c.Help)
	return string(unicode.ToUpper(r)) + c.Help[n:]
}

// now adapts the handler of a command answered at once: it posts its
// answer through the send queue and cannot fail.
func now(f func(b *Bot, ctx context.Context, in Incoming)) func(*Bot, context.Context, string, Incoming) error {
	return func(b *Bot, ctx context.Context, _ string, in Incoming) error {
		f(b, ctx, in)
		return nil
	}
}

// Commands returns the commands of one mode (team: team mode's too), in
// the order /help lists them.
func Commands(team bool) []Command {
	var out []Command
	for _, c := range commands {
		if team || !c.TeamOnly {
			out = append(out, c)
		}
	}
	return out
}

// LookupCommand returns the command a word names, by its name or an
// alias, in any case ("Undo", "tidy_inbox"), whatever the mode: the bot
// answers a team command in personal mode as unknown.
func LookupCommand(word string) (Command, bool) {
	word = strings.ToLower(word)
	for _, c := range commands {
		if c.Name == word || slices.Contains(c.Aliases, word) {
			return c, true
		}
	}
	return Command{}, false
}

// command returns the command in.Command names in the bot's mode, or nil
// for none (plain text, or a command the bot does not know).
func (b *Bot) command(name string) *Command {
	if name == "" {
		return nil // a message, asked about several times each: no copy of a command made
	}
	c, ok := LookupCommand(name)
	if !ok || (c.TeamOnly && b.cfg.Accounts == nil) {
		return nil
	}
	return &c
}

// normalizeCommand turns the ways of saying a command into one
// Incoming.Command: an alias is the command's name, "/tidy undo" (Slack's
// one registered command with a subcommand word) is "undo", "/tidy" alone
// is "help". A command the bot does not know is left as it is, to be
// answered with the help text.
func normalizeCommand(in Incoming) Incoming {
	if c, ok := LookupCommand(in.Command); ok && in.Command != "" {
		in.Command = c.Name
		return in
	}
	if in.Command != "tidy" {
		return in
	}
	word, rest, _ := strings.Cut(strings.TrimSpace(in.Text), " ")
	word = strings.ToLower(strings.TrimPrefix(word, "/"))
	if word == "" {
		in.Command, in.Text = "help", ""
		return in
	}
	if c, ok := LookupCommand(word); ok {
		in.Command, in.Text = c.Name, strings.TrimSpace(rest)
		return in
	}
	in.Command = "tidy " + word
	return in
}

// bareCommand reports the command a DM's text is, when the whole message
// is one of the command words ("undo", "Undo.", " cancel "); "" when it is
// not, or when it says more ("undo the move and keep the rest").
func bareCommand(in Incoming) string {
	if !in.DM || in.Command != "" || in.Button != "" {
		return ""
	}
	w := strings.ToLower(strings.Trim(strings.TrimSpace(in.Text), ".!"))
	if c, ok := LookupCommand(w); ok && c.Bare && c.Name == w {
		return w
	}
	return ""
}

// latestThreadSetting names the setting that holds the thread of a
// person's latest run in a shared chat.
func latestThreadSetting(in Incoming) string {
	return "latest-thread:" + in.Platform + ":" + in.ChatID + ":" + in.UserID
}

// MaxMessage is the most characters of one user message the bot keeps;
// the rest is cut before it is stored or sent to the model, and the user
// is told.
const MaxMessage = 8_000

// clipMessage cuts an over-long message to MaxMessage characters; clipped
// reports the length it had.
func clipMessage(in Incoming) (out Incoming, clipped int) {
	n := utf8.RuneCountInString(in.Text)
	if n <= MaxMessage {
		return in, 0
	}
	in.Text = cut(in.Text, MaxMessage)
	return in, n
}

// cut returns s cut to at most n characters, the last of them "…" when
// anything was cut; n <= 0 means no limit. It cuts at a line or word
// break near the limit where there is one.
func cut(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == n-1 {
			break
		}
		count++
	}
	head := s[:i]
	if j := strings.LastIndexAny(head, "\n "); j > len(head)*9/10 {
		head = head[:j]
	}
	return strings.TrimRight(head, " \n") + "…"
}

// prepare applies the bot's reading of an event before it is stored
// (Handle has read its command forms, normalizeCommand): bare command words in a DM (only when no question of
// this conversation waits for an answer, since "cancel" then answers it),
// and the length cap on a message (see clipNote).
func (b *Bot) prepare(ctx context.Context, in Incoming) (Incoming, error) {
	if w := bareCommand(in); w != "" {
		r, err := b.waitingRun(ctx, in.ThreadKey())
		if err != nil {
			return in, err
		}
		if r == nil {
			in.Command, in.Text = w, ""
		}
	}
	if c := b.command(in.Command); c != nil && c.Thread && !in.DM && in.ThreadID == "" {
		// A Slack slash command in a channel carries no thread: it acts
		// on the person's latest conversation in that channel.
		th, err := b.store.Setting(ctx, latestThreadSetting(in))
		switch {
		case err == nil:
			in.ThreadID = th
		case !errors.Is(err, ErrNotFound):
			return in, fmt.Errorf("bot: read latest thread: %w", err)
		}
	}
	// An adapter that cut a line longer still (the console) said how
	// long it was.
	in, clipped := clipMessage(in)
	in.Clipped = max(in.Clipped, clipped)
	return in, nil
}

// clipNote tells the user their message was cut (Incoming.Clipped); it
// is posted when the message is handled, so a redelivered event does not
// post it twice.
func (b *Bot) clipNote(ctx context.Context, in Incoming) {
	if in.Clipped > 0 {
		b.replyLater(ctx, in.Platform, reply(in, fmt.Sprintf("Your message is %d characters long; I only read the first %d.", in.Clipped, MaxMessage)))
	}
}

// fit cuts a model's answer or question to what the platform shows in
// one go (TextLimiter), ending it with "…".
func (b *Bot) fit(platform, text string) string {
	q := b.queue(platform) // the platform itself, not its send queue
	if q == nil {
		return cut(text, DefaultMaxText)
	}
	return cut(text, maxText(q.p))
}
