package slack

import "github.com/tidybot/tidybot/bot"

var _ bot.TextLimiter = (*Adapter)(nil)

// MaxText implements bot.TextLimiter: the bot cuts an answer or question
// to what one Slack message shows.
func (a *Adapter) MaxText() int { return maxMessage }
