package discord

import "github.com/tidybot/tidybot/bot"

// In a server channel only what addresses the bot reaches it: a
// mention (or a reply to one of its messages, which pings it) and its
// slash commands. Without the privileged MESSAGE_CONTENT intent those
// are also the only server messages whose text the bot gets.

var _ bot.SharedChats = (*Adapter)(nil)

// SharedCommandName implements bot.SharedChats: a slash command is
// typed the same in a server (Discord lists the bot's commands).
func (a *Adapter) SharedCommandName(name string) string { return a.CommandName(name) }

// SharedChatHelp implements bot.SharedChats.
func (a *Adapter) SharedChatHelp() string {
	return "In a server channel, mention me (@" + a.name + ") to talk to me: I answer in a thread, where you mention me again or reply to my messages. The slash commands (" + a.CommandName("help") + ") work everywhere."
}
