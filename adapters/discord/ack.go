package discord

import (
	"context"
	"fmt"

	"github.com/bwmarrin/discordgo"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.Acknowledger = (*Adapter)(nil)

// Ack implements bot.Acknowledger with the typing indicator ("Tidybot is
// typing…", POST /channels/{id}/typing,
// discord.com/developers/docs/resources/channel#trigger-typing-indicator):
// Discord's own sign that an answer is coming, shown for 10 seconds or
// until the bot posts. It shows where the person wrote: for a mention
// in a server channel in that channel, for one in a thread in the thread
// (chat is the thread's parent, the conversation's chat). One attempt,
// no 429 wait: a sign that cannot be shown at once is worth nothing later.
func (a *Adapter) Ack(ctx context.Context, chat, messageID string) error {
	if chat == "" {
		return fmt.Errorf("discord: typing: no channel")
	}
	if th := a.channelOf(messageID); th != "" {
		chat = th
	}
	bucket := discordgo.EndpointChannelTyping(chat)
	return a.queued(bucket, "typing in "+chat, func() error {
		return a.api.ChannelTyping(chat, discordgo.WithContext(ctx))
	})
}
