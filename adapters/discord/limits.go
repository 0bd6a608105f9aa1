package discord

import (
	"math/big"

	"github.com/tidybot/tidybot/bot"
)

var (
	_ bot.TextLimiter = (*Adapter)(nil)
	_ bot.Sequencer   = (*Adapter)(nil)
)

// MaxText implements bot.TextLimiter: the bot cuts an answer or question
// to about three Discord messages (6,000 characters).
func (a *Adapter) MaxText() int { return 3 * maxText }

// After implements bot.Sequencer: a message id is a snowflake whose high
// bits are the time it was made
// (discord.com/developers/docs/reference#snowflakes), so in a channel
// (and its threads) the later message has the greater id.
func (a *Adapter) After(x, y string) (after, ok bool) {
	m, okX := new(big.Int).SetString(x, 10)
	n, okY := new(big.Int).SetString(y, 10)
	if !okX || !okY || m.Sign() <= 0 || n.Sign() <= 0 {
		return false, false
	}
	return m.Cmp(n) > 0, true
}
