package telegramtest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Reaction is one setMessageReaction the bot made
// (core.telegram.org/bots/api#setmessagereaction).
type Reaction struct {
	ChatID    int64
	MessageID int
	Emoji     []string // empty: the bot's reactions were removed
	At        time.Time
}

// reactionEmoji are the emoji a ReactionTypeEmoji may carry
// (core.telegram.org/bots/api#reactiontypeemoji: "Currently, it can be
// one of …"); 👀 is among them. Anything else is refused with
// REACTION_INVALID, as the live Bot API does.
var reactionEmoji = map[string]bool{}

func init() {
	for _, e := range []string{"👍", "👎", "❤", "🔥", "🥰", "👏", "😁", "🤔", "🤯", "😱", "🤬", "😢", "🎉", "🤩", "🤮", "💩", "🙏", "👌", "🕊", "🤡", "🥱", "🥴", "😍", "🐳", "❤\u200d🔥", "🌚", "🌭", "💯", "🤣", "⚡", "🍌", "🏆", "💔", "🤨", "😐", "🍓", "🍾", "💋", "🖕", "😈", "😴", "😭", "🤓", "👻", "👨\u200d💻", "👀", "🎃", "🙈", "😇", "😨", "🤝", "✍", "🤗", "🫡", "🎅", "🎄", "☃", "💅", "🤪", "🗿", "🆒", "💘", "🙉", "🦄", "😘", "💊", "🙊", "😎", "👾", "🤷\u200d♂", "🤷", "🤷\u200d♀", "😡"} {
		reactionEmoji[e] = true
	}
}

// setReaction is setMessageReaction
// (core.telegram.org/bots/api#setmessagereaction): chat_id, message_id
// and reaction, a JSON array of ReactionType; a bot sets at most one
// reaction, of type "emoji" from the allowed list
// (#reactiontypeemoji; custom emoji and paid reactions are not modelled).
// A message that is not in the chat is "message to react not found"; a
// chat where reactions are off (ReactionsOff) refuses every emoji with
// REACTION_INVALID, as the live Bot API does for reactions a chat does
// not allow. The error texts: "Can't parse reaction types JSON object"
// and "message to react" + " not found" are the Bot API server's
// (tdlib/telegram-bot-api telegram-bot-api/Client.cpp,
// get_reaction_types and process_set_message_reaction_query's
// check_message); REACTION_INVALID and REACTIONS_TOO_MANY are Telegram's
// own errors the server passes on (core.telegram.org/method/messages.sendReaction).
func (s *Server) setReaction(w http.ResponseWriter, f map[string][]string) {
	get := func(k string) string {
		if v := f[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	// Client.cpp's check_chat and check_message: an empty chat_id, then
	// a message_id that is not a positive number.
	if get("chat_id") == "" {
		fail(w, http.StatusBadRequest, "Bad Request: chat_id is empty", 0)
		return
	}
	chat, err1 := strconv.ParseInt(get("chat_id"), 10, 64)
	id, err2 := strconv.Atoi(get("message_id"))
	if err1 != nil || err2 != nil || id <= 0 {
		fail(w, http.StatusBadRequest, "Bad Request: message to react not found", 0)
		return
	}
	var types []struct {
		Type  string `json:"type"`
		Emoji string `json:"emoji"`
	}
	if r := get("reaction"); r != "" {
		if err := json.Unmarshal([]byte(r), &types); err != nil {
			fail(w, http.StatusBadRequest, "Bad Request: Can't parse reaction types JSON object", 0)
			return
		}
	}
	if len(types) > 1 {
		fail(w, http.StatusBadRequest, "Bad Request: REACTIONS_TOO_MANY", 0)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.inChat(chat, id) {
		fail(w, http.StatusBadRequest, "Bad Request: message to react not found", 0)
		return
	}
	var emoji []string
	for _, t := range types {
		if t.Type != "emoji" || !reactionEmoji[t.Emoji] || s.noReactions[chat] {
			fail(w, http.StatusBadRequest, "Bad Request: REACTION_INVALID", 0)
			return
		}
		emoji = append(emoji, t.Emoji)
	}
	s.reactions = append(s.reactions, Reaction{ChatID: chat, MessageID: id, Emoji: emoji, At: time.Now()})
	reply(w, true)
}

// inChat reports whether message id (a person's or the bot's) is in chat.
// mu must be held.
func (s *Server) inChat(chat int64, id int) bool {
	if m, ok := s.messages[id]; ok {
		return m.ChatID == chat
	}
	m, ok := s.userMsgs[id]
	if !ok {
		return false
	}
	c, _ := m["chat"].(map[string]any)
	cid, _ := c["id"].(int64)
	return cid == chat
}

// ReactionsOff makes chat refuse reactions, as a group whose admins
// turned them off does.
func (s *Server) ReactionsOff(chat int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noReactions == nil {
		s.noReactions = map[int64]bool{}
	}
	s.noReactions[chat] = true
}

// Reactions returns the reactions the bot set, in order.
func (s *Server) Reactions() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Reaction(nil), s.reactions...)
}

// Arrived returns when update was pushed (the zero time if it was not).
func (s *Server) Arrived(update int) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pushed[update]
}

// Deliver makes a text message from a user, as PushText does, for a bot
// in webhook mode: the update is not queued for getUpdates (Telegram
// keeps none while a webhook is set, core.telegram.org/bots/api#getupdates);
// it is returned for the test to POST to the webhook. The message can be
// replied and reacted to, and Arrived(update) is now.
func (s *Server) Deliver(chatID, userID int64, text string) (update int, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	update = s.nextUpd
	s.nextUpd++
	u := textUpdate(update, chatID, userID, text)
	msg := u["message"].(map[string]any)
	msg["message_id"] = s.userMessageID(update)
	s.userMsgs[msg["message_id"].(int)] = msg
	if s.pushed == nil {
		s.pushed = map[int]time.Time{}
	}
	s.pushed[update] = time.Now()
	body, _ = json.Marshal(u)
	return update, body
}
