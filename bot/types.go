// Package bot is tidybot's core: it turns chat messages from any platform
// into durable jobs, runs the agent for them one thread at a time, and
// reports progress, questions and answers back to the platform.
package bot

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// Incoming is one event from a platform: a message, a command or a button
// press.
type Incoming struct {
	Platform string `json:"platform"`
	ChatID   string `json:"chat_id"`
	// ThreadID is the platform's thread within the chat ("" for a chat that
	// is one thread, such as a Telegram DM or the console).
	ThreadID string `json:"thread_id,omitempty"`
	// MessageID is the platform's id of this message (Slack ts).
	MessageID string `json:"message_id,omitempty"`
	UserID    string `json:"user_id"`
	UserName  string `json:"user_name,omitempty"`
	Text      string `json:"text,omitempty"`
	// Command is a command's name without slash or bot suffix
	// ("tidy-inbox", "help"); Text then holds its arguments.
	Command string `json:"command,omitempty"`
	// Button is the payload of a pressed button.
	Button string `json:"button,omitempty"`
	// ButtonRef identifies the pressed button's message for the platform
	// (Telegram callback query id), so the press can be answered.
	ButtonRef string `json:"button_ref,omitempty"`
	// Clipped is the length in characters a message had before the bot
	// cut it to MaxMessage; 0 when it was not cut. An adapter that cut an
	// even longer message itself (the console's input lines) sets it.
	Clipped int `json:"clipped,omitempty"`
	// EventID is the platform's id of this event, used to drop duplicates.
	EventID string `json:"event_id,omitempty"`
	// DM is set for a direct conversation with the bot (a Telegram
	// private chat, a Slack IM, the console); unset in a shared chat,
	// where each person has their own conversation (see ThreadKey).
	DM bool      `json:"dm,omitempty"`
	At time.Time `json:"at"`
	// Attachment is a voice note, audio file or image sent with the
	// message (Text is then its caption, if any).
	Attachment *Attachment `json:"attachment,omitempty"`
	// Transcribed is set once Text holds the voice note's transcript.
	Transcribed bool `json:"transcribed,omitempty"`

	// TeamID is the user's Slack workspace (event team_id), for
	// slack:team:T… entries of the allowlist.
	TeamID string `json:"team_id,omitempty"`
	// SharedTeams are teams the sender belongs to alongside the bot,
	// told by a platform whose direct messages carry no team (Discord: the
	// servers a DM's sender shares with the bot): in team mode a
	// platform:team:ID entry lets them in there as in the team's own
	// chats.
	SharedTeams []string `json:"shared_teams,omitempty"`
	// AwaitsAnswer is set when the platform shows the person a pending
	// state until the bot answers this event (Discord's deferred slash
	// command, "… is thinking"): where the bot would otherwise stay
	// silent (a stranger told already today, a person prompted to
	// connect within the hour) it answers such an event anyway, with the
	// same notice, so the pending state ends.
	AwaitsAnswer bool `json:"awaits_answer,omitempty"`
}

// PersonID names a person across platforms, "platform:user id": the
// form of Config.AllowedUsers, and what every per-person key (settings,
// timers, usage, tokens) holds after its prefix. personOf reads it back.
func PersonID(platform, userID string) string { return platform + ":" + userID }

// personOf splits a PersonID (a platform has no colon; a user id may).
func personOf(id string) (platform, userID string) {
	platform, userID, _ = strings.Cut(id, ":")
	return platform, userID
}

// ThreadKey names the conversation the event belongs to: its history,
// its pending question, /undo, /reset and /usage. A direct conversation
// (DM) is one conversation; in a shared chat (a Telegram group, a Slack
// channel or channel thread) each person has their own, so another
// member's message never answers, cancels or inherits someone else's
// question:
//
//	DM:     platform:chat:thread
//	shared: platform:chat:thread:user
func (in Incoming) ThreadKey() string {
	key := in.Platform + ":" + in.ChatID + ":" + in.ThreadID
	if !in.DM {
		key += ":" + in.UserID
	}
	return key
}

// Role of a stored chat message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one message of a thread, as the model will see it in history.
type Message struct {
	ThreadKey string    `json:"thread_key"`
	Role      string    `json:"role"`
	Text      string    `json:"text"`
	RunID     string    `json:"run_id,omitempty"`
	At        time.Time `json:"at"`
}

// Thread is a conversation.
type Thread struct {
	Key      string `json:"key"`
	Platform string `json:"platform"`
	ChatID   string `json:"chat_id"`
	ThreadID string `json:"thread_id,omitempty"`
	// ResetAt hides earlier messages from the model (/reset).
	ResetAt time.Time `json:"reset_at"`
}

// RunStatus is where a run is in its life.
type RunStatus string

// Run statuses. Queued and Working runs are resumed after a restart;
// Waiting runs wait for the user; the rest are final.
const (
	RunQueued    RunStatus = "queued"
	RunWorking   RunStatus = "working"
	RunWaiting   RunStatus = "waiting"
	RunDone      RunStatus = "done"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
)

// Final reports whether s is an end state.
func (s RunStatus) Final() bool {
	return s == RunDone || s == RunFailed || s == RunCancelled
}

// Waiting is what a suspended run waits for.
type Waiting struct {
	// Kind is "ask" (a question) or "confirm" (a yes/no on a gated write).
	Kind     string   `json:"kind"`
	Question string   `json:"question"`
	Options  []string `json:"options,omitempty"`
	// Key is the short id that buttons carry to refer to this wait.
	Key string `json:"key"`
	// MessageID is the platform message that holds the buttons.
	MessageID string `json:"message_id,omitempty"`
	// UserID is the only user who may answer.
	UserID string `json:"user_id"`
}

// Run is one agent run in a thread, with everything needed to resume it.
type Run struct {
	ID        string    `json:"id"`
	ThreadKey string    `json:"thread_key"`
	Platform  string    `json:"platform"`
	ChatID    string    `json:"chat_id"`
	ThreadID  string    `json:"thread_id,omitempty"`
	UserID    string    `json:"user_id"`
	Status    RunStatus `json:"status"`
	// Instruction is what the run was asked to do.
	Instruction string `json:"instruction"`
	// Transcript is the agent's saved state (agent.Transcript as JSON).
	Transcript json.RawMessage `json:"transcript,omitempty"`
	Usage      agent.Usage     `json:"usage"`
	Notes      []string        `json:"notes,omitempty"`
	Waiting    *Waiting        `json:"waiting,omitempty"`
	// Answer is the final answer, or what went wrong in plain words.
	Answer  string    `json:"answer,omitempty"`
	Undone  bool      `json:"undone,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`

	// Reply is the user's answer to the run's question, saved with the
	// run when it resumes (in the transaction that retires the answer's
	// job) and given to the agent again if a restart interrupts it.
	Reply string `json:"reply,omitempty"`
	// Photo is the image the run was asked about, fetched again if a
	// restart interrupts the run before its first step is saved (the
	// saved transcript holds the image from then on).
	Photo *Attachment `json:"photo,omitempty"`

	// DM is set for a run in a direct conversation.
	DM bool `json:"dm,omitempty"`
	// TeamID is the asker's own team (Incoming.TeamID), "" when unknown.
	TeamID string `json:"team_id,omitempty"`
	// EventID is the platform's event id of the Incoming that started
	// the run (Outgoing.EventID of its messages), "" when none.
	EventID string `json:"event_id,omitempty"`
	// Autopilot is set for a run autopilot started (see autopilot.go).
	Autopilot bool `json:"autopilot,omitempty"`

	// Feedback is the asker's 👍 or 👎 on the run's answer, nil
	// before any (bot/feedback.go).
	Feedback *Feedback `json:"feedback,omitempty"`

	// Early holds what the asked person wrote while the run's question
	// was on its way (sent before it was posted): never an answer, it is
	// given to the model with the answer (see Bot.early).
	Early []string `json:"early,omitempty"`
}

// Job is a durable unit of work: an incoming event waiting to be handled.
type Job struct {
	ID        string    `json:"id"`
	ThreadKey string    `json:"thread_key"`
	Incoming  Incoming  `json:"incoming"`
	Enqueued  time.Time `json:"enqueued"`

	// Kind is JobIncoming (also when empty), JobResume or JobAutopilot.
	Kind string `json:"kind,omitempty"`
	// RunID is the run a JobResume job continues.
	RunID string `json:"run_id,omitempty"`
}

// AuditEntry records one applied write and how to undo it.
type AuditEntry struct {
	RunID     string        `json:"run_id"`
	ThreadKey string        `json:"thread_key"`
	Write     agent.Write   `json:"write"`
	Inverse   []agent.Write `json:"inverse,omitempty"`
	// Summary says what was done, in words ("moved “Buy cake” to Birthday").
	Summary string    `json:"summary"`
	At      time.Time `json:"at"`
}

// ErrNotFound is returned by a Store for a missing record.
var ErrNotFound = errors.New("not found")

// Store keeps the bot's state durably. store implements it on bbolt.
// Every method is safe for concurrent use.
type Store interface {
	// MarkEvent records an event key and reports whether it was new.
	MarkEvent(ctx context.Context, key string, at time.Time) (fresh bool, err error)
	// PruneEvents forgets event keys recorded before t.
	PruneEvents(ctx context.Context, before time.Time) (int, error)

	// Thread returns a thread, or ErrNotFound.
	Thread(ctx context.Context, key string) (Thread, error)
	// SaveThread creates or replaces a thread.
	SaveThread(ctx context.Context, t Thread) error
	// RecentMessages returns up to n of the thread's latest messages at or
	// after since, oldest first.
	RecentMessages(ctx context.Context, threadKey string, since time.Time, n int) ([]Message, error)

	// SaveRun creates or replaces a run. A run without a Transcript
	// keeps the one stored: the methods below that find runs return
	// them without theirs, and such a run may be saved again.
	SaveRun(ctx context.Context, r *Run) error
	// Run returns a run with its Transcript, or ErrNotFound. It is the
	// only method that reads a transcript (several KB, hundreds for a
	// long run): a caller that needs one calls Run.
	Run(ctx context.Context, id string) (*Run, error)
	// Runs returns the runs with any of the given statuses (all runs when
	// none is given), oldest first, without their transcripts.
	Runs(ctx context.Context, statuses ...RunStatus) ([]*Run, error)
	// ThreadRuns returns a thread's runs, oldest first, without their
	// transcripts (/usage and /undo read them all: a person's DM thread
	// holds thousands).
	ThreadRuns(ctx context.Context, threadKey string) ([]*Run, error)
	// WaitingRun returns the thread's newest run that waits for the user
	// (RunWaiting with Waiting set), without its transcript, or nil.
	// Every message asks, so it should not read the thread's ended runs:
	// a person's DM thread is one thread for months.
	WaitingRun(ctx context.Context, threadKey string) (*Run, error)
	// WaitingRunByKey returns the run that waits for the user on the
	// wait key (Waiting.Key, which buttons carry), in any thread,
	// without its transcript, or nil. Every button press asks, so it
	// should not read the other waiting runs.
	WaitingRunByKey(ctx context.Context, key string) (*Run, error)

	// DeleteJob removes a job once handled.
	DeleteJob(ctx context.Context, id string) error
	// Jobs returns every stored job, oldest first.
	Jobs(ctx context.Context) ([]Job, error)

	// RunAudit returns a run's journal in the order written.
	RunAudit(ctx context.Context, runID string) ([]AuditEntry, error)

	// Setting returns a stored setting, or ErrNotFound.
	Setting(ctx context.Context, key string) (string, error)
	// SetSetting stores a setting; "" deletes it (Setting then returns
	// ErrNotFound).
	SetSetting(ctx context.Context, key, value string) error

	// Commit applies c in one transaction; it returns ErrDuplicate, having
	// applied nothing, when c.EventKey was recorded before.
	Commit(ctx context.Context, c Change) error
	// Outbox returns the messages not yet delivered, oldest first.
	Outbox(ctx context.Context) ([]Outbound, error)
	// Delivered removes a posted message from the outbox and, for a
	// question, records msgID in its run if the run still waits on it;
	// for a run's answer (RunID set, no WaitKey) it deletes the run's
	// preview record (StreamKey) too: the answer replaced the preview.
	// An answer's removal may wait briefly to share a later write's
	// transaction: a crash meanwhile posts it again, never loses it.
	Delivered(ctx context.Context, ob Outbound, msgID string) error
	// Prune deletes the messages sent before t, and the runs (with
	// their transcript and journal) last updated before t, except runs
	// that are working or queued, and the pending requests (settings
	// under PendingPrefix) made before t.
	Prune(ctx context.Context, before time.Time) (Pruned, error)
	// DeleteConversation deletes a thread's messages and its runs (with
	// their transcript and journal), except runs working or queued.
	DeleteConversation(ctx context.Context, threadKey string) error
}
