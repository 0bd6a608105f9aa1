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
}

// Outgoing is a message to post.
type Outgoing struct {
	ChatID   string
	ThreadID string
	Text     string
	Buttons  []Button
}

// Platform posts messages to one chat platform. Adapters implement it.
type Platform interface {
	// Name is the platform's name as in Incoming.Platform ("telegram").
	Name() string
	// Send posts a message and returns its platform id. Long text is
	// split and escaped by the platform; rate limits are waited out.
	Send(ctx context.Context, m Outgoing) (id string, err error)
}

// Editor is a Platform that can change a posted message in place.
type Editor interface {
	// Edit replaces the text (and buttons) of message id.
	Edit(ctx context.Context, id string, m Outgoing) error
	// EditInterval is the least time between two edits of one message.
	EditInterval() time.Duration
}

// ButtonAnswerer is a Platform whose button presses must be answered
// (Telegram's answerCallbackQuery).
type ButtonAnswerer interface {
	AnswerButton(ctx context.Context, ref, text string) error
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
