package telegram

import (
	"context"
	"log/slog"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/utf16text"
)

// withLink adds a URL button row (core.telegram.org/bots/api#inlinekeyboardbutton)
// under kb.
func withLink(kb *tgbotapi.InlineKeyboardMarkup, l *bot.Link) *tgbotapi.InlineKeyboardMarkup {
	row := tgbotapi.NewInlineKeyboardRow(tgbotapi.NewInlineKeyboardButtonURL(utf16text.Clip(l.Label, 64), l.URL))
	if kb == nil {
		k := tgbotapi.NewInlineKeyboardMarkup(row)
		return &k
	}
	kb.InlineKeyboard = append(kb.InlineKeyboard, row)
	return kb
}

// sendLink gives the link of an answer in a group to its user alone, in
// their private chat with the bot (whose id is the user's id). Telegram
// refuses it when the person never started the bot; that is logged, as
// the answer itself was delivered.
func (a *Adapter) sendLink(ctx context.Context, m bot.Outgoing) {
	user, err := chatID(m.Link.UserID)
	if err != nil {
		return
	}
	msg := tgbotapi.NewMessage(user, "What I did for your request in the group, step by step (only you got this link):")
	msg.ReplyMarkup = withLink(nil, m.Link)
	if err := a.call(ctx, "send link", func() error { _, err := a.api.Send(msg); return err }); err != nil {
		a.log.Info("telegram: could not send the Details link privately (has the person started the bot?)", slog.String("chat_id", m.ChatID), slog.Any("err", err))
	}
}
