package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackutilsx"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.Streamer = (*Adapter)(nil)
var _ bot.Unfinisher = (*Adapter)(nil)
var _ bot.OrphanFinder = (*Adapter)(nil)
var _ bot.StreamPlacer = (*Adapter)(nil)
var _ bot.LastingStream = (*stream)(nil)

// streamAPI is the part of slack-go's *slack.Client a stream calls
// (v0.35: StartStream, AppendStream, StopStream).
type streamAPI interface {
	StartStreamContext(ctx context.Context, channelID string, options ...slack.MsgOption) (string, string, error)
	AppendStreamContext(ctx context.Context, channelID, timestamp string, options ...slack.MsgOption) (string, string, error)
	StopStreamContext(ctx context.Context, channelID, timestamp string, options ...slack.MsgOption) (string, string, error)
}

var _ streamAPI = (*slack.Client)(nil)

// streamInterval spaces a stream's appends. chat.appendStream is Tier 4
// (100+ per minute per workspace, docs.slack.dev/reference/methods/chat.appendStream);
// one append a second per answer leaves room for several answers at once.
const streamInterval = time.Second

// maxStreamText is the most markdown_text one call takes ("Limit this
// field to 12,000 characters": chat.startStream, chat.appendStream and
// chat.stopStream).
const maxStreamText = 12000

// StreamsIn implements bot.StreamPlacer: in a DM Slack streams only
// replies in a thread (docs.slack.dev/reference/methods/chat.startStream:
// "Streamed messages should always be replies to a user request"; the
// Node SDK's ChatStartStreamArguments requires thread_ts,
// packages/web-api/src/types/request/chat.ts), so a top-level DM answer
// is posted, not streamed; in a channel thread_ts is optional (the
// page lists it among the optional arguments), and a top-level answer
// streams too.
func (a *Adapter) StreamsIn(chatID, threadID string) bool { return threadID != "" || !dm(chatID) }

// StartStream implements bot.Streamer with chat.startStream: the answer
// is streamed as markdown into m's chat, in its thread (or top level in
// a channel), to userID of team m.TeamID (the recipient Slack asks for
// outside a DM). A workspace without streaming
// answers an error, and the bot goes on without a preview; so does a
// message outside a thread, without a call.
//
// Streamed text is escaped as posted text is (streamEscape): a task
// named "<!channel>" or "<@U…>" is shown, not obeyed.
func (a *Adapter) StartStream(ctx context.Context, m bot.Outgoing, userID string) (bot.Stream, error) {
	api, ok := a.noRetry.(streamAPI)
	if !ok {
		return nil, fmt.Errorf("slack: this client cannot stream")
	}
	if !a.StreamsIn(m.ChatID, m.ThreadID) {
		return nil, fmt.Errorf("slack: start stream in %s: a DM's streams are replies in a thread", m.ChatID)
	}
	text := streamEscape(m.Text)
	if len([]rune(text)) > maxStreamText {
		return nil, fmt.Errorf("slack: start stream in %s: the first text is longer than %d characters", m.ChatID, maxStreamText)
	}
	// recipient_team_id is the team of the person receiving the stream
	// (chat.startStream), the sender's own team (Incoming.TeamID, another
	// organisation's in Slack Connect); the workspace's from auth.test
	// only where the run does not know it (a run stored before it did).
	team := m.TeamID
	if team == "" {
		team = a.teamID
	}
	opts := []slack.MsgOption{slack.MsgOptionMarkdownText(text), slack.MsgOptionRecipientUserID(userID), slack.MsgOptionRecipientTeamID(team)}
	if m.ThreadID != "" {
		opts = append(opts, slack.MsgOptionTS(m.ThreadID))
	}
	_, ts, err := api.StartStreamContext(ctx, m.ChatID, opts...)
	if err != nil {
		return nil, fmt.Errorf("slack: start stream in %s: %w", m.ChatID, a.queueError(err))
	}
	return &stream{a: a, api: api, channel: m.ChatID, ts: ts, sent: m.Text}, nil
}

// streamEscape escapes text by Slack's rules for message text: &, < and >
// become &amp;, &lt; and &gt; (api.slack.com/reference/surfaces/formatting#escaping),
// with slack-go's own escape, the one slack.MsgOptionText(text, true)
// makes for chat.postMessage (slackutilsx.EscapeMessage), so that
// "<!channel>", "<!everyone>", "<@U…>" and "<https://…|…>" in an answer
// (a task's name, the model's words) are text, not a mention or a link.
// It works character by character: the escape of a text is the escapes
// of its pieces, so a stream's appends escape as the whole would.
func streamEscape(text string) string {
	return slackutilsx.EscapeMessage(text)
}

// stream is one answer streamed into a message.
type stream struct {
	a       *Adapter
	api     streamAPI
	channel string
	ts      string
	sent    string // the text (before escaping) the message shows so far
	stopped bool   // chat.stopStream succeeded (see stop)
	deleted bool   // chat.delete succeeded
}

// MessageID implements bot.LastingStream: the streamed message's ts.
func (s *stream) MessageID() string { return s.ts }

// Update implements bot.Stream: what text adds to the message is
// appended (chat.appendStream).
func (s *stream) Update(ctx context.Context, text string) error {
	add, ok := strings.CutPrefix(text, s.sent)
	if !ok {
		return fmt.Errorf("slack: stream %s: the text does not extend what is shown", s.ts)
	}
	if add == "" {
		return nil
	}
	add = streamEscape(add)
	if len([]rune(add)) > maxStreamText {
		return fmt.Errorf("slack: stream %s: more than %d characters at once", s.ts, maxStreamText)
	}
	if _, _, err := s.api.AppendStreamContext(ctx, s.channel, s.ts, slack.MsgOptionMarkdownText(add)); err != nil {
		return fmt.Errorf("slack: append to stream %s in %s: %w", s.ts, s.channel, s.a.queueError(err))
	}
	s.sent = text
	return nil
}

// DeleteMessage implements bot.Unfinisher with chat.delete
// (docs.slack.dev/reference/methods/chat.delete): it removes a message
// the bot posted, such as a stream left by a process that died. A
// message already gone (message_not_found) is no error.
func (a *Adapter) DeleteMessage(ctx context.Context, chatID, id string) error {
	if _, _, err := a.noRetry.DeleteMessageContext(ctx, chatID, id); err != nil {
		if se := (slack.SlackErrorResponse{}); errors.As(err, &se) && se.Err == "message_not_found" {
			return nil
		}
		return fmt.Errorf("slack: delete message %s in %s: %w", id, chatID, a.queueError(err))
	}
	return nil
}

// Interval implements bot.Stream.
func (s *stream) Interval() time.Duration { return streamInterval }

// Finish implements bot.Stream with chat.stopStream: the rest of the
// answer, its buttons (Undo) and, in a DM, its Details link go with it,
// and the message is tagged with the outbox entry (m.Ref) as Send tags
// a post, so that a Resend after a crash finds it and posts nothing
// twice. Only an answer that extends what was streamed, and fits one
// message, becomes the stream: any other m (none, an answer the model
// started over, one too long) stops the stream untagged and deletes it
// (final false), so that what the stream showed never stands for the
// answer and the bot posts the answer as usual. Finish made again after
// an error (the send queue's retry of a 429) neither stops nor deletes
// twice.
func (s *stream) Finish(ctx context.Context, m bot.Outgoing) (string, bool, error) {
	text := strings.TrimSpace(m.Text)
	rest, extends := strings.CutPrefix(text, s.sent)
	rest = streamEscape(rest)
	if text == "" || !extends || len(split(text, maxMessage)) > 1 || len([]rune(rest)) > maxStreamText {
		if err := s.stop(ctx); err != nil {
			return "", false, err
		}
		if !s.deleted {
			if err := s.a.DeleteMessage(ctx, s.channel, s.ts); err != nil {
				return "", false, err
			}
			s.deleted = true
		}
		return "", false, nil
	}
	var opts []slack.MsgOption
	if rest != "" {
		opts = append(opts, slack.MsgOptionMarkdownText(rest))
	}
	if bs := tail(m); len(bs) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(bs...))
	}
	if m.Ref != "" {
		opts = append(opts, slack.MsgOptionMetadata(outboxMetadata(m.Ref, 0, 1)))
	}
	if err := s.stop(ctx, opts...); err != nil {
		return "", false, err
	}
	if m.Link != nil && !dm(m.ChatID) {
		s.a.sendLink(ctx, m)
	}
	return s.ts, true, nil
}

// stop stops the stream with opts (chat.stopStream), once: the send
// queue calls Finish again after a 429 on the chat.update or chat.delete
// that follows, and Slack refuses a second stop
// (message_not_in_streaming_state).
func (s *stream) stop(ctx context.Context, opts ...slack.MsgOption) error {
	if s.stopped {
		return nil
	}
	if _, _, err := s.api.StopStreamContext(ctx, s.channel, s.ts, opts...); err != nil {
		return fmt.Errorf("slack: stop stream %s in %s: %w", s.ts, s.channel, s.a.queueError(err))
	}
	s.stopped = true
	return nil
}

// tail is the blocks under a streamed answer: its buttons and feedback
// buttons (chat.stopStream's blocks argument,
// docs.slack.dev/reference/methods/chat.stopStream, takes the
// context_actions block of docs.slack.dev/reference/block-kit/blocks/context-actions-block),
// and in a DM its Details link.
func tail(m bot.Outgoing) []slack.Block {
	var out []slack.Block
	for _, b := range blocks("", m.Buttons) {
		if b.BlockType() != slack.MBTSection { // the text is the stream's
			out = append(out, b)
		}
	}
	if m.Link != nil && dm(m.ChatID) {
		out = append(out, linkBlock(m.Link))
	}
	return out
}
