package bot

import (
	"context"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// Button is one choice under a message. Data is what the platform sends
// back when it is pressed (≤ 64 bytes: Telegram's limit).
type Button struct {
	Label string
	Data  string
	// Command is set on a button that stands for a command the user can
	// also type ("undo" for the Undo button), empty on one that answers a
	// question. A platform without real buttons may leave such a button
	// out.
	Command string
	// Feedback is set on a feedback button under an answer: FeedbackGood
	// (👍) or FeedbackBad (👎). A platform with a rating control of its
	// own (Slack's feedback_buttons) shows the pair as that; one without
	// buttons may leave them out.
	Feedback string
}

// Outgoing is a message to post.
type Outgoing struct {
	ChatID   string
	ThreadID string
	// UserID is the person the message answers ("" for nobody in
	// particular), and RunID the run it belongs to ("" for none). A
	// platform that answers through a link one request gave (Slack's
	// response_url, shown to its person only) uses only a link of that
	// person, and of that run when it has one.
	UserID string
	// TeamID is UserID's own team where the platform has teams (Slack:
	// the sender's team, another organisation's in Slack Connect), ""
	// when unknown.
	TeamID string
	RunID  string
	// EventID is the platform's event id (Incoming.EventID) of the
	// message, command or press that started what this message answers:
	// the run it belongs to, or the event a reply answers ("" for
	// neither: a digest, autopilot). A platform that shows a request as
	// pending until answered (Discord's deferred interaction, "… is
	// thinking") answers that request only with messages of its own
	// event, never with another run's.
	EventID string
	Text    string
	Buttons []Button
	// Link, when set, is shown to Link.UserID only (see Link).
	Link *Link
	// Ref is the outbox entry's id for a message that must reach the user
	// (an answer, a question): a Resender tags the post with it.
	Ref string
	// Question is set on a question the person answers (ask_user, a
	// confirmation): in a shared chat a platform may ask for the answer
	// as a reply to it, the one message besides commands that reaches a
	// Telegram bot in privacy mode.
	Question bool
}

// Platform posts messages to one chat platform. Adapters implement it.
type Platform interface {
	// Name is the platform's name as in Incoming.Platform ("telegram").
	Name() string
	// Send posts a message and returns its platform id. Long text is
	// split and escaped by the platform. A rate limit is an error that
	// implements RateLimited: the bot's send queue waits it out.
	Send(ctx context.Context, m Outgoing) (id string, err error)
}

// Editor is a Platform that can change a posted message in place.
type Editor interface {
	// Edit replaces the text (and buttons) of message id.
	Edit(ctx context.Context, id string, m Outgoing) error
	// EditInterval is the least time between two edits of one message.
	EditInterval() time.Duration
}

// Resender is a Platform that posts an outbox entry (Outgoing.Ref) at
// most once: Send tags the post with m.Ref where the platform keeps such
// a tag (Slack's message metadata), and Resend, for an entry that may
// have been posted already (a previous process died between the post and
// recording it, or a failed call may have reached the platform), looks
// for posts tagged with it before posting.
type Resender interface {
	// Resend posts what of m (m.Ref set) was not posted since since (a
	// long text is several posts) and returns the id of m's last post,
	// found or made. Where it cannot look, it posts m as Send does.
	Resend(ctx context.Context, m Outgoing, since time.Time) (id string, err error)
}

// CommandNamer is a Platform whose users type the bot's commands other
// than as "/name" (Slack's one /tidy command: "/tidy undo"; Telegram,
// which allows no hyphen: "/tidy_inbox").
type CommandNamer interface {
	// CommandName returns what a user types on this platform for the
	// bot's command name ("undo", "tidy-inbox"), slash included.
	CommandName(name string) string
}

// Sequencer is a Platform whose message ids tell the order in which
// messages were posted in one chat: Slack's ts, Telegram's message_id,
// the terminal's line numbers. The bot asks it whether a typed message
// was sent after the question it would answer: a message sent before
// the question was posted is never an answer to it (nor a consent).
type Sequencer interface {
	// After reports whether message a was posted after message b of the
	// same chat; ok is false when either id cannot be placed (a Slack
	// message posted through a response_url has no ts).
	After(a, b string) (after, ok bool)
}

// SharedChats is a Platform whose shared chats let only some messages
// reach the bot (Telegram's privacy mode): commands are typed there with
// the bot's name, and the help says how to talk to the bot.
type SharedChats interface {
	// SharedCommandName returns what a user types in a shared chat for
	// the bot's command name ("/undo@tidybot").
	SharedCommandName(name string) string
	// SharedChatHelp says how to reach the bot in a shared chat.
	SharedChatHelp() string
}

// ButtonAnswerer is a Platform whose button presses must be answered
// (Telegram's answerCallbackQuery).
type ButtonAnswerer interface {
	AnswerButton(ctx context.Context, ref, text string) error
}

// TextLimiter is a Platform that caps how long one answer or question
// may be. The bot cuts a longer text and ends it with "…", so that a
// runaway answer is a few messages, not hundreds.
type TextLimiter interface {
	// MaxText is the most characters (Unicode code points, before the
	// platform escapes or splits the text) of one answer or question; 0
	// or less means no limit.
	MaxText() int
}

// DefaultMaxText is the cap of a platform that declares none: three
// Telegram messages' worth.
const DefaultMaxText = 12_000

// maxText is p's cap on one answer or question; 0 means none.
func maxText(p Platform) int {
	if l, ok := p.(TextLimiter); ok {
		return max(l.MaxText(), 0)
	}
	return DefaultMaxText
}

// Metrics hears what the pipeline does; cmd/tidybot implements it on
// Prometheus. Methods must not block.
type Metrics interface {
	// Event counts an incoming event by outcome: "accepted",
	// "duplicate", "refused", "command" or "button".
	Event(platform, outcome string)
	// RunEnded counts a run that ended or paused, with its tokens.
	RunEnded(status RunStatus, usage agent.Usage)
}

type noMetrics struct{}

func (noMetrics) Event(string, string)            {}
func (noMetrics) RunEnded(RunStatus, agent.Usage) {}

// Acknowledger is a Platform that can show a person at once that their
// message was received, before any answer (Telegram's 👀 reaction). The
// bot calls it once the message is stored, outside the send queue; an
// error changes nothing else (the status message follows as without it).
type Acknowledger interface {
	// Ack marks message messageID of chat chatID as seen.
	Ack(ctx context.Context, chatID, messageID string) error
}

// What an adapter shows a person itself, where the platform wants an
// answer before the bot has one (Discord's interactions: within 3 s).
// The words are the bot's, kept with the rest of what the chat shows;
// adapters use these rather than their own.
const (
	// NotTakenText answers an event that could not be stored in time:
	// nothing was kept, the person sends it again.
	NotTakenText = "Sorry, I could not take that in just now. Please try again."
	// UnusableText answers an event the bot cannot act on at all (a
	// kind of interaction it never offered).
	UnusableText = "I cannot do anything with that here."
)
