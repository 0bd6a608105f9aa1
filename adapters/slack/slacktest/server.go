// Package slacktest is a fake Slack on httptest: the Web API methods the
// adapter calls (auth.test, chat.postMessage, chat.update,
// conversations.open, conversations.history, conversations.replies,
// apps.connections.open, the assistant pane's assistant.threads.* and
// events (assistant.go), and chat.startStream, chat.appendStream and
// chat.stopStream (stream.go), and the Home tab's views.publish (views.go)) speaking the real wire protocol (form-encoded
// POSTs to /api/<method>, JSON answers with "ok"), slash commands'
// response_url, Socket Mode over a WebSocket, the Events API callbacks
// Slack sends for a message, and helpers to sign requests the way Slack
// signs them. Each rule it enforces names its source.
package slacktest

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Token is the bot token the server accepts; BotUserID is the bot's user.
const (
	Token     = "xoxb-slacktest"
	AppToken  = "xapp-slacktest"
	BotUserID = "UBOT"
	BotID     = "BBOT"
)

// Posted is a message the bot posted, as it is now (after updates).
type Posted struct {
	Channel  string
	TS       string
	ThreadTS string
	// Text is the message's text field (the notification fallback when
	// there are blocks).
	Text string
	// Sections are the texts of its section blocks, in order.
	Sections []string
	// Buttons are the values of the buttons in the blocks; Labels their text.
	Buttons []string
	Labels  []string
	// URLs are the addresses of link buttons ("" for other buttons).
	URLs    []string
	Updates int
	// User is the only one who sees an ephemeral message
	// (chat.postEphemeral, or a response_url's: the person who typed
	// its command).
	User string
	// ResponseURL is set for a message posted through a slash command's
	// or a button's response_url; Ephemeral when only its user sees it.
	ResponseURL bool
	Ephemeral   bool
	// Metadata is the message metadata posted with it, nil for none.
	Metadata *Metadata
	// Feedback are the values of its feedback buttons (👍 then 👎) and
	// FeedbackAction their action_id; nil without (see assistant.go).
	Feedback       []string
	FeedbackAction string
	// At is when the fake recorded the post.
	At time.Time
}

// Metadata is a message's metadata: "event_type" and "event_payload"
// (api.slack.com/metadata/using, docs.slack.dev/messaging/message-metadata).
type Metadata struct {
	EventType    string         `json:"event_type"`
	EventPayload map[string]any `json:"event_payload"`
}

// Shown is what Slack shows of the message: its section blocks when it
// has any, else its text.
func (p Posted) Shown() string {
	if len(p.Sections) > 0 {
		return strings.Join(p.Sections, "\n")
	}
	return p.Text
}

// hook is a response_url handed out with a slash command.
type hook struct {
	channel string
	user    string // who typed the command
	issued  time.Time
	used    int
}

// Server is a fake Slack.
type Server struct {
	// URL is SLACK_API_URL: it ends in /api/.
	URL string
	srv *httptest.Server

	mu          sync.Mutex // protects the fields below
	conns       []*wsConn
	acks        map[string]bool
	envelopes   map[string]bool // envelope ids sent
	strayAcks   []string        // acks that name no envelope we sent
	envSeq      int
	posts       []*Posted
	byTS        map[string]*Posted // chat.postMessage's posts by channel and ts, for chat.update
	deleted     int                // messages chat.delete removed
	seq         int
	eventSeq    int
	calls       map[string]int
	refused     int // calls answered ok:false (see Refused)
	limited     map[string]int
	lanes       map[string][]time.Time // calls counted for Slack's limits, by method (limits.go)
	throttled   map[string]int         // 429s for calls over those limits, by method (Throttled)
	outside     map[string]bool        // channels the bot is not a member of
	hooks       map[string]*hook
	hookSeq     int
	echoTokens  bool
	files       map[string]*shared       // by file id
	ims         map[string]string        // the bot's IM channel with each user (see IM)
	opens       int                      // conversations.open calls
	heard       []Message                // people's messages sent as events (see Events)
	subscribed  map[string]bool          // the app's bot_events (subscribe.go); nil: the default ones
	scopes      []string                 // the bot token's scopes (scopes.go); nil: auth.test lists none
	panes       map[string]*Pane         // assistant threads by channel and thread ts (assistant.go)
	statusLapse time.Duration            // a status's lifetime without a message, 0 for Slack's (assistant.go)
	streams     streaming                // streamed messages (stream.go)
	homes       map[string]*Home         // each person's Home tab view (views.go)
	reactions   []Reaction               // reactions.add's (reactions.go)
	held        map[string]chan struct{} // methods whose calls wait until released (Hold)
}

// New starts a fake; close it with Close.
func New() *Server {
	s := &Server{byTS: map[string]*Posted{}, calls: map[string]int{}, limited: map[string]int{}, throttled: map[string]int{}, acks: map[string]bool{}, envelopes: map[string]bool{},
		outside: map[string]bool{}, hooks: map[string]*hook{}, ims: map[string]string{}}
	s.srv = httptest.NewServer(s)
	s.URL = s.srv.URL + "/api/"
	return s
}

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

func answer(w http.ResponseWriter, v map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// fail answers a Web API error ({"ok":false,"error":code}). With
// EchoTokens the error also carries the token the request used, as a
// misbehaving proxy or a verbose upstream may: the adapter must keep it
// out of its errors and logs.
func (s *Server) fail(w http.ResponseWriter, code, token string) {
	s.mu.Lock()
	echo := s.echoTokens
	s.refused++
	s.mu.Unlock()
	if echo && token != "" {
		code += " token=" + token
	}
	answer(w, map[string]any{"ok": false, "error": code})
}

// EchoTokens makes every error answer repeat the token of its request.
func (s *Server) EchoTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.echoTokens = true
}

// NotMember makes the bot a non-member of channel: chat.postMessage and
// chat.update there answer not_in_channel ("Cannot post user messages to a
// channel they are not in", docs.slack.dev/reference/methods/chat.postMessage#errors).
// A slash command's response_url still reaches it.
func (s *Server) NotMember(channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outside[channel] = true
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/ws" {
		s.socket(w, r)
		return
	}
	if id, ok := strings.CutPrefix(r.URL.Path, "/hooks/"); ok {
		s.respond(w, r, id)
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/files-pri/"); ok {
		s.serveFile(w, r, rest)
		return
	}
	if r.URL.Path == "/signin" {
		serveSignIn(w)
		return
	}
	method, ok := strings.CutPrefix(r.URL.Path, "/api/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		answer(w, map[string]any{"ok": false, "error": "invalid_form_data"})
		return
	}
	tok := r.Form.Get("token")
	if h := r.Header.Get("Authorization"); h != "" {
		tok = strings.TrimPrefix(h, "Bearer ")
	}
	s.mu.Lock()
	s.calls[method]++
	// A 429 carries Retry-After in seconds
	// (https://api.slack.com/apis/rate-limits).
	if n := s.limited[method]; n > 0 {
		s.limited[method] = n - 1
		s.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	if after := s.overLimit(method, r.Form); after > 0 {
		s.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(after))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	gate := s.held[method]
	s.mu.Unlock()
	if gate != nil {
		select { // a slow Slack: the call waits, answered once released
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	if method == "apps.connections.open" {
		if tok != AppToken {
			s.fail(w, "invalid_auth", tok)
			return
		}
		answer(w, map[string]any{"ok": true, "url": "ws://" + r.Host + "/ws"})
		return
	}
	if tok != Token {
		s.fail(w, "invalid_auth", tok)
		return
	}
	switch method {
	case "auth.test":
		s.scopesHeader(w)
		// As docs.slack.dev/reference/methods/auth.test answers: the
		// workspace's url and name too.
		answer(w, map[string]any{"ok": true, "user_id": BotUserID, "bot_id": BotID, "team_id": "T1", "user": "tidybot",
			"team": "Tidy Team", "url": "https://tidyteam.slack.com/"})
	case "chat.postMessage":
		s.post(w, r, tok)
	case "chat.update":
		s.update(w, r, tok)
	case "chat.delete":
		s.delete(w, r, tok)
	case "chat.postEphemeral":
		s.postEphemeral(w, r, tok)
	case "reactions.add":
		s.react(w, r, tok)
	case "conversations.open":
		s.open(w, r, tok)
	case "conversations.history":
		s.history(w, r, tok)
	case "conversations.replies":
		s.replies(w, r, tok)
	case "views.publish":
		s.publishView(w, r, tok)
	default:
		if s.serveStream(w, r, method, tok) {
			return
		}
		if !s.assistant(w, r, method, tok) {
			s.fail(w, "unknown_method", tok)
		}
	}
}

// block is the part of a Block Kit block the fake reads.
type block struct {
	Type string `json:"type"`
	Text *struct {
		Text string `json:"text"`
	} `json:"text"`
	Elements []struct {
		Type  string `json:"type"`
		Value string `json:"value"`
		URL   string `json:"url"`
		Text  struct {
			Text string `json:"text"`
		} `json:"text"`
	} `json:"elements"`
}

// shown is what a message's blocks show, as the fake reads them.
type shown struct {
	sections, values, labels, urls []string
	feedback                       []string // the feedback buttons' values (👍 then 👎)
	action                         string   // their action_id
}

// readShown reads blocks as readLinks and readFeedback do; ok is false
// for blocks either refuses (invalid_blocks).
func readShown(raw string) (shown, bool) {
	var r shown
	var ok, fbOK bool
	r.sections, r.values, r.labels, r.urls, ok = readLinks(raw)
	r.feedback, r.action, fbOK = readFeedback(raw)
	return r, ok && fbOK
}

// buttons sets p's buttons, links and feedback buttons to r's.
func (p *Posted) buttons(r shown) {
	p.Buttons, p.Labels, p.URLs = r.values, r.labels, r.urls
	p.Feedback, p.FeedbackAction = r.feedback, r.action
}

// readLinks checks blocks against Block Kit's limits and returns the
// section texts and the buttons with their urls: at most 50 blocks in a
// message (docs.slack.dev/reference/block-kit/blocks), at most 3,000
// characters in a section's text
// (docs.slack.dev/reference/block-kit/blocks/section-block) and in a
// button's url (docs.slack.dev/reference/block-kit/block-elements/button-element);
// beyond them Slack answers invalid_blocks.
func readLinks(raw string) (sections, values, labels, urls []string, ok bool) {
	if raw == "" {
		return nil, nil, nil, nil, true
	}
	var bs []block
	if err := json.Unmarshal([]byte(raw), &bs); err != nil || len(bs) > 50 {
		return nil, nil, nil, nil, false
	}
	for _, b := range bs {
		if b.Type == "section" && b.Text != nil {
			if len([]rune(b.Text.Text)) > 3000 {
				return nil, nil, nil, nil, false
			}
			sections = append(sections, b.Text.Text)
		}
		for _, e := range b.Elements {
			if e.Type == "button" {
				if len(e.URL) > 3000 {
					return nil, nil, nil, nil, false
				}
				values = append(values, e.Value)
				labels = append(labels, e.Text.Text)
				urls = append(urls, e.URL)
			}
		}
	}
	return sections, values, labels, urls, true
}

func (s *Server) member(channel string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.outside[channel]
}

// post is chat.postMessage (docs.slack.dev/reference/methods/chat.postMessage):
// text or blocks is required (no_text), the bot must be in the channel
// (not_in_channel), and text over 40,000 characters is msg_too_long (the
// page's errors table and its text argument).
func (s *Server) post(w http.ResponseWriter, r *http.Request, tok string) {
	f := r.Form
	if f.Get("channel") == "" {
		s.fail(w, "channel_not_found", tok)
		return
	}
	if !s.member(f.Get("channel")) {
		s.fail(w, "not_in_channel", tok)
		return
	}
	if f.Get("text") == "" && f.Get("blocks") == "" {
		s.fail(w, "no_text", tok)
		return
	}
	if len([]rune(f.Get("text"))) > 40000 {
		s.fail(w, "msg_too_long", tok)
		return
	}
	p, ok := s.keep(w, f, tok, false)
	if !ok {
		return
	}
	answer(w, map[string]any{"ok": true, "channel": p.Channel, "ts": p.TS, "message": map[string]any{"text": p.Text, "ts": p.TS}})
}

// readMetadata reads a message's metadata argument, nil for none; ok
// is false for metadata that is not a JSON object with an event_type
// and an event_payload.
func readMetadata(raw string) (meta *Metadata, ok bool) {
	if raw == "" {
		return nil, true
	}
	meta = &Metadata{}
	if err := json.Unmarshal([]byte(raw), meta); err != nil || meta.EventType == "" || meta.EventPayload == nil {
		return nil, false
	}
	return meta, true
}

// keep records a message chat.postMessage or chat.postEphemeral accepted,
// or answers invalid_blocks for blocks the fake cannot read, and
// invalid_metadata_format for metadata that is not a JSON object with
// an event_type and an event_payload (the errors table of
// docs.slack.dev/reference/methods/chat.postMessage; its metadata
// argument: "JSON object with event_type and event_payload fields").
func (s *Server) keep(w http.ResponseWriter, f url.Values, tok string, ephemeral bool) (*Posted, bool) {
	bs, ok := readShown(f.Get("blocks"))
	if !ok {
		s.fail(w, "invalid_blocks", tok)
		return nil, false
	}
	var meta *Metadata
	if !ephemeral {
		if meta, ok = readMetadata(f.Get("metadata")); !ok {
			s.fail(w, "invalid_metadata_format", tok)
			return nil, false
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	// A ts is the post's Unix time with a fraction that makes it the
	// message's id ("guaranteed unique within the context of a channel",
	// api.slack.com/messaging/retrieving); conversations.history's oldest
	// and latest compare against it.
	p := &Posted{Channel: f.Get("channel"), TS: fmt.Sprintf("%d.%06d", time.Now().Unix(), s.seq%1000000), ThreadTS: f.Get("thread_ts"), Text: f.Get("text"),
		Sections: bs.sections, Metadata: meta, At: time.Now()}
	p.buttons(bs)
	if ephemeral {
		p.Ephemeral, p.User = true, f.Get("user")
	}
	s.posts = append(s.posts, p)
	if !ephemeral {
		// chat.update finds only these: "Ephemeral messages can't be
		// updated in this way" (api.slack.com/messaging/modifying).
		s.byTS[p.Channel+" "+p.TS] = p
		s.replied(p.Channel, p.ThreadTS)
	}
	return p, true
}

// postEphemeral shows a message to one user of a channel
// (docs.slack.dev/reference/methods/chat.postEphemeral): channel and user
// are required, and text or blocks; the answer has message_ts.
func (s *Server) postEphemeral(w http.ResponseWriter, r *http.Request, tok string) {
	f := r.Form
	switch {
	case f.Get("channel") == "":
		s.fail(w, "channel_not_found", tok)
		return
	case f.Get("user") == "":
		s.fail(w, "user_not_found", tok)
		return
	case !s.member(f.Get("channel")):
		s.fail(w, "not_in_channel", tok)
		return
	case f.Get("text") == "" && f.Get("blocks") == "":
		s.fail(w, "no_text", tok)
		return
	}
	p, ok := s.keep(w, f, tok, true)
	if !ok {
		return
	}
	answer(w, map[string]any{"ok": true, "message_ts": p.TS})
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, tok string) {
	f := r.Form
	if !s.member(f.Get("channel")) {
		s.fail(w, "not_in_channel", tok)
		return
	}
	bs, ok := readShown(f.Get("blocks"))
	if !ok {
		s.fail(w, "invalid_blocks", tok)
		return
	}
	s.mu.Lock()
	if p := s.byTS[f.Get("channel")+" "+f.Get("ts")]; p != nil {
		p.Text = f.Get("text")
		// Leaving blocks out keeps the old ones; blocks given replace
		// them all, link buttons and feedback buttons included
		// (docs.slack.dev/reference/methods/chat.update).
		if f.Has("blocks") {
			p.Sections = bs.sections
			p.buttons(bs)
		}
		p.Updates++
		s.mu.Unlock()
		answer(w, map[string]any{"ok": true, "channel": p.Channel, "ts": p.TS, "text": p.Text})
		return
	}
	s.mu.Unlock()
	s.fail(w, "message_not_found", tok)
}

// delete answers chat.delete (docs.slack.dev/reference/methods/chat.delete):
// the message goes from the channel (its history, Posts) and a stream of
// it ends (its later calls answer message_not_found). Its errors, as the
// page lists them: channel_not_found (no channel), message_not_found (no
// message at ts, or deleted already). A bot token "may delete only
// messages posted by that bot" (cant_delete_message): the fake keeps
// only the bot's messages, so a ts of anyone else's is message_not_found.
func (s *Server) delete(w http.ResponseWriter, r *http.Request, tok string) {
	ch, ts := r.Form.Get("channel"), r.Form.Get("ts")
	if ch == "" {
		s.fail(w, "channel_not_found", tok)
		return
	}
	s.mu.Lock()
	p := s.byTS[ch+" "+ts]
	if p == nil {
		s.mu.Unlock()
		s.fail(w, "message_not_found", tok)
		return
	}
	delete(s.byTS, ch+" "+ts)
	for i, q := range s.posts {
		if q == p {
			s.posts = append(s.posts[:i:i], s.posts[i+1:]...)
			break
		}
	}
	if st := s.streams.byKey[ch+" "+ts]; st != nil {
		st.Open, st.Deleted = false, true
		delete(s.streams.byKey, ch+" "+ts)
	}
	s.deleted++
	s.mu.Unlock()
	answer(w, map[string]any{"ok": true, "channel": ch, "ts": ts})
}

// Deleted counts the messages chat.delete removed.
func (s *Server) Deleted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleted
}

// IM returns the id of the bot's own IM (direct message) channel with
// user: "D" and the user id without its "U" (U1's is D1), unless SetIM
// named another. Other D… channels are DMs between people, which the bot
// is no member of.
func (s *Server) IM(user string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.im(user)
}

// im is IM with mu held.
func (s *Server) im(user string) string {
	if ch, ok := s.ims[user]; ok {
		return ch
	}
	return "D" + strings.TrimPrefix(user, "U")
}

// SetIM makes channel the bot's IM with user.
func (s *Server) SetIM(user, channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ims[user] = channel
}

// Opens returns how often conversations.open was called.
func (s *Server) Opens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens
}

// open is conversations.open (api.slack.com/methods/conversations.open):
// "users: Comma separated lists of users. If only one user is included,
// this creates a 1:1 DM", and the answer is {"ok":true,"channel":{"id":
// "D…"}}, the same channel each time for the same user ("Opens or
// resumes a direct message"). Without users (nor channel) it answers
// users_list_not_supplied; this fake opens 1:1 DMs only, and answers
// a list of several users with method_not_supported_for_channel_type.
func (s *Server) open(w http.ResponseWriter, r *http.Request, tok string) {
	users := strings.TrimSpace(r.Form.Get("users"))
	switch {
	case users == "":
		s.fail(w, "users_list_not_supplied", tok)
		return
	case strings.Contains(users, ","):
		s.fail(w, "method_not_supported_for_channel_type", tok)
		return
	}
	s.mu.Lock()
	s.opens++
	ch := s.im(users)
	s.mu.Unlock()
	answer(w, map[string]any{"ok": true, "channel": map[string]any{"id": ch}})
}

// SlashCommand returns the form Slack posts to a slash command's Request
// URL when user types command (and text) in channel, with a fresh
// response_url served by this fake (api.slack.com/interactivity/slash-commands).
func (s *Server) SlashCommand(channel, user, command, text string) url.Values {
	id := s.newHook(channel, user)
	return url.Values{"command": {command}, "text": {text}, "user_id": {user}, "user_name": {"user"}, "channel_id": {channel},
		"team_id": {"T1"}, "trigger_id": {"trig-" + id}, "response_url": {s.srv.URL + "/hooks/" + id}, "api_app_id": {"A1"}}
}

func (s *Server) newHook(channel, user string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hookSeq++
	id := fmt.Sprintf("T1/%d/hooksecret%d", s.hookSeq, s.hookSeq)
	s.hooks[id] = &hook{channel: channel, user: user, issued: time.Now()}
	return id
}

// respond serves a response_url. Slack takes JSON, "up to 5 times within
// 30 minutes" of the command (api.slack.com/interactivity/slash-commands,
// "Sending delayed responses"); it posts into the channel even where the
// bot is not a member; response_type "ephemeral" (the default) shows the
// message only to the user, "in_channel" to everyone. replace_original on
// a slash command's response_url replaces nothing (slackapi/bolt-js#2287,
// slackapi/bolt-python#1268): only a button's response_url can, and this
// fake hands out slash commands' only.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, id string) {
	var body struct {
		Text            string          `json:"text"`
		Blocks          json.RawMessage `json:"blocks"`
		ResponseType    string          `json:"response_type"`
		ReplaceOriginal bool            `json:"replace_original"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || r.Method != http.MethodPost {
		http.Error(w, "invalid_payload", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	h, ok := s.hooks[id]
	switch {
	case !ok:
		s.mu.Unlock()
		http.Error(w, "invalid_url", http.StatusNotFound)
		return
	case time.Since(h.issued) > 30*time.Minute:
		s.mu.Unlock()
		http.Error(w, "expired_url", http.StatusNotFound)
		return
	case h.used >= 5:
		s.mu.Unlock()
		http.Error(w, "used_url", http.StatusNotFound)
		return
	}
	h.used++
	s.mu.Unlock()
	blocks := ""
	if len(body.Blocks) > 0 && string(body.Blocks) != "null" {
		blocks = string(body.Blocks)
	}
	bs, ok := readShown(blocks)
	if !ok {
		http.Error(w, "invalid_blocks", http.StatusBadRequest)
		return
	}
	if body.Text == "" && len(bs.sections) == 0 {
		http.Error(w, "no_text", http.StatusBadRequest)
		return
	}
	if body.ReplaceOriginal {
		_, _ = fmt.Fprint(w, "ok") // accepted, and nothing changes
		return
	}
	s.mu.Lock()
	p := &Posted{Channel: h.channel, Text: body.Text, Sections: bs.sections, ResponseURL: true, Ephemeral: body.ResponseType != "in_channel"}
	if p.Ephemeral {
		p.User = h.user // "visible only to the user who issued the command" (same page)
	}
	p.buttons(bs)
	s.posts = append(s.posts, p)
	s.mu.Unlock()
	_, _ = fmt.Fprint(w, "ok")
}

// Posts returns the bot's messages in a channel, in order, including
// those posted through a response_url.
func (s *Server) Posts(channel string) []Posted {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Posted
	for _, p := range s.posts {
		if p.Channel == channel {
			out = append(out, *p)
		}
	}
	return out
}

// AllPosts returns the bot's messages in every channel, in order.
func (s *Server) AllPosts() []Posted {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Posted, len(s.posts))
	for i, p := range s.posts {
		out[i] = *p
	}
	return out
}

// Calls returns how often a method was called.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// Refused returns how many Web API calls were answered {"ok":false}
// (not_in_channel, channel_not_found, …): each is a round trip that
// showed the person nothing.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// RateLimit makes the next n calls of method answer 429 (Retry-After 1).
func (s *Server) RateLimit(method string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limited[method] = n
}

// Hold makes the calls of method wait, unanswered, until release is
// called (a slow Slack); release is also called at the test's cleanup.
func (s *Server) Hold(t testing.TB, method string) (release func()) {
	gate := make(chan struct{})
	s.mu.Lock()
	if s.held == nil {
		s.held = map[string]chan struct{}{}
	}
	s.held[method] = gate
	s.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			s.mu.Lock()
			if s.held[method] == gate {
				delete(s.held, method)
			}
			s.mu.Unlock()
			close(gate)
		})
	}
	t.Cleanup(release)
	return release
}

// Sign returns the X-Slack-Signature of body at timestamp ts.
func Sign(secret, ts string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:", ts)
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// MessageEvent returns an Events API callback body for a message.
func MessageEvent(eventID, channel, channelType, user, text, ts, threadTS string) []byte {
	ev := map[string]any{"type": "message", "user": user, "text": text, "ts": ts, "channel": channel, "channel_type": channelType, "event_ts": ts}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	b, _ := json.Marshal(map[string]any{"token": "x", "team_id": "T1", "api_app_id": "A1", "type": "event_callback", "event_id": eventID, "event_time": 1700000000, "event": ev})
	return b
}

// NextTS returns the ts of a message a person posts now: after every
// message posted so far, the bot's included. A ts is the message's
// "unique (per-channel) timestamp" (api.slack.com/events/message), so a
// later message has a greater one; the bot's posts here take theirs from
// the same sequence.
func (s *Server) NextTS() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("%d.%06d", time.Now().Unix(), s.seq%1000000)
}

// Message is a message a person posts in Slack.
type Message struct {
	Channel string
	// ChannelType is "im" (a DM with the bot), "channel", "group"
	// (a private channel) or "mpim".
	ChannelType string
	User        string
	Text        string
	// TS is the message's ts; ThreadTS its thread's, for a reply.
	TS       string
	ThreadTS string
	// Files are shared with the message (see AddFile).
	Files []File
	// Team is the team of the person who wrote, when not the workspace
	// the app is installed in (T1): a member of another organisation
	// writing in a Slack Connect channel. Their events carry it as
	// user_team and source_team, fields set "when the message comes from
	// a channel that is shared between workspaces" (slack-go's
	// slackevents.MessageEvent and AppMentionEvent), while the envelope's
	// team_id stays T1, the workspace the event is delivered to
	// (docs.slack.dev/apis/events-api/#callback-field). Every message
	// event names its author's team ("team",
	// docs.slack.dev/reference/events/message).
	Team string
}

// Mention is how a message mentions the bot: "<@UBOT>".
const Mention = "<@" + BotUserID + ">"

// Events returns the Events API callback bodies Slack sends the app for
// m, of the events it subscribes to (Subscribe; by default message.im,
// message.channels, message.groups and app_mention), each with its own
// event_id: the message.* event for every message in a conversation the
// bot is in ("A message was posted to a channel",
// docs.slack.dev/reference/events/message.channels), and, when a message
// outside a DM mentions the bot, an app_mention event as well
// ("Subscribe to only the message events that mention your app";
// DMs are "not dispatched via app_mention",
// docs.slack.dev/reference/events/app_mention). One mention thus arrives
// twice; Slack promises no order between the two.
func (s *Server) Events(m Message) [][]byte {
	s.mu.Lock()
	s.heard = append(s.heard, m)
	s.mu.Unlock()
	team := cmp.Or(m.Team, "T1")
	inner := map[string]any{"type": "message", "user": m.User, "text": m.Text, "ts": m.TS, "channel": m.Channel, "channel_type": m.ChannelType, "event_ts": m.TS, "team": team}
	if m.ThreadTS != "" {
		inner["thread_ts"] = m.ThreadTS
	}
	if m.Team != "" && m.Team != "T1" {
		inner["user_team"], inner["source_team"] = m.Team, m.Team
	}
	var files []map[string]any
	for _, f := range m.Files {
		files = append(files, f.event())
	}
	if len(files) > 0 {
		// A message with files: subtype file_share and a files list
		// (docs.slack.dev/reference/events/message/file_share).
		inner["subtype"], inner["files"], inner["upload"] = "file_share", files, true
	}
	var out [][]byte
	if s.subscribes(MessageEvents[m.ChannelType]) {
		out = append(out, s.callback(inner))
	}
	if m.ChannelType != "im" && strings.Contains(m.Text, "<@"+BotUserID) && s.subscribes("app_mention") {
		mention := map[string]any{"type": "app_mention", "user": m.User, "text": m.Text, "ts": m.TS, "channel": m.Channel, "event_ts": m.TS}
		if m.ThreadTS != "" {
			mention["thread_ts"] = m.ThreadTS
		}
		if m.Team != "" && m.Team != "T1" {
			mention["user_team"], mention["source_team"] = m.Team, m.Team
		}
		if len(files) > 0 {
			mention["files"] = files
		}
		out = append(out, s.callback(mention))
	}
	return out
}

func (s *Server) callback(inner map[string]any) []byte {
	s.mu.Lock()
	s.eventSeq++
	id := fmt.Sprintf("Ev%06d", s.eventSeq)
	s.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"token": "x", "team_id": "T1", "api_app_id": "A1", "type": "event_callback", "event_id": id, "event_time": 1700000000, "event": inner})
	return b
}

// PushEvents sends the events of m (see Events) over Socket Mode, each
// in its own envelope, and returns the envelope ids.
func (s *Server) PushEvents(m Message) []string {
	var ids []string
	for _, b := range s.Events(m) {
		var payload map[string]any
		_ = json.Unmarshal(b, &payload)
		ids = append(ids, s.Push("events_api", payload))
	}
	return ids
}

// wsConn is a Socket Mode connection; gorilla allows one writer at a time.
type wsConn struct {
	mu sync.Mutex
	c  *websocket.Conn
}

func (w *wsConn) write(v any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.c.WriteJSON(v)
}

// socket serves a Socket Mode connection: hello, pings, envelopes out,
// acks in.
func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	conn := &wsConn{c: c}
	_ = conn.write(map[string]any{"type": "hello", "num_connections": 1})
	s.mu.Lock()
	s.conns = append(s.conns, conn)
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				conn.mu.Lock()
				err := c.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second))
				conn.mu.Unlock()
				if err != nil {
					return
				}
			}
		}
	}()
	defer func() {
		close(done)
		_ = c.Close()
		s.mu.Lock()
		for i, x := range s.conns {
			if x == conn {
				s.conns = append(s.conns[:i], s.conns[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
	}()
	for {
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if err := c.ReadJSON(&ack); err != nil {
			return
		}
		// Only envelopes carrying an envelope_id are acknowledged; hello and
		// disconnect carry none and take no answer
		// (api.slack.com/apis/connections/socket-implement, "Acknowledge
		// events"; slack-go socketmode/socket_mode_managed_conn.go parseEvent).
		s.mu.Lock()
		if s.envelopes[ack.EnvelopeID] {
			s.acks[ack.EnvelopeID] = true
		} else {
			s.strayAcks = append(s.strayAcks, ack.EnvelopeID)
		}
		s.mu.Unlock()
	}
}

// Connected reports whether a Socket Mode client is connected.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns) > 0
}

// Connections returns how many Socket Mode clients are connected (each
// replica of a serve holds its own).
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Push sends a Socket Mode envelope ("events_api", "slash_commands" or
// "interactive") with payload to the connected clients and returns its id.
func (s *Server) Push(kind string, payload any) string {
	s.mu.Lock()
	s.envSeq++
	id := fmt.Sprintf("env-%d", s.envSeq)
	s.envelopes[id] = true
	conns := append([]*wsConn(nil), s.conns...)
	s.mu.Unlock()
	env := map[string]any{"type": kind, "envelope_id": id, "payload": payload, "accepts_response_payload": kind != "events_api", "retry_attempt": 0, "retry_reason": ""}
	for _, c := range conns {
		_ = c.write(env)
	}
	return id
}

// Acked reports whether the client acknowledged an envelope.
func (s *Server) Acked(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acks[id]
}

// StrayAcks returns the acknowledgements that named no envelope sent (an
// empty envelope_id, as an ack of hello or disconnect would have).
func (s *Server) StrayAcks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.strayAcks...)
}

// Disconnect sends the connected clients a disconnect message, as Slack
// does before it refreshes a connection
// (api.slack.com/apis/connections/socket-implement#disconnect); the
// client opens a new one.
func (s *Server) Disconnect() {
	s.mu.Lock()
	conns := append([]*wsConn(nil), s.conns...)
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.write(map[string]any{"type": "disconnect", "reason": "refresh_requested", "debug_info": map[string]any{"host": "slacktest"}})
	}
}

// seen is a message of a channel as conversations.history and
// conversations.replies return it.
type seen struct {
	ts, threadTS, user, text string
	meta                     *Metadata
	bot                      bool
}

func (m seen) json(withMeta bool) map[string]any {
	out := map[string]any{"type": "message", "ts": m.ts, "text": m.text}
	if m.threadTS != "" {
		out["thread_ts"] = m.threadTS
	}
	if m.bot {
		out["bot_id"], out["user"] = BotID, BotUserID
	} else {
		out["user"] = m.user
	}
	// Metadata comes back only when asked for with include_all_metadata
	// (docs.slack.dev/reference/methods/conversations.history and
	// conversations.replies: "include_all_metadata: Return all metadata
	// associated with this message").
	if withMeta && m.meta != nil {
		out["metadata"] = m.meta
	}
	return out
}

// channel returns the messages of channel the bot can read: its own
// posts (not ephemeral ones, which only their user sees, nor those posted
// through a response_url, which the fake gives no ts) and the people's
// messages sent as events, oldest first.
func (s *Server) channel(channel string) []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []seen
	for _, p := range s.posts {
		if p.Channel == channel && !p.Ephemeral && p.TS != "" {
			out = append(out, seen{ts: p.TS, threadTS: p.ThreadTS, text: p.Text, meta: p.Metadata, bot: true})
		}
	}
	for _, m := range s.heard {
		if m.Channel == channel {
			out = append(out, seen{ts: m.TS, threadTS: m.ThreadTS, user: m.User, text: m.Text})
		}
	}
	slices.SortFunc(out, func(a, b seen) int { return compareTS(a.ts, b.ts) })
	return out
}

// compareTS orders two ts values ("1700000000.000001") by time.
func compareTS(a, b string) int {
	fa, _ := strconv.ParseFloat(a, 64)
	fb, _ := strconv.ParseFloat(b, 64)
	switch {
	case fa < fb:
		return -1
	case fa > fb:
		return 1
	}
	return strings.Compare(a, b)
}

// window keeps the messages between oldest and latest, exclusive unless
// inclusive is set ("Include messages with oldest or latest timestamps in
// results. Ignored unless either timestamp is specified.",
// docs.slack.dev/reference/methods/conversations.history).
func window(ms []seen, f url.Values) []seen {
	oldest, latest := f.Get("oldest"), f.Get("latest")
	inclusive := f.Get("inclusive") == "1" || f.Get("inclusive") == "true"
	var out []seen
	for _, m := range ms {
		if oldest != "" && (compareTS(m.ts, oldest) < 0 || !inclusive && compareTS(m.ts, oldest) == 0) {
			continue
		}
		if latest != "" && (compareTS(m.ts, latest) > 0 || !inclusive && compareTS(m.ts, latest) == 0) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// page answers one page of ms: limit messages (def by default) from the
// cursor on, with has_more and response_metadata.next_cursor when more
// are left (cursor pagination, docs.slack.dev/apis/web-api/pagination).
func page(w http.ResponseWriter, ms []seen, f url.Values, def int) {
	limit := def
	if n, err := strconv.Atoi(f.Get("limit")); err == nil && n > 0 {
		limit = min(n, 999)
	}
	start := 0
	if c := f.Get("cursor"); c != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(c, "next:"))
		if err != nil || n < 0 || n > len(ms) {
			answer(w, map[string]any{"ok": false, "error": "invalid_cursor"})
			return
		}
		start = n
	}
	end := min(start+limit, len(ms))
	withMeta := f.Get("include_all_metadata") == "1" || f.Get("include_all_metadata") == "true"
	msgs := []map[string]any{}
	for _, m := range ms[start:end] {
		msgs = append(msgs, m.json(withMeta))
	}
	out := map[string]any{"ok": true, "messages": msgs, "has_more": end < len(ms)}
	if end < len(ms) {
		out["response_metadata"] = map[string]any{"next_cursor": fmt.Sprintf("next:%d", end)}
	}
	answer(w, out)
}

// readable answers the error of a read of channel the bot may not make,
// and reports whether it may: channel_not_found without a channel,
// not_in_channel when the bot is no member
// (docs.slack.dev/reference/methods/conversations.history#errors).
func (s *Server) readable(w http.ResponseWriter, ch, tok string) bool {
	switch {
	case ch == "":
		s.fail(w, "channel_not_found", tok)
		return false
	case !s.member(ch):
		s.fail(w, "not_in_channel", tok)
		return false
	}
	return true
}

// history is conversations.history
// (docs.slack.dev/reference/methods/conversations.history): a channel's
// messages, newest first, 100 by default; replies in threads are not
// among them, only their parents; the bot must be a member
// (not_in_channel).
func (s *Server) history(w http.ResponseWriter, r *http.Request, tok string) {
	f := r.Form
	if !s.readable(w, f.Get("channel"), tok) {
		return
	}
	var top []seen
	for _, m := range window(s.channel(f.Get("channel")), f) {
		if m.threadTS == "" || m.threadTS == m.ts {
			top = append(top, m)
		}
	}
	slices.Reverse(top)
	page(w, top, f, 100)
}

// replies is conversations.replies
// (docs.slack.dev/reference/methods/conversations.replies): the thread
// whose parent is ts, parent first, then the replies oldest first; ts
// must name a message of the channel (thread_not_found).
func (s *Server) replies(w http.ResponseWriter, r *http.Request, tok string) {
	f := r.Form
	ts := f.Get("ts")
	if !s.readable(w, f.Get("channel"), tok) {
		return
	}
	all := s.channel(f.Get("channel"))
	known := false
	var thread []seen
	for _, m := range all {
		if m.ts == ts {
			known = true
		}
		if m.ts == ts || m.threadTS == ts {
			thread = append(thread, m)
		}
	}
	if !known && len(thread) == 0 {
		s.fail(w, "thread_not_found", tok)
		return
	}
	page(w, window(thread, f), f, 1000)
}
