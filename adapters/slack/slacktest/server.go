// Package slacktest is a fake Slack Web API on httptest (the methods the
// adapter calls: auth.test, chat.postMessage, chat.update), speaking the
// real wire protocol (form-encoded POSTs to /api/<method>, JSON answers
// with "ok"), plus helpers to sign requests the way Slack signs them.
package slacktest

import (
	"crypto/hmac"
	"time"

	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/gorilla/websocket"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
	Text     string
	// Buttons are the values of the buttons in the blocks; Labels their text.
	Buttons []string
	Labels  []string
	Updates int
}

// Server is a fake Slack Web API.
type Server struct {
	// URL is SLACK_API_URL: it ends in /api/.
	URL string
	srv *httptest.Server

	mu      sync.Mutex // protects the fields below
	conns   []*wsConn
	acks    map[string]bool
	envSeq  int
	posts   []*Posted
	seq     int
	calls   map[string]int
	limited map[string]int
}

// New starts a fake; close it with Close.
func New() *Server {
	s := &Server{calls: map[string]int{}, limited: map[string]int{}, acks: map[string]bool{}}
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

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/ws" {
		s.socket(w, r)
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
	if n := s.limited[method]; n > 0 {
		s.limited[method] = n - 1
		s.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	s.mu.Unlock()
	if method == "apps.connections.open" {
		if tok != AppToken {
			answer(w, map[string]any{"ok": false, "error": "invalid_auth"})
			return
		}
		answer(w, map[string]any{"ok": true, "url": "ws://" + r.Host + "/ws"})
		return
	}
	if tok != Token {
		answer(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	switch method {
	case "auth.test":
		answer(w, map[string]any{"ok": true, "user_id": BotUserID, "bot_id": BotID, "team_id": "T1", "user": "tidybot"})
	case "chat.postMessage":
		s.post(w, r)
	case "chat.update":
		s.update(w, r)
	default:
		answer(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

func buttons(blocks string) (values, labels []string) {
	var bs []struct {
		Type     string `json:"type"`
		Elements []struct {
			Type  string `json:"type"`
			Value string `json:"value"`
			Text  struct {
				Text string `json:"text"`
			} `json:"text"`
		} `json:"elements"`
	}
	_ = json.Unmarshal([]byte(blocks), &bs)
	for _, b := range bs {
		for _, e := range b.Elements {
			if e.Type == "button" {
				values = append(values, e.Value)
				labels = append(labels, e.Text.Text)
			}
		}
	}
	return values, labels
}

func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	f := r.Form
	if f.Get("channel") == "" {
		answer(w, map[string]any{"ok": false, "error": "channel_not_found"})
		return
	}
	if f.Get("text") == "" && f.Get("blocks") == "" {
		answer(w, map[string]any{"ok": false, "error": "no_text"})
		return
	}
	if len([]rune(f.Get("text"))) > 40000 {
		answer(w, map[string]any{"ok": false, "error": "msg_too_long"})
		return
	}
	values, labels := buttons(f.Get("blocks"))
	s.mu.Lock()
	s.seq++
	p := &Posted{Channel: f.Get("channel"), TS: fmt.Sprintf("1700000000.%06d", s.seq), ThreadTS: f.Get("thread_ts"), Text: f.Get("text"), Buttons: values, Labels: labels}
	s.posts = append(s.posts, p)
	s.mu.Unlock()
	answer(w, map[string]any{"ok": true, "channel": p.Channel, "ts": p.TS, "message": map[string]any{"text": p.Text, "ts": p.TS}})
}

func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	f := r.Form
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.posts {
		if p.Channel == f.Get("channel") && p.TS == f.Get("ts") {
			p.Text = f.Get("text")
			p.Buttons, p.Labels = buttons(f.Get("blocks"))
			p.Updates++
			answer(w, map[string]any{"ok": true, "channel": p.Channel, "ts": p.TS, "text": p.Text})
			return
		}
	}
	answer(w, map[string]any{"ok": false, "error": "message_not_found"})
}

// Posts returns the bot's messages in a channel, in order.
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

// Calls returns how often a method was called.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// RateLimit makes the next n calls of method answer 429 (Retry-After 1).
func (s *Server) RateLimit(method string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limited[method] = n
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
		s.mu.Lock()
		s.acks[ack.EnvelopeID] = true
		s.mu.Unlock()
	}
}

// Connected reports whether a Socket Mode client is connected.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns) > 0
}

// Push sends a Socket Mode envelope ("events_api", "slash_commands" or
// "interactive") with payload to the connected clients and returns its id.
func (s *Server) Push(kind string, payload any) string {
	s.mu.Lock()
	s.envSeq++
	id := fmt.Sprintf("env-%d", s.envSeq)
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
