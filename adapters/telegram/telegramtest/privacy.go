package telegramtest

import "strings"

// Privacy mode, as core.telegram.org/bots/features#privacy-mode has it:
// "Privacy mode is enabled by default for all bots, except bots that were
// added to a group as admins (bot admins always receive all messages)."
// A bot in privacy mode receives, of the messages people send to a
// group, only:
//   - "Commands explicitly meant for them (e.g., /command@this_bot)";
//   - "General commands from users (e.g. /start) if the bot was the last
//     bot to send a message to the group";
//   - "Messages sent via this bot" (inline mode, which the fake has not);
//   - "Replies to any messages implicitly or explicitly meant for this
//     bot" (here: replies to the bot's own messages).
//
// An @mention of the bot is none of these: with privacy on it does not
// reach the bot. "All messages from private chats" always do, and button
// presses (callback queries) are not group messages. getMe reports the
// setting as can_read_all_group_messages
// (core.telegram.org/bots/api#user: "True, if privacy mode is disabled
// for the bot").

// PrivacyOff turns the bot's privacy mode off (BotFather's /setprivacy →
// Disable): it receives every group message.
func (s *Server) PrivacyOff() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.privacyOff = true
}

// MakeAdmin makes the bot an administrator of group chatID, where it then
// receives every message whatever its privacy mode.
func (s *Server) MakeAdmin(chatID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.admins[chatID] = true
}

// AnotherBotPosted records that some other bot was the last to post in
// group chatID, so that a general command there no longer reaches this
// bot in privacy mode (until it posts again).
func (s *Server) AnotherBotPosted(chatID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastBot[chatID] = false
}

// Withheld returns the texts (or captions) of the messages people sent
// that privacy mode kept from the bot, in order.
func (s *Server) Withheld() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.withheld...)
}

// delivered reports whether a message with text (or caption) sent to
// chatID, replying to a message of the bot's when toBot, reaches the bot;
// one that does not is recorded in withheld. Callers hold s.mu.
func (s *Server) delivered(chatID int64, text string, toBot bool) bool {
	if chatID > 0 || s.privacyOff || s.admins[chatID] || toBot {
		return true
	}
	if strings.HasPrefix(text, "/") {
		cmd, _, _ := strings.Cut(strings.Fields(text + " ")[0], "\n")
		if _, to, ok := strings.Cut(cmd, "@"); ok {
			if strings.EqualFold(to, BotUserName) {
				return true
			}
		} else if s.lastBot[chatID] {
			return true
		}
	}
	s.withheld = append(s.withheld, text)
	return false
}
