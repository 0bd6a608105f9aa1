package slack

import (
	"strconv"
	"strings"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.Sequencer = (*Adapter)(nil)

// After implements bot.Sequencer. A message's ts is "the unique
// (per-channel) timestamp" of its posting (api.slack.com/events/message;
// "a message's ts value, uniquely identifying it within a channel. ex:
// 1405894322.002768", api.slack.com/methods/chat.getPermalink): Unix
// seconds and a fraction, so two messages of a channel are ordered by
// ts. A message posted through a response_url has no ts (its id is
// ours): it cannot be placed.
func (a *Adapter) After(x, y string) (after, ok bool) {
	xs, xf, okX := tsParts(x)
	ys, yf, okY := tsParts(y)
	if !okX || !okY {
		return false, false
	}
	if xs != ys {
		return xs > ys, true
	}
	return xf > yf, true
}

// tsParts splits a ts into whole seconds and the fraction, read as
// microseconds.
func tsParts(ts string) (secs, micros int64, ok bool) {
	whole, frac, _ := strings.Cut(ts, ".")
	if whole == "" || len(frac) > 6 || strings.HasPrefix(whole, "-") || strings.HasPrefix(frac, "-") {
		return 0, 0, false
	}
	secs, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if frac != "" {
		if micros, err = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64); err != nil {
			return 0, 0, false
		}
	}
	return secs, micros, true
}
