package telegram

import (
	"log/slog"
	"strings"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/tidybot/tidybot/bot"
)

// Privacy mode (core.telegram.org/bots/features#privacy-mode), on by
// default: in a group the bot receives only commands meant for it
// (/command@this_bot), general commands when it was the last bot to
// post, and replies to its messages; an @mention, or any other message,
// does not reach it. With privacy off (BotFather's /setprivacy), or as a
// group admin, it receives every group message and answers those
// addressed to it: a mention, a reply to it, /command@this_bot. The bot
// works within the default: /help in a group spells commands
// /command@this_bot, and a question is asked for as a reply.

var _ bot.SharedChats = (*Adapter)(nil)

// SharedCommandName implements bot.SharedChats: /undo@this_bot reaches
// the bot in a group whatever bot posted last.
func (a *Adapter) SharedCommandName(name string) string {
	return a.CommandName(name) + "@" + a.self
}

// SharedChatHelp implements bot.SharedChats.
func (a *Adapter) SharedChatHelp() string {
	return "In a group, reply to one of my messages to talk to me, or type a command with my name (" + a.SharedCommandName("help") + ")."
}

// logPrivacy tells the owner at start-up what reaches the bot in groups,
// from getMe's can_read_all_group_messages (core.telegram.org/bots/api#user:
// "True, if privacy mode is disabled for the bot").
func (a *Adapter) logPrivacy(canReadAll bool) {
	if canReadAll {
		a.log.Info("telegram: privacy mode is off: the bot receives every group message and answers those addressed to it (an @mention, a reply to it, /command@" + a.self + ")")
		return
	}
	a.log.Info("telegram: privacy mode is on: in groups the bot receives only /command@"+a.self+", commands when it posted last, and replies to its messages; "+
		"@mentions do not reach it. To let people write @"+a.self+" in groups, turn privacy off with BotFather's /setprivacy (then remove and re-add the bot to each group) or make the bot a group admin",
		slog.String("bot", a.self))
}

// askForReply makes a question in a group ask for its answer as a reply
// (core.telegram.org/bots/api#forcereply), which reaches the bot in
// privacy mode; a question with buttons keeps them (a press always
// reaches the bot), as a message has one reply_markup.
func askForReply(msg *tgbotapi.MessageConfig, m bot.Outgoing) {
	if !m.Question || len(m.Buttons) > 0 || !strings.HasPrefix(m.ChatID, "-") {
		return
	}
	msg.ReplyMarkup = tgbotapi.ForceReply{ForceReply: true, InputFieldPlaceholder: "Your answer"}
}
