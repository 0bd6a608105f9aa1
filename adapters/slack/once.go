package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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
// message, a reply to /cancel or /help), so that the one kind of bot
// message without metadata is a stream (chat.startStream takes none):
// Unfinished finds only those, never a reply posted beside a run. The
// bot deletes a stream by the id it recorded (bot/preview.go), and looks
// for one by the absence of metadata only where no other person's live
// stream can be (a DM).
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
	err := a.readBack(ctx, m.ChatID, m.ThreadID, oldest, func(msg slack.Message) {
		md := msg.Metadata
		if md.EventType != outboxEventType || md.EventPayload["outbox_id"] != m.Ref {
			return
		}
		if part, ok := md.EventPayload["part"].(float64); ok {
			found[int(part)] = msg.Timestamp
		}
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

// readBack calls each on the messages of chatID (thread threadID, if
// any) from oldest on, with their metadata: conversations.replies in a
// thread, else conversations.history, at most resendPages pages.
func (a *Adapter) readBack(ctx context.Context, chatID, threadID, oldest string, each func(slack.Message)) error {
	cursor := ""
	for range resendPages {
		var msgs []slack.Message
		var more bool
		var err error
		if threadID != "" {
			msgs, more, cursor, err = a.noRetry.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
				ChannelID: chatID, Timestamp: threadID, Oldest: oldest, Cursor: cursor, Limit: resendLimit, IncludeAllMetadata: true})
		} else {
			var h *slack.GetConversationHistoryResponse
			h, err = a.noRetry.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
				ChannelID: chatID, Oldest: oldest, Cursor: cursor, Limit: resendLimit, IncludeAllMetadata: true})
			if h != nil {
				msgs, more, cursor = h.Messages, h.HasMore, h.ResponseMetaData.NextCursor
			}
		}
		if err != nil {
			return err
		}
		for _, msg := range msgs {
			each(msg)
		}
		if !more || cursor == "" {
			return nil
		}
	}
	return nil
}

// Unfinished implements bot.OrphanFinder: the bot's messages in chatID
// (thread threadID; its own user id) after message after that carry no
// metadata (every post of the bot carries some: postEventType), read
// as Resend reads them (conversations.history, or conversations.replies
// in a thread, with their metadata). An after that is no ts (a
// response_url's) finds none. A live stream carries no metadata either:
// the bot asks only in a thread where no other run can stream (a DM).
func (a *Adapter) Unfinished(ctx context.Context, chatID, threadID, after string, since time.Time) ([]string, error) {
	if strings.HasPrefix(after, hookPrefix) {
		return nil, nil
	}
	oldest := after
	if after == "" {
		// A ts is the post's Unix time with a fraction
		// (docs.slack.dev/messaging/retrieving-messages): a run without
		// a status message looks from the second it began.
		oldest = strconv.FormatInt(since.Unix(), 10) + ".000000"
	}
	var out []string
	err := a.readBack(ctx, chatID, threadID, oldest, func(msg slack.Message) {
		if msg.User == a.botID && msg.Timestamp != after && msg.Timestamp != threadID && msg.Metadata.EventType == "" {
			out = append(out, msg.Timestamp)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("slack: look for unfinished previews in %s: %w", chatID, a.queueError(err))
	}
	return out, nil
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
