package slack

import (
	"context"
	"log/slog"
	"strings"

	"github.com/slack-go/slack"

	"github.com/tidybot/tidybot/bot"
)

// linkActionID names a link button: Slack reports its clicks to the
// interactivity URL too, and they are acknowledged and ignored.
const linkActionID = "details"

// dm reports whether channel is a direct message with the bot (IM ids
// start with D: docs.slack.dev/reference/objects/conversation-object).
func dm(channel string) bool { return strings.HasPrefix(channel, "D") }

// linkBlock is an actions block with one URL button
// (docs.slack.dev/reference/block-kit/block-elements/button-element: url,
// up to 3,000 characters, opens in the user's browser).
func linkBlock(l *bot.Link) slack.Block {
	btn := slack.NewButtonBlockElement(linkActionID, "", slack.NewTextBlockObject(slack.PlainTextType, clip(l.Label, 75), false, false))
	btn.URL = l.URL
	return slack.NewActionBlock("link", btn)
}

// sendLink shows a link in a shared channel to its user alone, as an
// ephemeral message (chat.postEphemeral) in the same thread. A failure
// is logged: the answer itself was delivered.
func (a *Adapter) sendLink(ctx context.Context, m bot.Outgoing) {
	text := "Only you see this: what I did, step by step."
	opts := []slack.MsgOption{slack.MsgOptionText(text, true),
		slack.MsgOptionBlocks(slack.NewSectionBlock(slack.NewTextBlockObject(slack.PlainTextType, text, false, false), nil, nil), linkBlock(m.Link))}
	if m.ThreadID != "" {
		opts = append(opts, slack.MsgOptionTS(m.ThreadID))
	}
	if _, err := a.api.PostEphemeralContext(ctx, m.ChatID, m.Link.UserID, opts...); err != nil {
		a.log.Warn("slack: could not show the Details link", slog.String("channel", m.ChatID), slog.Any("err", a.redact(err)))
	}
}
