package slack

import (
	"context"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.Acknowledger = (*Adapter)(nil)

// ackReaction is the emoji that says "seen" (👀).
const ackReaction = "eyes"

// Ack implements bot.Acknowledger with reactions.add (scope
// reactions:write; docs.slack.dev/reference/methods/reactions.add). It is
// Tier 3, about 50 a minute for the whole workspace: once the minute's
// calls are spent the adapter's lane answers 429 at once, without a
// request (limits.go), and the message gets no reaction. One attempt, no
// 429 wait: a reaction shown late is worth nothing (the answer or the
// status message follows anyway).
func (a *Adapter) Ack(ctx context.Context, chatID, messageID string) error {
	err := a.noRetry.AddReactionContext(ctx, ackReaction, slack.NewRefToMessage(chatID, messageID))
	if err != nil {
		return fmt.Errorf("slack: react to message %s: %w", messageID, a.queueError(err))
	}
	return nil
}
