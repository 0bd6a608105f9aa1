// Package telegramtest is a fake Telegram Bot API on httptest, speaking
// the real wire protocol (POST /bot<token>/<method>, parameters as a query,
// a form, multipart or JSON (params.go), {"ok":…,"result":…} answers), for
// tests of the Telegram adapter through the real client library.
package telegramtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultToken is the token the server accepts.
const DefaultToken = "123456:telegramtest-token"

// BotUserName is the fake bot's username (getMe), BotUserID its user id.
const (
	BotUserName = "tidybot"
	BotUserID   = 999
)

// Sent is a message the bot sent or edited.
type Sent struct {
	ChatID    int64
	MessageID int
	Text      string
	ParseMode string
	// Buttons are the inline keyboard's callback data, row by row flattened.
	Buttons []string
	Labels  []string
	// URLs are the addresses of URL buttons ("" for callback buttons).
	URLs []string
	// ForceReply is set when the message asks for a reply
	// (core.telegram.org/bots/api#forcereply).
	ForceReply bool
	// ThreadID is the forum topic the message was sent to: sendMessage's
	// message_thread_id, "unique identifier for the target message
	// thread (topic) of the forum; for forum supergroups only"
	// (core.telegram.org/bots/api#sendmessage); 0 for none.
	ThreadID int
	Edits    int
}

// Server is a fake Telegram Bot API.
type Server struct {
	// URL is TELEGRAM_API_URL: no /bot, no trailing slash.
	URL   string
	Token string

	srv *httptest.Server

	mu       sync.Mutex // protects the fields below
	updates  []json.RawMessage
	nextUpd  int
	messages map[int]*Sent // by message id
	order    []int
	nextMsg  int
	answers  []string               // "callback id: text"
	queries  map[string]bool        // callback query ids sent and not yet answered
	userMsgs map[int]map[string]any // messages people sent, by id, for replies
	byUpdate map[int]int            // the message id of each pushed message, by update id
	calls    map[string]int
	limited  map[string]int // method → 429s left
	// groupSends are the sendMessage calls to each group in the last
	// minute, throttled the calls refused over it (limits.go).
	groupSends map[int64][]time.Time
	throttled  int
	webhook    map[string]string
	commands   string
	arrived    chan struct{}
	echo       bool             // error descriptions repeat the request's token
	files      map[string]*file // by file_id
	// Privacy mode (privacy.go): off for every group, or per group where
	// the bot is an admin; lastBot marks the groups this bot posted in
	// last; withheld are the messages it did not receive.
	privacyOff bool
	admins     map[int64]bool
	lastBot    map[int64]bool
	withheld   []string

	// webhookError is getWebhookInfo's last_error_message (webhook.go).
	webhookError string

	// Reactions (reactions.go).
	reactions   []Reaction
	noReactions map[int64]bool
	drafts      []Draft // sendMessageDraft calls (draft.go)
	noDrafts    bool
	draftLapse  time.Duration     // a draft's lifetime, 0 for DraftLapse (draft.go)
	pushed      map[int]time.Time // when each update was pushed

	// poll is the getUpdates request waiting now (nil: none); conflicts
	// counts the requests a later one terminated.
	poll      chan struct{}
	conflicts int
}

// New starts a fake; close it with Close.
func New() *Server {
	s := &Server{Token: DefaultToken, messages: map[int]*Sent{}, calls: map[string]int{}, limited: map[string]int{}, nextUpd: 1, nextMsg: 100, arrived: make(chan struct{}),
		queries: map[string]bool{}, userMsgs: map[int]map[string]any{}, byUpdate: map[int]int{}, files: map[string]*file{}, admins: map[int64]bool{}, lastBot: map[int64]bool{}}
	s.srv = httptest.NewServer(s)
	s.URL = s.srv.URL
	return s
}

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

func reply(w http.ResponseWriter, result any) {
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(result)
	fmt.Fprintf(w, `{"ok":true,"result":%s}`, b)
}

func fail(w http.ResponseWriter, code int, desc string, retryAfter int) {
	if e, ok := w.(echoWriter); ok {
		desc += " (token " + e.token + ")"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	out := map[string]any{"ok": false, "error_code": code, "description": desc}
	if retryAfter > 0 {
		out["parameters"] = map[string]int{"retry_after": retryAfter}
	}
	_ = json.NewEncoder(w).Encode(out)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/file/bot"); ok {
		s.serveFile(w, r, rest)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		fail(w, http.StatusNotFound, "Not Found", 0)
		return
	}
	s.mu.Lock()
	echo := s.echo
	s.mu.Unlock()
	if echo {
		w = echoWriter{ResponseWriter: w, token: token}
	}
	if token != s.Token {
		fail(w, http.StatusUnauthorized, "Unauthorized", 0)
		return
	}
	f, err := params(r)
	if err != nil {
		fail(w, http.StatusBadRequest, "Bad Request: "+err.Error(), 0)
		return
	}
	s.mu.Lock()
	s.calls[method]++
	// A 429 carries parameters.retry_after
	// (https://core.telegram.org/bots/api#responseparameters).
	if n := s.limited[method]; n > 0 {
		s.limited[method] = n - 1
		s.mu.Unlock()
		fail(w, http.StatusTooManyRequests, "Too Many Requests: retry after 1", 1)
		return
	}
	if after := s.groupOverLimit(method, f.Get("chat_id")); after > 0 {
		s.mu.Unlock()
		fail(w, http.StatusTooManyRequests, "Too Many Requests: retry after "+strconv.Itoa(after), after)
		return
	}
	s.mu.Unlock()
	switch method {
	case "getMe":
		s.mu.Lock()
		all := s.privacyOff
		s.mu.Unlock()
		reply(w, map[string]any{"id": BotUserID, "is_bot": true, "first_name": "tidybot", "username": BotUserName,
			"can_join_groups": true, "can_read_all_group_messages": all, "supports_inline_queries": false})
	case "setMyCommands":
		if desc := checkCommands(f.Get("commands")); desc != "" {
			fail(w, http.StatusBadRequest, desc, 0)
			return
		}
		s.mu.Lock()
		s.commands = f.Get("commands")
		s.mu.Unlock()
		reply(w, true)
	case "getWebhookInfo":
		s.webhookInfo(w)
	case "deleteWebhook", "sendChatAction":
		reply(w, true)
	case "setWebhook":
		s.mu.Lock()
		s.webhook = map[string]string{"url": f.Get("url"), "secret_token": f.Get("secret_token"), "allowed_updates": f.Get("allowed_updates")}
		s.mu.Unlock()
		reply(w, true)
	case "getFile":
		s.getFile(w, f.Get("file_id"))
	case "getUpdates":
		s.getUpdates(w, r, f)
	case "sendMessage":
		s.sendMessage(w, f)
	case "editMessageText":
		s.editMessage(w, f)
	case "setMessageReaction":
		s.setReaction(w, f)
	case "sendMessageDraft":
		s.sendDraft(w, f)
	case "answerCallbackQuery":
		// Only a query Telegram sent can be answered, once
		// (core.telegram.org/bots/api#answercallbackquery).
		s.mu.Lock()
		id := f.Get("callback_query_id")
		if !s.queries[id] {
			s.mu.Unlock()
			fail(w, http.StatusBadRequest, "Bad Request: query is too old and response timeout expired or query ID is invalid", 0)
			return
		}
		delete(s.queries, id)
		s.answers = append(s.answers, id+": "+f.Get("text"))
		s.mu.Unlock()
		reply(w, true)
	default:
		failUnknownMethod(w)
	}
}

// getUpdates answers a long poll. Two pollers of one bot conflict:
// a getUpdates arriving while another waits ends the waiting one with
// 409 "Conflict: terminated by other getUpdates request; make sure that
// only one bot instance is running", as Telegram does (the error every
// bot library reports when two instances poll, e.g.
// github.com/python-telegram-bot/python-telegram-bot/issues/4237;
// core.telegram.org/bots/api#getupdates: long polling is for one
// receiver).
func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, f url.Values) {
	offset, _ := strconv.Atoi(f.Get("offset"))
	timeout, _ := strconv.Atoi(f.Get("timeout"))
	// "limit: Limits the number of updates to be retrieved. Values
	// between 1-100 are accepted. Defaults to 100" (ibid.).
	limit, err := strconv.Atoi(f.Get("limit"))
	if err != nil || limit < 1 || limit > 100 {
		limit = 100
	}
	deadline := time.Now().Add(time.Duration(min(timeout, 2)) * time.Second)
	mine := make(chan struct{})
	s.mu.Lock()
	if s.poll != nil {
		close(s.poll)
		s.conflicts++
	}
	s.poll = mine
	s.confirm(offset)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.poll == mine {
			s.poll = nil
		}
		s.mu.Unlock()
	}()
	for {
		s.mu.Lock()
		if offset > 0 {
			s.confirm(offset) // updates that arrived with ids below it
		}
		out := slices.Clone(s.updates[:min(len(s.updates), limit)])
		arrived := s.arrived
		s.mu.Unlock()
		if len(out) > 0 || time.Now().After(deadline) {
			if out == nil {
				out = []json.RawMessage{}
			}
			reply(w, out)
			return
		}
		select {
		case <-arrived:
		case <-time.After(time.Until(deadline)):
		case <-r.Context().Done():
			return
		case <-mine:
			fail(w, http.StatusConflict, "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running", 0)
			return
		}
	}
}

// confirm forgets the updates getUpdates' offset confirms: "An update is
// considered confirmed as soon as getUpdates is called with an offset
// higher than its update_id. The negative offset can be specified to
// retrieve updates starting from -offset update from the end of the
// updates queue. All previous updates will be forgotten"
// (core.telegram.org/bots/api#getupdates). Callers hold s.mu.
func (s *Server) confirm(offset int) {
	if offset < 0 {
		if n := len(s.updates) + offset; n > 0 {
			s.updates = s.updates[n:]
		}
		return
	}
	s.updates = slices.DeleteFunc(s.updates, func(u json.RawMessage) bool {
		var id struct {
			UpdateID int `json:"update_id"`
		}
		_ = json.Unmarshal(u, &id)
		return id.UpdateID < offset
	})
}

// failUnknownMethod answers a method the Bot API server does not know as
// it does (tdlib/telegram-bot-api telegram-bot-api/Client.cpp: a method
// missing from methods_ is fail_query(404, "Not Found: method not found")).
func failUnknownMethod(w http.ResponseWriter) {
	fail(w, http.StatusNotFound, "Not Found: method not found", 0)
}

// Conflicts returns how many getUpdates requests a later one
// terminated (409): more than zero means two pollers overlapped.
func (s *Server) Conflicts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conflicts
}

func buttons(markup string) (data, labels []string) {
	data, labels, _ = urlButtons(markup)
	return data, labels
}

// urlButtons is buttons with the URL buttons' addresses. A button uses
// exactly one of callback_data and url
// (core.telegram.org/bots/api#inlinekeyboardbutton); a URL button's data
// is reported as "-" so that it passes the callback data checks.
func urlButtons(markup string) (data, labels, urls []string) {
	var kb struct {
		InlineKeyboard [][]struct {
			Text         string `json:"text"`
			CallbackData string `json:"callback_data"`
			URL          string `json:"url"`
		} `json:"inline_keyboard"`
	}
	_ = json.Unmarshal([]byte(markup), &kb)
	for _, row := range kb.InlineKeyboard {
		for _, b := range row {
			d := b.CallbackData
			if b.URL != "" {
				d = "-"
				if b.CallbackData != "" {
					d = "" // both set: refused below as BUTTON_DATA_INVALID
				}
			}
			data = append(data, d)
			labels = append(labels, b.Text)
			urls = append(urls, b.URL)
		}
	}
	return data, labels, urls
}

// textLen is a text's length as the Bot API counts it, in UTF-16 code
// units (core.telegram.org/bots/api#messageentity).
func textLen(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r > 0xFFFF {
			n++ // UTF-16 surrogate pair
		}
	}
	return n
}

// sendMessage: text is "1-4096 characters after entities parsing"
// (core.telegram.org/bots/api#sendmessage) and a button's callback_data
// 1-64 bytes (core.telegram.org/bots/api#inlinekeyboardbutton). The error
// descriptions are the live Bot API's as bots receive them; its docs do
// not list them.
func (s *Server) sendMessage(w http.ResponseWriter, f map[string][]string) {
	get := func(k string) string {
		if v := f[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	text := get("text")
	switch {
	case strings.TrimSpace(text) == "":
		fail(w, http.StatusBadRequest, "Bad Request: message text is empty", 0)
		return
	case textLen(text) > 4096:
		fail(w, http.StatusBadRequest, "Bad Request: message is too long", 0)
		return
	}
	chat, _ := strconv.ParseInt(get("chat_id"), 10, 64)
	thread, _ := strconv.Atoi(get("message_thread_id"))
	data, labels, urls := urlButtons(get("reply_markup"))
	for _, d := range data {
		if len(d) > 64 || d == "" {
			fail(w, http.StatusBadRequest, "Bad Request: BUTTON_DATA_INVALID", 0)
			return
		}
	}
	var markup struct {
		ForceReply bool `json:"force_reply"`
	}
	_ = json.Unmarshal([]byte(get("reply_markup")), &markup)
	s.mu.Lock()
	s.nextMsg++
	m := &Sent{ChatID: chat, MessageID: s.nextMsg, Text: text, ParseMode: get("parse_mode"), Buttons: data, Labels: labels, URLs: urls,
		ForceReply: markup.ForceReply, ThreadID: thread}
	s.lastBot[chat] = true
	s.messages[m.MessageID] = m
	s.order = append(s.order, m.MessageID)
	s.mu.Unlock()
	reply(w, map[string]any{"message_id": m.MessageID, "date": time.Now().Unix(), "chat": map[string]any{"id": chat, "type": "private"}, "text": text})
}

// editMessage is editMessageText (core.telegram.org/bots/api#editmessagetext),
// with sendMessage's length limit; an edit that changes neither text nor
// buttons is refused as "message is not modified", as the live Bot API
// does (undocumented; see sendMessage).
func (s *Server) editMessage(w http.ResponseWriter, f map[string][]string) {
	get := func(k string) string {
		if v := f[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	id, _ := strconv.Atoi(get("message_id"))
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[id]
	if !ok {
		fail(w, http.StatusBadRequest, "Bad Request: message to edit not found", 0)
		return
	}
	data, labels := buttons(get("reply_markup"))
	if m.Text == get("text") && strings.Join(m.Buttons, ",") == strings.Join(data, ",") {
		fail(w, http.StatusBadRequest, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message", 0)
		return
	}
	if textLen(get("text")) > 4096 {
		fail(w, http.StatusBadRequest, "Bad Request: MESSAGE_TOO_LONG", 0)
		return
	}
	m.Text, m.Buttons, m.Labels = get("text"), data, labels
	m.Edits++
	reply(w, map[string]any{"message_id": m.MessageID, "date": time.Now().Unix(), "chat": map[string]any{"id": m.ChatID, "type": "private"}, "text": m.Text})
}

// push queues an update for getUpdates and returns its id.
func (s *Server) push(build func(id int) map[string]any) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextUpd
	s.nextUpd++
	b, _ := json.Marshal(build(id))
	s.updates = append(s.updates, b)
	if s.pushed == nil {
		s.pushed = map[int]time.Time{}
	}
	s.pushed[id] = time.Now()
	close(s.arrived)
	s.arrived = make(chan struct{})
	return id
}

// Update returns the JSON of a text message update, as Telegram would
// send it to a webhook, without queueing it.
func Update(id int, chatID, userID int64, text string) []byte {
	b, _ := json.Marshal(textUpdate(id, chatID, userID, text))
	return b
}

func textUpdate(id int, chatID, userID int64, text string) map[string]any {
	msg := map[string]any{
		"message_id": 1000 + id, "date": time.Now().Unix(), "text": text,
		"from": map[string]any{"id": userID, "is_bot": false, "first_name": "User"},
		"chat": map[string]any{"id": chatID, "type": chatType(chatID)},
	}
	if ents := entities(text); len(ents) > 0 {
		msg["entities"] = ents
	}
	return map[string]any{"update_id": id, "message": msg}
}

// entities finds what Telegram marks in a text
// (core.telegram.org/bots/api#messageentity, offsets and lengths in
// UTF-16 code units): a bot_command at the start ("/start@jobs_bot"),
// and a mention for each "@username" (5–32 characters of a–z, 0–9, _).
func entities(text string) []map[string]any {
	var out []map[string]any
	units := func(s string) int { return textLen(s) }
	if strings.HasPrefix(text, "/") {
		cmd, _, _ := strings.Cut(text, " ")
		cmd, _, _ = strings.Cut(cmd, "\n")
		out = append(out, map[string]any{"type": "bot_command", "offset": 0, "length": units(cmd)})
	}
	for i := 0; i < len(text); i++ {
		if text[i] != '@' || (i > 0 && isNameByte(text[i-1])) || (strings.HasPrefix(text, "/") && i < len(strings.Fields(text)[0])) {
			continue
		}
		j := i + 1
		for j < len(text) && isNameByte(text[j]) {
			j++
		}
		if n := j - i - 1; n >= 5 && n <= 32 {
			out = append(out, map[string]any{"type": "mention", "offset": units(text[:i]), "length": units(text[i:j])})
		}
		i = j - 1
	}
	return out
}

func isNameByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// chatType is a chat's type by its id: people and private chats have
// positive ids, groups negative ones (core.telegram.org/bots/api#chat).
func chatType(chatID int64) string {
	if chatID < 0 {
		return "group"
	}
	return "private"
}

// PushText queues a text message from a user. Entities are set as
// Telegram does: "/tidy-inbox" is a bot_command entity that Telegram
// cuts at the hyphen (length of "/tidy"); "@name" is a mention. In a
// group, the bot gets the message only as its privacy mode allows
// (privacy.go): a message it does not get is queued for no one, recorded
// in Withheld, and PushText returns 0. With privacy off (or as a group
// admin) the bot gets every message and must pick out what is addressed
// to it.
func (s *Server) PushText(chatID, userID int64, text string) int {
	return s.pushMessage(chatID, userID, text, 0, 0)
}

// PushReply queues a text message from a user that replies to message
// replyTo (one the bot sent, or one a person sent through this fake).
func (s *Server) PushReply(chatID, userID int64, replyTo int, text string) int {
	return s.pushMessage(chatID, userID, text, replyTo, 0)
}

// PushTopicText is PushText for a message in forum topic topic of group
// chatID (see topics.go).
func (s *Server) PushTopicText(chatID, userID int64, topic int, text string) int {
	return s.pushMessage(chatID, userID, text, 0, topic)
}

func (s *Server) pushMessage(chatID, userID int64, text string, replyTo, topic int) int {
	var parent map[string]any
	toBot := false
	s.mu.Lock()
	if replyTo != 0 {
		if m, ok := s.messages[replyTo]; ok {
			toBot = true
			parent = map[string]any{"message_id": m.MessageID, "date": time.Now().Unix(), "text": m.Text,
				"from": map[string]any{"id": BotUserID, "is_bot": true, "first_name": "tidybot", "username": BotUserName},
				"chat": map[string]any{"id": m.ChatID, "type": chatType(m.ChatID)}}
		} else {
			parent = s.userMsgs[replyTo]
		}
	}
	ok := s.delivered(chatID, text, toBot)
	s.mu.Unlock()
	if !ok {
		return 0
	}
	return s.push(func(id int) map[string]any {
		u := textUpdate(id, chatID, userID, text)
		msg := u["message"].(map[string]any)
		msg["message_id"] = s.userMessageID(id)
		if strings.HasPrefix(text, "/tidy-") {
			msg["entities"] = []map[string]any{{"type": "bot_command", "offset": 0, "length": len("/tidy")}}
		}
		if parent != nil {
			msg["reply_to_message"] = parent
		}
		if topic != 0 {
			inTopic(msg, topic)
		}
		s.userMsgs[msg["message_id"].(int)] = msg
		return u
	})
}

// userMessageID gives the message a person sends in update id its
// message_id: the next in the sequence the bot's messages take theirs
// from. A message_id is the "unique message identifier inside this chat"
// (core.telegram.org/bots/api#message); a chat's messages, the bot's and
// its people's, are numbered in the order they reach it, so a message
// sent before another has the smaller id. (One sequence for every chat
// keeps that order within each.) mu must be held.
func (s *Server) userMessageID(update int) int {
	s.nextMsg++
	s.byUpdate[update] = s.nextMsg
	return s.nextMsg
}

// MessageID returns the message_id of the message a person sent in
// update (as PushText and the other Push methods return it).
func (s *Server) MessageID(update int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byUpdate[update]
}

// PushCallback queues a button press on message msgID.
func (s *Server) PushCallback(chatID, userID int64, msgID int, data string) int {
	return s.push(func(id int) map[string]any {
		s.queries[fmt.Sprint("cb", id)] = true
		return map[string]any{"update_id": id, "callback_query": map[string]any{
			"id": fmt.Sprint("cb", id), "data": data, "chat_instance": "ci",
			"from":    map[string]any{"id": userID, "is_bot": false, "first_name": "User"},
			"message": map[string]any{"message_id": msgID, "date": time.Now().Unix(), "chat": map[string]any{"id": chatID, "type": chatType(chatID)}},
		}}
	})
}

// PushCallbackWithoutMessage queues a button press that carries no
// message: one on a message sent in inline mode (inline_message_id
// instead), as Telegram sends when "the message with the callback button
// was sent via the bot (in inline mode)"; it still shows a spinner until
// answered (core.telegram.org/bots/api#callbackquery).
func (s *Server) PushCallbackWithoutMessage(userID int64, data string) int {
	return s.push(func(id int) map[string]any {
		s.queries[fmt.Sprint("cb", id)] = true
		return map[string]any{"update_id": id, "callback_query": map[string]any{
			"id": fmt.Sprint("cb", id), "data": data, "chat_instance": "ci", "inline_message_id": fmt.Sprint("inl", id),
			"from": map[string]any{"id": userID, "is_bot": false, "first_name": "User"},
		}}
	})
}

// PushRaw queues an arbitrary update body (update_id is set).
func (s *Server) PushRaw(fields map[string]any) int {
	return s.push(func(id int) map[string]any { fields["update_id"] = id; return fields })
}

// PushUndecodable queues an update that is valid JSON but does not fit
// the Bot API's types: a text message whose text is a number. The Bot
// API documents text as a String (core.telegram.org/bots/api#message);
// this is the shape a changed or mangled field takes, and a typed client
// (go-telegram-bot-api decodes the whole getUpdates array into []Update)
// fails on it. Like any update it stays pending until an offset past
// its id confirms it (core.telegram.org/bots/api#getupdates).
func (s *Server) PushUndecodable(chatID, userID int64) int {
	return s.push(func(id int) map[string]any {
		u := textUpdate(id, chatID, userID, "")
		u["message"].(map[string]any)["text"] = 12345
		return u
	})
}

// Messages returns the messages sent to a chat, in order, as they are
// now (after edits).
func (s *Server) Messages(chatID int64) []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sent
	for _, id := range s.order {
		if m := s.messages[id]; m.ChatID == chatID {
			out = append(out, *m)
		}
	}
	return out
}

// AllMessages returns the bot's messages in every chat, in the order
// sent (what Messages returns for each chat, read in one pass).
func (s *Server) AllMessages() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Sent, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, *s.messages[id])
	}
	return out
}

// Answers returns the answered callback queries: "id: text".
func (s *Server) Answers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.answers...)
}

// Calls returns how often a method was called.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// RateLimit makes the next n calls of method answer 429 (retry after 1 s).
func (s *Server) RateLimit(method string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limited[method] = n
}

// Webhook returns the parameters of the last setWebhook call.
func (s *Server) Webhook() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webhook
}

// checkCommands checks a setMyCommands list as Telegram does
// (core.telegram.org/bots/api#botcommand: a command is 1-32 characters,
// only lowercase English letters, digits and underscores; a description
// 1-256 characters; core.telegram.org/bots/api#setmycommands: at most
// 100 commands) and returns the error description Telegram gives, or "".
// Telegram answers a bad command "Bad Request: BOT_COMMAND_INVALID"
// (tdlib/telegram-bot-api#98, from its maintainer) and an empty
// description "Bad Request: command description must be non-empty"
// (williamhorning/lightning#87); a list that is no JSON is the Bot API
// server's "Can't parse commands JSON object" (tdlib/telegram-bot-api
// telegram-bot-api/Client.cpp, get_bot_commands). The texts for too
// many commands and too long a description are the fake's own words.
func checkCommands(raw string) string {
	var cmds []struct {
		Command     string `json:"command"`
		Description string `json:"description"`
	}
	if err := json.Unmarshal([]byte(raw), &cmds); err != nil {
		return "Bad Request: Can't parse commands JSON object"
	}
	if len(cmds) > 100 {
		return "Bad Request: too many commands specified"
	}
	for _, c := range cmds {
		if len(c.Command) == 0 || len(c.Command) > 32 || strings.TrimLeft(c.Command, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
			return "Bad Request: BOT_COMMAND_INVALID"
		}
		if n := len([]rune(c.Description)); n == 0 {
			return "Bad Request: command description must be non-empty"
		} else if n > 256 {
			return "Bad Request: command description is too long"
		}
	}
	return ""
}

// Commands returns the JSON of the last setMyCommands call.
func (s *Server) Commands() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commands
}

// Pending returns how many updates are not yet confirmed.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.updates)
}

// echoWriter marks a response whose errors repeat the request's token.
type echoWriter struct {
	http.ResponseWriter
	token string
}

// EchoToken makes every error description repeat the token of its
// request, as a verbose proxy may: the adapter must keep it out of its
// errors and logs.
func (s *Server) EchoToken() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.echo = true
}
