package telegramtest

import (
	"slices"
	"testing"
)

func TestPrivacyMode(t *testing.T) {
	const group = -100
	tests := []struct {
		name  string
		setup func(*Server)
		text  string
		reply bool // a reply to the bot's message
		want  bool
	}{
		{"a DM", nil, "hello", false, true},
		{"plain text", nil, "lunch anyone?", false, false},
		{"a mention", nil, "@tidybot what's due?", false, false},
		{"a command for this bot", nil, "/undo@tidybot", false, true},
		{"a command for another bot", nil, "/undo@otherbot", false, false},
		{"a general command after this bot posted", nil, "/undo", false, true},
		{"a general command after another bot posted", func(s *Server) { s.AnotherBotPosted(group) }, "/undo", false, false},
		{"a reply to the bot", nil, "and the dentist?", true, true},
		{"privacy off", (*Server).PrivacyOff, "lunch anyone?", false, true},
		{"an admin bot", func(s *Server) { s.MakeAdmin(group) }, "lunch anyone?", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			defer s.Close()
			chat := int64(group)
			if tt.name == "a DM" {
				chat = 42
			}
			s.mu.Lock()
			s.nextMsg++
			botMsg := s.nextMsg
			s.messages[botMsg] = &Sent{ChatID: chat, MessageID: botMsg, Text: "Tidied."}
			s.lastBot[chat] = true
			s.mu.Unlock()
			if tt.setup != nil {
				tt.setup(s)
			}
			var id int
			if tt.reply {
				id = s.PushReply(chat, 7, botMsg, tt.text)
			} else {
				id = s.PushText(chat, 7, tt.text)
			}
			if got := id != 0 && s.Pending() == 1; got != tt.want {
				t.Errorf("delivered %v, want %v", got, tt.want)
			}
			if withheld := slices.Contains(s.Withheld(), tt.text); withheld == tt.want {
				t.Errorf("withheld %v, want %v", withheld, !tt.want)
			}
		})
	}
}
