package telegram

import (
	"encoding/json"
	"fmt"
	"strconv"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// topicOf is the forum topic a raw update's message (or the message of a
// button press) belongs to: its message_thread_id when is_topic_message
// is set ("True, if the message is sent to a forum topic",
// core.telegram.org/bots/api#message), "" otherwise. A reply in an
// ordinary supergroup carries a message_thread_id too, the reply
// thread's; sendMessage takes one "for forum supergroups only"
// (core.telegram.org/bots/api#sendmessage), so that one is not kept.
// go-telegram-bot-api v5.5.1 has neither field: they are read here.
func topicOf(raw []byte) string {
	type msg struct {
		ThreadID int  `json:"message_thread_id"`
		Topic    bool `json:"is_topic_message"`
	}
	var u struct {
		Message  *msg `json:"message"`
		Callback *struct {
			Message *msg `json:"message"`
		} `json:"callback_query"`
	}
	if json.Unmarshal(raw, &u) != nil {
		return ""
	}
	m := u.Message
	if m == nil && u.Callback != nil {
		m = u.Callback.Message
	}
	if m == nil || !m.Topic || m.ThreadID == 0 {
		return ""
	}
	return strconv.Itoa(m.ThreadID)
}

// sendIn sends msg, in forum topic thread when one is given
// (sendMessage's message_thread_id, core.telegram.org/bots/api#sendmessage).
// go-telegram-bot-api v5.5.1's MessageConfig has no such field, so a
// message for a topic goes raw through MakeRequest with the parameters
// the adapter's messages use (chat_id, text, reply_markup).
func (a *Adapter) sendIn(msg tgbotapi.MessageConfig, thread string) (tgbotapi.Message, error) {
	if thread == "" {
		return a.api.Send(msg)
	}
	p := tgbotapi.Params{"chat_id": strconv.FormatInt(msg.ChatID, 10), "text": msg.Text, "message_thread_id": thread}
	p.AddNonEmpty("parse_mode", msg.ParseMode)
	if err := p.AddInterface("reply_markup", msg.ReplyMarkup); err != nil {
		return tgbotapi.Message{}, fmt.Errorf("telegram: send message: %w", err)
	}
	resp, err := a.api.MakeRequest("sendMessage", p)
	if err != nil {
		return tgbotapi.Message{}, err
	}
	var out tgbotapi.Message
	if err := json.Unmarshal(resp.Result, &out); err != nil {
		return tgbotapi.Message{}, fmt.Errorf("telegram: read sent message: %w", err)
	}
	return out, nil
}
