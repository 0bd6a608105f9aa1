package telegramtest

import (
	"net/http"
	"strconv"
	"time"
	"unicode/utf16"
)

// Draft is one sendMessageDraft the bot made
// (core.telegram.org/bots/api#sendmessagedraft): a partial message
// streamed to a private chat while it is generated, an ephemeral preview
// that is not a message (Messages does not list it).
type Draft struct {
	ChatID  int64
	DraftID int64
	Text    string
	At      time.Time
}

// sendDraft is sendMessageDraft (Bot API 9.3): chat_id, "Unique
// identifier for the target private chat"; draft_id, "must be non-zero";
// text, "0-4096 characters" (an empty one shows "Thinking…"). The docs
// give no error texts for these rules: the empty chat_id's is the Bot
// API server's (Client.cpp check_chat), the others are the fake's own
// words. DraftsOff answers as a Bot API server older than the method
// answers any method it does not know (failUnknownMethod).
func (s *Server) sendDraft(w http.ResponseWriter, f map[string][]string) {
	get := func(k string) string {
		if v := f[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	s.mu.Lock()
	off := s.noDrafts
	s.mu.Unlock()
	if off {
		failUnknownMethod(w)
		return
	}
	if get("chat_id") == "" {
		fail(w, http.StatusBadRequest, "Bad Request: chat_id is empty", 0)
		return
	}
	chat, err := strconv.ParseInt(get("chat_id"), 10, 64)
	if err != nil || chat <= 0 {
		// A private chat's id is its person's user id (positive);
		// groups' are negative (core.telegram.org/bots/api#chat).
		fail(w, http.StatusBadRequest, "Bad Request: drafts can be sent to private chats only", 0)
		return
	}
	id, err := strconv.ParseInt(get("draft_id"), 10, 64)
	if err != nil || id == 0 {
		fail(w, http.StatusBadRequest, "Bad Request: draft_id must be non-zero", 0)
		return
	}
	text := get("text")
	if len(utf16.Encode([]rune(text))) > 4096 {
		fail(w, http.StatusBadRequest, "Bad Request: text is too long", 0)
		return
	}
	s.mu.Lock()
	s.drafts = append(s.drafts, Draft{ChatID: chat, DraftID: id, Text: text, At: time.Now()})
	s.mu.Unlock()
	reply(w, true)
}

// Drafts returns the drafts the bot sent to chat, in order.
func (s *Server) Drafts(chat int64) []Draft {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Draft
	for _, d := range s.drafts {
		if d.ChatID == chat {
			out = append(out, d)
		}
	}
	return out
}

// DraftsOff makes sendMessageDraft unknown, as on a Bot API server
// older than 9.3.
func (s *Server) DraftsOff() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noDrafts = true
}

// DraftLapse is how long a draft is shown when it is not sent again:
// "the streamed draft is ephemeral and acts as a temporary 30-second
// preview - once the output is finalized, you must call sendMessage with
// the complete message to persist it" (core.telegram.org/bots/api#sendmessagedraft,
// as aiogram's generated aiogram/methods/send_message_draft.py quotes it).
// The fake reads it as 30 seconds from the draft's last update.
const DraftLapse = 30 * time.Second

// SetDraftLapse shortens the draft lapse (DraftLapse), for tests that
// cannot wait 30 seconds.
func (s *Server) SetDraftLapse(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draftLapse = d
}

// LiveDraft returns the draft chat shows now: the latest one sent to
// it, unless it was sent longer ago than the draft lapse.
func (s *Server) LiveDraft(chat int64) (Draft, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lapse := s.draftLapse
	if lapse <= 0 {
		lapse = DraftLapse
	}
	for i := len(s.drafts) - 1; i >= 0; i-- {
		if d := s.drafts[i]; d.ChatID == chat {
			return d, time.Since(d.At) < lapse
		}
	}
	return Draft{}, false
}
