package slacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The assistant pane (Slack's "Agents & AI Apps": an app with
// assistant_view in its manifest opens beside any channel): when a
// person opens it, Slack starts a thread in their DM with the app and
// sends assistant_thread_started, with the channel they are viewing as
// its context; when they move to another channel with the pane open,
// assistant_thread_context_changed
// (docs.slack.dev/reference/events/assistant_thread_started,
// docs.slack.dev/reference/events/assistant_thread_context_changed).
// Their messages there are message.im events in that thread. The app
// sets the thread's suggested prompts, its title and a status line
// (assistant.threads.setSuggestedPrompts, .setTitle, .setStatus).

// Prompt is a suggested prompt: its title, and the message it sends.
type Prompt struct {
	Title   string `json:"title"`
	Message string `json:"message"`
}

// Pane is an assistant thread as Slack shows it.
type Pane struct {
	Channel, ThreadTS, User string
	// Context is the channel the person is viewing (the latest context).
	Context string
	// Statuses are every status the app set, in order ("" clears).
	Statuses []string
	// StatusAt is when each status was set.
	StatusAt []time.Time
	// Status is the status shown now: cleared when the app replies in
	// the thread ("The status will be automatically cleared when the
	// app sends a reply", docs.slack.dev/reference/methods/assistant.threads.setStatus),
	// and when it was set longer ago than the status lapse ("A two
	// minute timeout applies, which will cause the status to be removed
	// if no message has been sent", the same page; see SetStatusLapse).
	Status        string
	Title         string
	PromptsTitle  string
	Prompts       []Prompt
	PromptsCalled int
}

// StartAssistantThread opens the pane for user while they view channel
// viewing: a new thread in the bot's IM with them. It returns the
// thread's ts and the assistant_thread_started callback body (nil when
// the app does not subscribe to the event).
func (s *Server) StartAssistantThread(user, viewing string) (threadTS string, event []byte) {
	ts := s.NextTS()
	s.mu.Lock()
	ch := s.im(user)
	if s.panes == nil {
		s.panes = map[string]*Pane{}
	}
	s.panes[ch+" "+ts] = &Pane{Channel: ch, ThreadTS: ts, User: user, Context: viewing}
	s.mu.Unlock()
	if !s.subscribes("assistant_thread_started") {
		return ts, nil
	}
	return ts, s.callback(assistantEvent("assistant_thread_started", user, ch, ts, viewing))
}

// ChangeAssistantContext moves the person of an open pane to channel
// viewing and returns the assistant_thread_context_changed body (nil
// when the app does not subscribe to it).
func (s *Server) ChangeAssistantContext(channel, threadTS, viewing string) []byte {
	s.mu.Lock()
	p := s.panes[channel+" "+threadTS]
	if p == nil {
		s.mu.Unlock()
		return nil
	}
	p.Context = viewing
	user := p.User
	s.mu.Unlock()
	if !s.subscribes("assistant_thread_context_changed") {
		return nil
	}
	return s.callback(assistantEvent("assistant_thread_context_changed", user, channel, threadTS, viewing))
}

func assistantEvent(kind, user, channel, ts, viewing string) map[string]any {
	return map[string]any{"type": kind, "event_ts": ts, "assistant_thread": map[string]any{
		"user_id": user, "channel_id": channel, "thread_ts": ts,
		"context": map[string]any{"channel_id": viewing, "team_id": "T1", "enterprise_id": ""},
	}}
}

// AssistantThread returns the pane thread threadTS of channel as it is
// now; ok is false for a thread no pane started.
func (s *Server) AssistantThread(channel, threadTS string) (Pane, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.panes[channel+" "+threadTS]
	if p == nil {
		return Pane{}, false
	}
	out := *p
	if n := len(p.StatusAt); n > 0 && time.Since(p.StatusAt[n-1]) >= s.lapse() {
		out.Status = "" // lapsed (Pane.Status)
	}
	out.Statuses = slices.Clone(p.Statuses)
	out.StatusAt = slices.Clone(p.StatusAt)
	out.Prompts = slices.Clone(p.Prompts)
	return out, true
}

// StatusLapse is how long a thread's status is shown when nothing new
// is set nor posted: "A two minute timeout applies"
// (docs.slack.dev/reference/methods/assistant.threads.setStatus).
const StatusLapse = 2 * time.Minute

// SetStatusLapse shortens the status lapse (StatusLapse), for tests
// that cannot wait two minutes.
func (s *Server) SetStatusLapse(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statusLapse = d
}

// lapse is the status lapse; mu is held.
func (s *Server) lapse() time.Duration {
	if s.statusLapse > 0 {
		return s.statusLapse
	}
	return StatusLapse
}

// replied clears the status of a pane thread the bot posted in, as
// Slack does when the app replies (see Pane.Status). mu is held.
func (s *Server) replied(channel, threadTS string) {
	if p := s.panes[channel+" "+threadTS]; p != nil {
		p.Status = ""
	}
}

// pane finds the thread an assistant.threads.* call names, or answers
// its error: channel_not_found for no or an unknown channel, and
// invalid_thread_ts ("Thread not found") for a thread no pane started
// (the errors tables of docs.slack.dev/reference/methods/assistant.threads.setTitle
// and assistant.threads.setSuggestedPrompts; setStatus's page shows
// channel_not_found as its "typical error response").
func (s *Server) pane(w http.ResponseWriter, f url.Values, tok string) *Pane {
	ch, ts := f.Get("channel_id"), f.Get("thread_ts")
	s.mu.Lock()
	known := false
	for _, p := range s.panes {
		known = known || p.Channel == ch
	}
	p := s.panes[ch+" "+ts]
	s.mu.Unlock()
	switch {
	case ch == "" || (!known && !strings.HasPrefix(ch, "D")):
		s.fail(w, "channel_not_found", tok)
		return nil
	case p == nil:
		s.fail(w, "invalid_thread_ts", tok)
		return nil
	}
	return p
}

// statusThread finds the thread a setStatus call names: a pane thread in
// a DM (pane), or, since 2026-03-05, any thread of a channel the bot is
// in: the method "now accepts either the assistant:write or chat:write
// scope. This allows channel-based apps to use AI loading states in
// channels" (docs.slack.dev/changelog/2026/03/05/set-status-scope-update;
// the method's page lists Bot token scope chat:write,
// docs.slack.dev/reference/methods/assistant.threads.setStatus). The
// same page's Errors: "channel_not_found: Error returned when given an
// invalid channel_id" (the fake's reading: a channel the bot is not in)
// and "invalid_thread_ts: Error returned when given an invalid
// thread_ts" (here: none given). A channel thread is kept as a Pane
// (AssistantThread shows its status) with no user.
func (s *Server) statusThread(w http.ResponseWriter, f url.Values, tok string) *Pane {
	ch, ts := f.Get("channel_id"), f.Get("thread_ts")
	if ch == "" || strings.HasPrefix(ch, "D") {
		return s.pane(w, f, tok)
	}
	switch {
	case !s.member(ch):
		s.fail(w, "channel_not_found", tok)
		return nil
	case ts == "":
		s.fail(w, "invalid_thread_ts", tok)
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.panes == nil {
		s.panes = map[string]*Pane{}
	}
	p := s.panes[ch+" "+ts]
	if p == nil {
		p = &Pane{Channel: ch, ThreadTS: ts}
		s.panes[ch+" "+ts] = p
	}
	return p
}

// granted reports whether the bot token has scope, answering
// missing_scope when it has not; a Server granted nothing (Grant)
// allows every call.
func (s *Server) granted(w http.ResponseWriter, scope, tok string) bool {
	s.mu.Lock()
	ok := s.scopes == nil || slices.Contains(s.scopes, scope)
	s.mu.Unlock()
	if !ok {
		s.fail(w, "missing_scope", tok)
	}
	return ok
}

// assistant serves the assistant.threads.* methods; ok is false for
// another method.
func (s *Server) assistant(w http.ResponseWriter, r *http.Request, method, tok string) (ok bool) {
	f := r.Form
	switch method {
	case "assistant.threads.setStatus":
		// Scope chat:write (docs.slack.dev/reference/methods/assistant.threads.setStatus);
		// status is required, "" clears it; loading_messages holds at
		// most 10 messages (the page's arguments).
		if !s.granted(w, "chat:write", tok) {
			return true
		}
		p := s.statusThread(w, f, tok)
		if p == nil {
			return true
		}
		if !f.Has("status") || (f.Get("loading_messages") != "" && len(strings.Split(f.Get("loading_messages"), ",")) > 10) {
			s.fail(w, "invalid_arguments", tok)
			return true
		}
		s.mu.Lock()
		p.Status = f.Get("status")
		p.Statuses = append(p.Statuses, p.Status)
		p.StatusAt = append(p.StatusAt, time.Now())
		s.mu.Unlock()
	case "assistant.threads.setSuggestedPrompts":
		// Scope assistant:write; "up to four suggested prompts", each
		// "with its title and message attribute"
		// (docs.slack.dev/reference/methods/assistant.threads.setSuggestedPrompts).
		if !s.granted(w, "assistant:write", tok) {
			return true
		}
		p := s.pane(w, f, tok)
		if p == nil {
			return true
		}
		var prompts []Prompt
		if err := json.Unmarshal([]byte(f.Get("prompts")), &prompts); err != nil || len(prompts) == 0 || len(prompts) > 4 {
			s.fail(w, "invalid_arguments", tok)
			return true
		}
		for _, pr := range prompts {
			if pr.Title == "" || pr.Message == "" {
				s.fail(w, "invalid_arguments", tok)
				return true
			}
		}
		s.mu.Lock()
		p.Prompts, p.PromptsTitle = prompts, f.Get("title")
		p.PromptsCalled++
		s.mu.Unlock()
	case "assistant.threads.setTitle":
		// Scope assistant:write; channel_id, thread_ts and title are
		// required (docs.slack.dev/reference/methods/assistant.threads.setTitle).
		if !s.granted(w, "assistant:write", tok) {
			return true
		}
		p := s.pane(w, f, tok)
		if p == nil {
			return true
		}
		if strings.TrimSpace(f.Get("title")) == "" {
			s.fail(w, "invalid_arguments", tok)
			return true
		}
		s.mu.Lock()
		p.Title = f.Get("title")
		s.mu.Unlock()
	default:
		return false
	}
	answer(w, map[string]any{"ok": true})
	return true
}

// FeedbackPress returns the interactivity payload (the form Slack posts
// to the Interactivity Request URL, field payload) of user pressing the
// 👍 (positive) or 👎 of post p's feedback buttons: a block_actions
// payload whose action has type feedback_buttons and the value of the
// pressed button (docs.slack.dev/reference/block-kit/block-elements/feedback-buttons-element:
// "value: The value to send along with the interaction payload"; bolt-js
// FeedbackButtonsAction). It fails when p has no feedback buttons.
func (s *Server) FeedbackPress(p Posted, user string, positive bool) (url.Values, error) {
	if len(p.Feedback) != 2 {
		return nil, fmt.Errorf("slacktest: message %s has no feedback buttons", p.TS)
	}
	value := p.Feedback[1]
	if positive {
		value = p.Feedback[0]
	}
	s.mu.Lock()
	s.eventSeq++
	trigger := fmt.Sprintf("fb-%d", s.eventSeq)
	s.mu.Unlock()
	payload, err := json.Marshal(map[string]any{"type": "block_actions", "trigger_id": trigger, "user": map[string]any{"id": user},
		"team": map[string]any{"id": "T1"}, "channel": map[string]any{"id": p.Channel},
		"container": map[string]any{"type": "message", "message_ts": p.TS, "channel_id": p.Channel, "thread_ts": p.ThreadTS},
		"actions": []map[string]any{{"type": "feedback_buttons", "action_id": p.FeedbackAction, "block_id": "feedback", "value": value,
			"action_ts": s.NextTS()}}})
	if err != nil {
		return nil, err
	}
	return url.Values{"payload": {string(payload)}}, nil
}

// feedbackBlock is a context_actions block as the fake reads it.
type feedbackBlock struct {
	Type     string `json:"type"`
	Elements []struct {
		Type     string          `json:"type"`
		ActionID string          `json:"action_id"`
		Positive *feedbackButton `json:"positive_button"`
		Negative *feedbackButton `json:"negative_button"`
	} `json:"elements"`
}

type feedbackButton struct {
	Text struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"text"`
	Value string `json:"value"`
}

// readFeedback returns the values (👍 then 👎) and action id of the
// feedback buttons in blocks, and checks them as Slack does: a
// context_actions block holds 1 to 5 elements
// (docs.slack.dev/reference/block-kit/blocks/context-actions-block); a
// feedback_buttons element needs both buttons, each with a plain_text
// text of at most 75 characters and a value of at most 2,000
// (docs.slack.dev/reference/block-kit/block-elements/feedback-buttons-element),
// and lives only in a context_actions block ("must be used inside the
// context actions block"). ok is false for blocks Slack refuses
// (invalid_blocks).
func readFeedback(raw string) (values []string, action string, ok bool) {
	if raw == "" {
		return nil, "", true
	}
	var bs []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &bs); err != nil {
		return nil, "", false
	}
	for _, b := range bs {
		var fb feedbackBlock
		if err := json.Unmarshal(b, &fb); err != nil {
			return nil, "", false
		}
		for _, e := range fb.Elements {
			if e.Type != "feedback_buttons" {
				continue
			}
			if fb.Type != "context_actions" {
				return nil, "", false
			}
			for _, btn := range []*feedbackButton{e.Positive, e.Negative} {
				if btn == nil || btn.Text.Type != "plain_text" || btn.Text.Text == "" || len([]rune(btn.Text.Text)) > 75 || btn.Value == "" || len(btn.Value) > 2000 {
					return nil, "", false
				}
			}
			values, action = []string{e.Positive.Value, e.Negative.Value}, e.ActionID
		}
		if fb.Type == "context_actions" && (len(fb.Elements) == 0 || len(fb.Elements) > 5) {
			return nil, "", false
		}
	}
	return values, action, true
}
