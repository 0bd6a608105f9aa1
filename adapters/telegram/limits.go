package telegram

import "github.com/tidybot/tidybot/bot"

var _ bot.TextLimiter = (*Adapter)(nil)

// MaxText implements bot.TextLimiter: the bot cuts an answer or question
// to about three Telegram messages (it counts characters, Telegram UTF-16
// units, so a text full of emoji may take a fourth).
func (a *Adapter) MaxText() int { return 3 * maxText }
