package telegram

import (
	"strconv"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.Sequencer = (*Adapter)(nil)

// After implements bot.Sequencer: a message_id is the "unique message
// identifier inside this chat" (core.telegram.org/bots/api#message),
// given in the order the messages reach the chat, the bot's and its
// people's alike, so the later message has the greater id.
func (a *Adapter) After(x, y string) (after, ok bool) {
	m, errX := strconv.ParseInt(x, 10, 64)
	n, errY := strconv.ParseInt(y, 10, 64)
	if errX != nil || errY != nil || m <= 0 || n <= 0 {
		return false, false
	}
	return m > n, true
}
