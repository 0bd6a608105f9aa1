package telegramtest

// inTopic makes msg a message in forum topic topic: a forum is a
// supergroup with is_forum set (core.telegram.org/bots/api#chat), and a
// message in one of its topics carries message_thread_id, the topic's
// id, and is_topic_message true (core.telegram.org/bots/api#message).
// The bot answers in the topic by sending message_thread_id back
// (core.telegram.org/bots/api#sendmessage); Sent.ThreadID records it.
func inTopic(msg map[string]any, topic int) {
	chat := msg["chat"].(map[string]any)
	chat["type"], chat["is_forum"] = "supergroup", true
	msg["message_thread_id"], msg["is_topic_message"] = topic, true
}
