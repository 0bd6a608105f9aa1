package telegramtest

import (
	"math"
	"strconv"
	"time"
)

// groupMessagesPerMinute is Telegram's limit on a bot's messages to one
// group: "your bot will not be able to send more than 20 messages per
// minute to the same group" (core.telegram.org/bots/faq, "My bot is
// hitting limits, how do I avoid this?"). A group's, supergroup's or
// channel's chat id is negative (core.telegram.org/bots/api#chat: "id
// … this number may have more than 32 significant bits"; private chats
// are the users' positive ids). The fake counts sendMessage calls it
// answered in the last 60 seconds (the FAQ gives no window: a sliding
// minute is the fake's reading) and answers the 21st 429 with
// parameters.retry_after, the seconds until the oldest leaves the
// window (core.telegram.org/bots/api#responseparameters). The FAQ's
// other figures are not enforced: "avoid sending more than one message
// per second" in a chat allows bursts of no stated size, and "not more
// than 30 messages per second or so" across chats is approximate.
const groupMessagesPerMinute = 20

// groupOverLimit reports, for a call of method to chatID, the
// retry_after in seconds when it is over the group limit; 0 when it may
// be made, which counts it. mu must be held.
func (s *Server) groupOverLimit(method, chatID string) int {
	chat, err := strconv.ParseInt(chatID, 10, 64)
	if method != "sendMessage" || err != nil || chat >= 0 {
		return 0
	}
	if s.groupSends == nil {
		s.groupSends = map[int64][]time.Time{}
	}
	now := time.Now()
	sent := s.groupSends[chat]
	for len(sent) > 0 && now.Sub(sent[0]) >= time.Minute {
		sent = sent[1:]
	}
	if len(sent) >= groupMessagesPerMinute {
		s.groupSends[chat] = sent
		s.throttled++
		return max(1, int(math.Ceil(sent[0].Add(time.Minute).Sub(now).Seconds())))
	}
	s.groupSends[chat] = append(sent, now)
	return 0
}

// Throttled is how many calls the fake answered 429 for being over
// Telegram's limits (not those RateLimit asked for).
func (s *Server) Throttled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.throttled
}
