package slack

import (
	"context"
	"io"

	"github.com/slack-go/slack"
)

// slackAPI is the part of slack-go's *slack.Client the adapter calls
// (STYLE.md; go-joe/slack-adapter's slackAPI): its logic depends on
// these methods only, and slacktest covers the client itself.
type slackAPI interface {
	AuthTestContext(ctx context.Context) (*slack.AuthTestResponse, error)
	PostMessageContext(ctx context.Context, channelID string, options ...slack.MsgOption) (string, string, error)
	UpdateMessageContext(ctx context.Context, channelID, timestamp string, options ...slack.MsgOption) (string, string, string, error)
	DeleteMessageContext(ctx context.Context, channel, messageTimestamp string) (string, string, error)
	PostEphemeralContext(ctx context.Context, channelID, userID string, options ...slack.MsgOption) (string, error)
	GetFileContext(ctx context.Context, downloadURL string, writer io.Writer) error
	OpenConversationContext(ctx context.Context, params *slack.OpenConversationParameters) (*slack.Channel, bool, bool, error)
	GetConversationHistoryContext(ctx context.Context, params *slack.GetConversationHistoryParameters) (*slack.GetConversationHistoryResponse, error)
	GetConversationRepliesContext(ctx context.Context, params *slack.GetConversationRepliesParameters) ([]slack.Message, bool, string, error)
	// The App Home tab (home.go).
	PublishViewContext(ctx context.Context, req slack.PublishViewContextRequest) (*slack.ViewResponse, error)
	// The assistant pane (assistant.go).
	SetAssistantThreadsStatusContext(ctx context.Context, params slack.AssistantThreadsSetStatusParameters) error
	SetAssistantThreadsSuggestedPromptsContext(ctx context.Context, params slack.AssistantThreadsSetSuggestedPromptsParameters) error
	SetAssistantThreadsTitleContext(ctx context.Context, params slack.AssistantThreadsSetTitleParameters) error
	// The acknowledgement (ack.go).
	AddReactionContext(ctx context.Context, name string, item slack.ItemRef) error
}

var _ slackAPI = (*slack.Client)(nil)
