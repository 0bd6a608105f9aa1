package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.Acknowledger = (*Adapter)(nil)

// ackEmoji is the reaction that says "seen"; it is in the list a
// ReactionTypeEmoji allows (core.telegram.org/bots/api#reactiontypeemoji).
const ackEmoji = "👀"

// Ack implements bot.Acknowledger with setMessageReaction
// (core.telegram.org/bots/api#setmessagereaction: chat_id, message_id,
// reaction as a JSON array of ReactionTypeEmoji). telegram-bot-api v5.5.1
// has no config for it, so it goes through the library's generic
// MakeRequest. One attempt, no 429 wait: a reaction that cannot be set
// at once is worth nothing later (the status message follows anyway).
func (a *Adapter) Ack(ctx context.Context, chat, messageID string) error {
	if _, err := chatID(chat); err != nil {
		return err
	}
	if _, err := strconv.Atoi(messageID); err != nil {
		return fmt.Errorf("telegram: bad message id %q", messageID)
	}
	reaction, err := json.Marshal([]map[string]string{{"type": "emoji", "emoji": ackEmoji}})
	if err != nil {
		return fmt.Errorf("telegram: react to message %s: %w", messageID, err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	_, err = a.api.MakeRequest("setMessageReaction", tgbotapi.Params{
		"chat_id": chat, "message_id": messageID, "reaction": string(reaction)})
	return a.wrap("react to message "+messageID, err)
}
