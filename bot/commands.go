package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// subcommands are the commands Slack's one /tidy command takes as its
// first word ("/tidy undo").
var subcommands = map[string]string{
	"undo":   "undo",
	"cancel": "cancel",
	"reset":  "reset",
	"usage":  "usage",
	"help":   "help",
	"inbox":  "tidy-inbox",
}

// bareWords are the subcommands a DM may type without a slash.
var bareWords = map[string]bool{"undo": true, "cancel": true, "reset": true, "usage": true, "help": true}

// normalizeCommand turns the ways of saying a command into one
// Incoming.Command: "/tidy undo" (Slack's one registered command with a
// subcommand word) is "undo", "/tidy" alone is "help". A command the bot
// does not know is left as it is, to be answered with the help text.
func normalizeCommand(in Incoming) Incoming {
	if in.Command != "tidy" {
		return in
	}
	word, rest, _ := strings.Cut(strings.TrimSpace(in.Text), " ")
	word = strings.ToLower(strings.TrimPrefix(word, "/"))
	if word == "" {
		in.Command, in.Text = "help", ""
		return in
	}
	if c, ok := subcommands[word]; ok {
		in.Command, in.Text = c, strings.TrimSpace(rest)
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
	if bareWords[w] {
		return w
	}
	return ""
}

// threadCommands act on one conversation.
var threadCommands = map[string]bool{"undo": true, "cancel": true, "reset": true, "usage": true}

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

// prepare applies the bot's reading of an event before it is stored:
// command forms, bare command words in a DM (only when no question of
// this conversation waits for an answer, since "cancel" then answers it),
// and the length cap on a message (see clipNote).
func (b *Bot) prepare(ctx context.Context, in Incoming) (Incoming, error) {
	in = normalizeCommand(in)
	if w := bareCommand(in); w != "" {
		r, err := b.waitingRun(ctx, in.ThreadKey())
		if err != nil {
			return in, err
		}
		if r == nil {
			in.Command, in.Text = w, ""
		}
	}
	if !in.DM && in.ThreadID == "" && threadCommands[in.Command] {
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
