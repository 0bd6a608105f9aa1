package slacktest

// Event subscriptions: Slack sends an app the events its manifest
// subscribes to (settings.event_subscriptions.bot_events), and nothing
// else. A message in a conversation the bot is in is a message.* event
// by the conversation's type, each needing its history scope: message.im
// (im:history) for a DM with the app, message.channels
// (channels:history), message.groups (groups:history) for a private
// channel, and message.mpim (mpim:history), "A message was posted in a
// multiparty direct message channel", told apart by channel_type "mpim"
// (docs.slack.dev/reference/events/message.mpim). A mention outside a
// DM is an app_mention event too (app_mentions:read;
// docs.slack.dev/reference/events/app_mention).

// MessageEvents maps a conversation's channel_type to its message event.
var MessageEvents = map[string]string{"im": "message.im", "channel": "message.channels", "group": "message.groups", "mpim": "message.mpim"}

// EventScopes are the bot scopes each event needs.
var EventScopes = map[string]string{"message.im": "im:history", "message.channels": "channels:history",
	"message.groups": "groups:history", "message.mpim": "mpim:history", "app_mention": "app_mentions:read"}

// defaultEvents are the events of a Server no one called Subscribe on.
var defaultEvents = []string{"message.im", "message.channels", "message.groups", "app_mention"}

// Subscribe sets the events the app subscribes to (its manifest's
// bot_events): Events sends no other.
func (s *Server) Subscribe(events ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subscribed = map[string]bool{}
	for _, e := range events {
		s.subscribed[e] = true
	}
}

// subscribes reports whether the app gets event.
func (s *Server) subscribes(event string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subscribed == nil {
		for _, e := range defaultEvents {
			if e == event {
				return true
			}
		}
		return false
	}
	return s.subscribed[event]
}
