package slacktest

import (
	"net/http"
	"slices"
	"time"
)

// Reaction is an emoji the bot added to a message with reactions.add.
type Reaction struct {
	Channel, TS, Name string
	At                time.Time // when the fake recorded it
}

// react serves reactions.add (docs.slack.dev/reference/methods/reactions.add):
// scope reactions:write; channel, timestamp and name are required
// ("no_item_specified" without channel and timestamp, "invalid_name"
// without a name); the same reaction twice on one message is
// "already_reacted". The fake does not check that the message exists.
// Its limit (Tier 3) is in limits.go.
func (s *Server) react(w http.ResponseWriter, r *http.Request, tok string) {
	f := r.Form
	if !s.granted(w, "reactions:write", tok) {
		return
	}
	if f.Get("channel") == "" || f.Get("timestamp") == "" {
		s.fail(w, "no_item_specified", tok)
		return
	}
	if f.Get("name") == "" {
		s.fail(w, "invalid_name", tok)
		return
	}
	re := Reaction{Channel: f.Get("channel"), TS: f.Get("timestamp"), Name: f.Get("name"), At: time.Now()}
	s.mu.Lock()
	dup := slices.ContainsFunc(s.reactions, func(o Reaction) bool {
		return o.Channel == re.Channel && o.TS == re.TS && o.Name == re.Name
	})
	if !dup {
		s.reactions = append(s.reactions, re)
	}
	s.mu.Unlock()
	if dup {
		s.fail(w, "already_reacted", tok)
		return
	}
	answer(w, map[string]any{"ok": true})
}

// Reactions are the reactions the bot added in channel, in order.
func (s *Server) Reactions(channel string) []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Reaction
	for _, re := range s.reactions {
		if re.Channel == channel {
			out = append(out, re)
		}
	}
	return out
}
