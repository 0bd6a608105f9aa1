package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/tidybot/tidybot/bot"
)

// An answer or a question the bot must deliver (an outbox entry) is
// posted with message metadata naming the entry (api.slack.com/metadata/using:
// an event_type and a free-form event_payload), one post per part of a
// long text. Before posting an entry that may have been posted already,
// Resend reads the conversation back (conversations.history, or
// conversations.replies in a thread, with include_all_metadata: without
// it the metadata is not returned) and posts only the parts it does not
// find: a crash between the post and the bot recording it no longer
// doubles the message.
const outboxEventType = "tidybot_outbox"

// postEventType marks every other message the bot posts (a status
// message, a reply to /cancel or /help): the one kind of bot message
// without metadata is a stream (chat.startStream takes none). The bot
// deletes a stream only by the id it recorded (bot/preview.go), never
// by the absence of metadata: another person's live stream has none
// either.
const postEventType = "tidybot_post"

func postMetadata() slack.SlackMetadata {
	return slack.SlackMetadata{EventType: postEventType, EventPayload: map[string]any{"kind": "post"}}
}

// Resend looks back this long before the entry was made (clocks differ)
// and at most this many pages of history.
const (
	resendSlack = 10 * time.Minute
	resendPages = 10
	resendLimit = 200 // messages per page: Slack recommends no more than 200
)

func outboxMetadata(ref string, part, parts int) slack.SlackMetadata {
	return slack.SlackMetadata{EventType: outboxEventType, EventPayload: map[string]any{"outbox_id": ref, "part": part, "parts": parts}}
}

// Resend implements bot.Resender. Where the bot cannot read the
// conversation (not a member: the answer goes through a response_url;
// a missing scope), it posts as Send does: at least once.
func (a *Adapter) Resend(ctx context.Context, m bot.Outgoing, since time.Time) (string, error) {
	if m.Ref == "" {
		return a.Send(ctx, m)
	}
	posted, err := a.posted(ctx, m, since)
	if err != nil {
		if !cannotRead(err) {
			return "", fmt.Errorf("slack: look for outbox entry %s in %s: %w", m.Ref, m.ChatID, a.queueError(err))
		}
		a.log.Warn("slack: cannot read the conversation back; posting the message again, maybe twice", slog.String("channel", m.ChatID), slog.Any("err", a.redact(err)))
		posted = nil
	}
	parts := len(split(m.Text, maxMessage))
	if len(posted) == parts {
		return posted[parts-1], nil
	}
	return a.sendParts(ctx, m, posted)
}

// posted returns the ts of each part of outbox entry m.Ref already in
// m's conversation, by part.
func (a *Adapter) posted(ctx context.Context, m bot.Outgoing, since time.Time) (map[int]string, error) {
	oldest := fmt.Sprintf("%d.000000", since.Add(-resendSlack).Unix())
	found := map[int]string{}
	cursor := ""
	for range resendPages {
		var msgs []slack.Message
		var more bool
		var err error
		if m.ThreadID != "" {
			msgs, more, cursor, err = a.noRetry.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
				ChannelID: m.ChatID, Timestamp: m.ThreadID, Oldest: oldest, Cursor: cursor, Limit: resendLimit, IncludeAllMetadata: true})
		} else {
			var h *slack.GetConversationHistoryResponse
			h, err = a.noRetry.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
				ChannelID: m.ChatID, Oldest: oldest, Cursor: cursor, Limit: resendLimit, IncludeAllMetadata: true})
			if h != nil {
				msgs, more, cursor = h.Messages, h.HasMore, h.ResponseMetaData.NextCursor
			}
		}
		if err != nil {
			return nil, err
		}
		for _, msg := range msgs {
			md := msg.Metadata
			if md.EventType != outboxEventType || md.EventPayload["outbox_id"] != m.Ref {
				continue
			}
			if part, ok := md.EventPayload["part"].(float64); ok {
				found[int(part)] = msg.Timestamp
			}
		}
		if !more || cursor == "" {
			break
		}
	}
	return found, nil
}

// cannotRead reports an error that says the bot may not read the
// conversation: not a member, no such channel or thread, or a missing
// *:history scope (docs.slack.dev/reference/methods/conversations.history#errors).
func cannotRead(err error) bool {
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) {
		return false
	}
	code, _, _ := strings.Cut(se.Err, " ")
	switch code {
	case "not_in_channel", "channel_not_found", "thread_not_found", "missing_scope":
		return true
	}
	return false
}
