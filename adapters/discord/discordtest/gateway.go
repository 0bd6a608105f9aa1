package discordtest

import (
	"bytes"
	"compress/zlib"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// The Gateway as https://discord.com/developers/docs/events/gateway
// describes it: on connect the server sends op 10 HELLO with
// heartbeat_interval; the client sends op 2 IDENTIFY (token, intents)
// and gets the READY dispatch (session_id, resume_gateway_url), then
// dispatches (op 0) with an increasing sequence number s; op 1
// HEARTBEAT is answered with op 11 HEARTBEAT_ACK; op 6 RESUME
// (token, session_id, seq) replays the dispatches after seq and ends
// with RESUMED; op 7 RECONNECT asks the client to reconnect and resume;
// op 9 INVALID_SESSION (d: whether the session may be resumed).
// resume_gateway_url is the fake's gateway URL itself; discordgo
// v0.29.0 reconnects to the URL it first got and does not read it.
// Opcodes and close codes:
// https://discord.com/developers/docs/topics/opcodes-and-status-codes#gateway.

// Gateway opcodes.
const (
	opDispatch       = 0
	opHeartbeat      = 1
	opIdentify       = 2
	opPresenceUpdate = 3
	opVoiceState     = 4
	opResume         = 6
	opReconnect      = 7
	opRequestMembers = 8
	opInvalidSession = 9
	opHello          = 10
	opHeartbeatAck   = 11
)

// Gateway close event codes.
const (
	closeUnknownOpcode     = 4001
	closeDecodeError       = 4002
	closeNotAuthenticated  = 4003
	closeAuthFailed        = 4004
	closeAlreadyAuthed     = 4005
	closeRateLimited       = 4008
	closeInvalidSeq        = 4007
	closeInvalidVersion    = 4012
	closeInvalidIntents    = 4013
	closeDisallowedIntents = 4014
)

// Gateway intents (https://discord.com/developers/docs/events/gateway#list-of-intents).
const (
	intentGuilds         = 1 << 0
	intentGuildMessages  = 1 << 9
	intentDirectMessages = 1 << 12
	intentMessageContent = 1 << 15
	intentsKnown         = 1<<26 - 1
)

// session is a gateway session: the dispatches sent in it, kept for
// RESUME.
type session struct {
	id string
	// mu protects the fields below; it is held while writing the log to
	// the connection, so dispatches go out in sequence order.
	mu      sync.Mutex
	seq     int64
	log     []gwEvent // log[i] has s = i+1
	sent    int64     // the last s written to conn
	conn    *gwConn
	intents int64
	content bool // granted MESSAGE_CONTENT
	invalid bool
}

type gwEvent struct {
	name string
	data json.RawMessage
}

type gwConn struct {
	ws   *websocket.Conn
	wmu  sync.Mutex // one writer at a time (gorilla/websocket's rule)
	sess *session   // read and written by the connection's goroutine
	// compress: the client asked for payload compression in IDENTIFY.
	compress bool
	// reidentify: an op 9 was sent; the client may IDENTIFY again.
	reidentify atomic.Bool
	// beat: the client sent a heartbeat on this connection. discordgo
	// sends its first as its heartbeat goroutine starts, right after
	// READY or RESUMED; a connection closed before that beat makes that
	// goroutine reconnect beside the reader's own reconnect, and the two
	// race on the session's fields inside discordgo (wsapi.go, Open and
	// heartbeat; seen with -race). WaitReady waits for it.
	beat atomic.Bool
}

type payload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  *string         `json:"t"`
}

func (c *gwConn) write(v any) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteJSON(v)
}

// writeCompressed sends a payload zlib-compressed in a binary frame, as
// Discord may when IDENTIFY set compress (payload compression, which
// compresses some payloads only:
// https://discord.com/developers/docs/events/gateway#payload-compression);
// discordgo inflates binary frames (discordgo wsapi.go, onEvent).
func (c *gwConn) writeCompressed(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteMessage(websocket.BinaryMessage, buf.Bytes())
}

// closeWith sends a close frame with a gateway close code, then closes.
func (c *gwConn) closeWith(code int, reason string) {
	c.wmu.Lock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
	c.wmu.Unlock()
	c.ws.Close()
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &gwConn{ws: ws}
	s.mu.Lock()
	s.conns[c] = true
	hb := s.heartbeatMS
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		if c.sess != nil {
			c.sess.mu.Lock()
			if c.sess.conn == c {
				c.sess.conn = nil
			}
			c.sess.mu.Unlock()
		}
		ws.Close()
	}()
	if err := c.write(map[string]any{"op": opHello, "d": map[string]any{"heartbeat_interval": hb}, "s": nil, "t": nil}); err != nil {
		return
	}
	// The version and encoding come in the query: v 9 or 10, JSON
	// (https://discord.com/developers/docs/events/gateway#connecting,
	// "Gateway URL Query String Params"); discordgo sends
	// ?v=9&encoding=json (discordgo wsapi.go, Open).
	q := r.URL.Query()
	if v := q.Get("v"); v != "9" && v != "10" {
		c.closeWith(closeInvalidVersion, "Invalid API version.")
		return
	}
	if e := q.Get("encoding"); e != "" && e != "json" {
		c.closeWith(closeDecodeError, "Error while decoding payload.")
		return
	}
	// "Apps can send 120 gateway events per connection every 60 seconds
	// ... Apps that surpass the limit are immediately disconnected"
	// (close 4008), and a payload sent may be at most 4096 bytes, else
	// 4002 (https://discord.com/developers/docs/events/gateway#rate-limiting,
	// #sending-events).
	var window time.Time
	sent := 0
	for {
		_, raw, err := ws.ReadMessage()
		if err != nil {
			return
		}
		if now := time.Now(); now.Sub(window) >= time.Minute {
			window, sent = now, 0
		}
		if sent++; sent > 120 {
			c.closeWith(closeRateLimited, "You are being rate limited.")
			return
		}
		if len(raw) > 4096 {
			c.closeWith(closeDecodeError, "Error while decoding payload.")
			return
		}
		var p payload
		if err := json.Unmarshal(raw, &p); err != nil {
			c.closeWith(closeDecodeError, "Error while decoding payload.")
			return
		}
		if !s.handleOp(c, &p) {
			return
		}
	}
}

// handleOp answers one client payload; false ends the connection.
func (s *Server) handleOp(c *gwConn, p *payload) bool {
	switch p.Op {
	case opHeartbeat:
		s.mu.Lock()
		s.heartbeats++
		s.mu.Unlock()
		c.beat.Store(true)
		return c.write(map[string]any{"op": opHeartbeatAck, "d": nil, "s": nil, "t": nil}) == nil
	case opIdentify:
		return s.identify(c, p.D)
	case opResume:
		return s.resume(c, p.D)
	case opPresenceUpdate, opVoiceState, opRequestMembers:
		if c.sess == nil {
			c.closeWith(closeNotAuthenticated, "Not authenticated.")
			return false
		}
		return true
	default:
		c.closeWith(closeUnknownOpcode, "Unknown opcode.")
		return false
	}
}

func (s *Server) identify(c *gwConn, d json.RawMessage) bool {
	var id struct {
		Token    string `json:"token"`
		Intents  *int64 `json:"intents"`
		Compress bool   `json:"compress"`
	}
	if err := json.Unmarshal(d, &id); err != nil {
		c.closeWith(closeDecodeError, "Error while decoding payload.")
		return false
	}
	if c.sess != nil && !c.reidentify.Load() {
		c.closeWith(closeAlreadyAuthed, "Already authenticated.")
		return false
	}
	// The token is the bot token: bare in the docs' example, with the
	// "Bot " prefix from discordgo, which sends the session's token as
	// given (discordgo discord.go, New; wsapi.go, identify) and works
	// against Discord.
	if id.Token != Token && id.Token != "Bot "+Token {
		c.closeWith(closeAuthFailed, "Authentication failed.")
		return false
	}
	// intents is required (v8 and later) and must name known bits; a
	// privileged intent the application lacks is 4014.
	if id.Intents == nil || *id.Intents&^intentsKnown != 0 || *id.Intents < 0 {
		c.closeWith(closeInvalidIntents, "Invalid intent(s).")
		return false
	}
	s.mu.Lock()
	if *id.Intents&intentMessageContent != 0 && !s.messageContent && s.strictIntents {
		s.mu.Unlock()
		c.closeWith(closeDisallowedIntents, "Disallowed intent(s).")
		return false
	}
	s.identifies++
	sess := &session{id: randomHex(16), intents: *id.Intents, conn: c,
		content: *id.Intents&intentMessageContent != 0 && s.messageContent}
	if c.sess != nil {
		c.sess.mu.Lock()
		c.sess.invalid = true
		if c.sess.conn == c {
			c.sess.conn = nil
		}
		c.sess.mu.Unlock()
	}
	s.sessions[sess.id] = sess
	c.sess, c.compress = sess, id.Compress
	c.reidentify.Store(false)
	// READY lists the bot's guilds as unavailable; a GUILD_CREATE for
	// each follows (https://discord.com/developers/docs/events/gateway-events#ready).
	guilds := []any{}
	for _, g := range s.guilds {
		guilds = append(guilds, map[string]any{"id": g, "unavailable": true})
	}
	ready := map[string]any{
		"v": 9, "user": s.userJSONLocked(s.botID), "guilds": guilds, "session_id": sess.id,
		"resume_gateway_url": s.GatewayURL(), "session_type": "normal",
		"application":      map[string]any{"id": s.appID, "flags": 0},
		"private_channels": []any{}, "relationships": []any{},
	}
	raw, _ := json.Marshal(ready)
	sess.mu.Lock()
	sess.seq++
	sess.log = append(sess.log, gwEvent{name: "READY", data: raw})
	sess.sent = sess.seq
	n := sess.seq
	t := "READY"
	var err error
	if c.compress {
		err = c.writeCompressed(payload{Op: opDispatch, D: raw, S: &n, T: &t})
	} else {
		err = c.write(payload{Op: opDispatch, D: raw, S: &n, T: &t})
	}
	if err == nil && sess.intents&intentGuilds != 0 {
		for _, g := range s.guilds {
			raw, _ := json.Marshal(s.guildJSONLocked(g))
			sess.seq++
			sess.log = append(sess.log, gwEvent{name: "GUILD_CREATE", data: raw})
		}
		err = sess.flushLocked()
	}
	sess.mu.Unlock()
	s.mu.Unlock()
	return err == nil
}

func (s *Server) resume(c *gwConn, d json.RawMessage) bool {
	var r struct {
		Token     string `json:"token"`
		SessionID string `json:"session_id"`
		Seq       int64  `json:"seq"`
	}
	if err := json.Unmarshal(d, &r); err != nil {
		c.closeWith(closeDecodeError, "Error while decoding payload.")
		return false
	}
	if r.Token != Token && r.Token != "Bot "+Token {
		c.closeWith(closeAuthFailed, "Authentication failed.")
		return false
	}
	s.mu.Lock()
	sess, ok := s.sessions[r.SessionID]
	s.resumes++
	s.mu.Unlock()
	if !ok {
		// A session that cannot be resumed is answered with op 9 INVALID_SESSION,
		// d false: the client identifies again
		// (https://discord.com/developers/docs/events/gateway#resuming).
		c.reidentify.Store(true)
		return c.write(map[string]any{"op": opInvalidSession, "d": false, "s": nil, "t": nil}) == nil
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.invalid {
		c.reidentify.Store(true)
		return c.write(map[string]any{"op": opInvalidSession, "d": false, "s": nil, "t": nil}) == nil
	}
	if r.Seq > sess.seq || r.Seq < 0 {
		c.closeWith(closeInvalidSeq, "Invalid seq.")
		return false
	}
	if old := sess.conn; old != nil && old != c {
		old.ws.Close()
	}
	sess.conn, sess.sent = c, r.Seq
	c.sess = sess
	// The missed dispatches, in order, then RESUMED.
	sess.seq++
	sess.log = append(sess.log, gwEvent{name: "RESUMED", data: json.RawMessage(`{}`)})
	return sess.flushLocked() == nil
}

// flushLocked writes the dispatches after sent to the connection.
func (sess *session) flushLocked() error {
	for sess.conn != nil && sess.sent < sess.seq {
		ev := sess.log[sess.sent]
		n := sess.sent + 1
		t := ev.name
		if err := sess.conn.write(payload{Op: opDispatch, D: ev.data, S: &n, T: &t}); err != nil {
			sess.conn.ws.Close()
			sess.conn = nil
			return err
		}
		sess.sent = n
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// dispatch sends an event to every session (a dropped one keeps it for
// its RESUME); build returns the event's data for a session, nil when
// the session does not get it (its intents). With no session the event
// reaches no one, as on Discord. Call without mu held.
func (s *Server) dispatch(name string, build func(sess *session) any) {
	s.mu.Lock()
	var to []*session
	for _, sess := range s.sessions {
		sess.mu.Lock()
		if !sess.invalid {
			if d := build(sess); d != nil {
				raw, err := json.Marshal(d)
				if err != nil {
					s.t.Errorf("discordtest: marshal %s: %v", name, err)
				} else {
					sess.seq++
					sess.log = append(sess.log, gwEvent{name: name, data: raw})
					to = append(to, sess)
				}
			}
		}
		sess.mu.Unlock()
	}
	s.mu.Unlock()
	for _, sess := range to {
		sess.mu.Lock()
		_ = sess.flushLocked()
		sess.mu.Unlock()
	}
}

// WaitReady waits up to ten seconds for a session to be connected and
// to have sent its first heartbeat (see gwConn.beat), and reports
// whether one has. Events sent before the bot identified reach no one,
// as on Discord: a test that starts the bot in the background waits for
// it before DM, Say, Command or Press, or a fault (Drop, Reconnect,
// CloseGateway, InvalidSession).
func (s *Server) WaitReady() bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if s.beating() > 0 {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

func (s *Server) connected() int {
	return s.countSessions(func(*gwConn) bool { return true })
}

// beating is how many sessions have a live connection that has sent its
// first heartbeat (see gwConn.beat).
func (s *Server) beating() int {
	return s.countSessions(func(c *gwConn) bool { return c.beat.Load() })
}

// countSessions is how many valid sessions have a connection that ok
// (called with the session's lock held) says yes to.
func (s *Server) countSessions(ok func(*gwConn) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sess := range s.sessions {
		sess.mu.Lock()
		if !sess.invalid && sess.conn != nil && ok(sess.conn) {
			n++
		}
		sess.mu.Unlock()
	}
	return n
}

// Connected reports how many sessions have a live connection.
func (s *Server) Connected() int { return s.connected() }

// messageEventLocked is MESSAGE_CREATE's data for a session, or nil:
// guild messages need GUILD_MESSAGES, DMs DIRECT_MESSAGES; without
// MESSAGE_CONTENT the content is empty but for the bot's own messages,
// DMs and messages that mention the bot
// (https://discord.com/developers/docs/events/gateway#message-content-intent).
func (s *Server) messageEventLocked(sess *session, ch *channel, m *message) map[string]any {
	if ch.Type == channelDM && sess.intents&intentDirectMessages == 0 ||
		ch.Type != channelDM && sess.intents&intentGuildMessages == 0 {
		return nil
	}
	content := sess.content || m.AuthorID == s.botID || ch.Type == channelDM
	for _, id := range m.Mentions {
		content = content || id == s.botID
	}
	d := s.messageJSONLocked(m, content)
	if ch.GuildID != "" {
		d["guild_id"] = ch.GuildID
		d["member"] = s.memberJSONLocked(m.AuthorID, false)
	}
	return d
}

func (s *Server) dispatchMessage(ch *channel, m *message) {
	s.dispatch("MESSAGE_CREATE", func(sess *session) any {
		if d := s.messageEventLocked(sess, ch, m); d != nil {
			return d
		}
		return nil
	})
}

func (s *Server) dispatchUpdate(ch *channel, m *message) {
	s.dispatch("MESSAGE_UPDATE", func(sess *session) any {
		if d := s.messageEventLocked(sess, ch, m); d != nil {
			return d
		}
		return nil
	})
}

// dispatchDelete sends MESSAGE_DELETE
// (https://discord.com/developers/docs/events/gateway-events#message-delete).
func (s *Server) dispatchDelete(ch *channel, m *message) {
	s.dispatch("MESSAGE_DELETE", func(sess *session) any {
		if ch.Type == channelDM && sess.intents&intentDirectMessages == 0 ||
			ch.Type != channelDM && sess.intents&intentGuildMessages == 0 {
			return nil
		}
		d := map[string]any{"id": m.ID, "channel_id": ch.ID}
		if ch.GuildID != "" {
			d["guild_id"] = ch.GuildID
		}
		return d
	})
}

// dispatchThread sends THREAD_CREATE, which needs GUILDS
// (https://discord.com/developers/docs/events/gateway-events#thread-create).
func (s *Server) dispatchThread(th *channel) {
	s.dispatch("THREAD_CREATE", func(sess *session) any {
		if sess.intents&intentGuilds == 0 {
			return nil
		}
		d := s.channelJSONLocked(th)
		d["newly_created"] = true
		return d
	})
}

// Identifies is how many IDENTIFY payloads the gateway accepted.
func (s *Server) Identifies() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.identifies
}

// Resumes is how many RESUME payloads the gateway received.
func (s *Server) Resumes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resumes
}

// liveSessions returns every session, for the faults to walk.
func (s *Server) liveSessions() []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*session
	for _, sess := range s.sessions {
		out = append(out, sess)
	}
	return out
}

// Reconnect sends op 7 RECONNECT on every connection: the client
// should reconnect and RESUME
// (https://discord.com/developers/docs/events/gateway-events#reconnect).
func (s *Server) Reconnect() {
	for _, sess := range s.liveSessions() {
		sess.mu.Lock()
		if c := sess.conn; c != nil && !sess.invalid {
			_ = c.write(map[string]any{"op": opReconnect, "d": nil, "s": nil, "t": nil})
		}
		sess.mu.Unlock()
	}
}

// InvalidSession sends op 9 INVALID_SESSION on every connection; when
// not resumable the session is gone and a RESUME of it gets op 9 again
// (https://discord.com/developers/docs/events/gateway-events#invalid-session).
func (s *Server) InvalidSession(resumable bool) {
	for _, sess := range s.liveSessions() {
		sess.mu.Lock()
		if c := sess.conn; c != nil && !sess.invalid {
			c.reidentify.Store(true)
			if !resumable {
				sess.invalid = true
			}
			_ = c.write(map[string]any{"op": opInvalidSession, "d": resumable, "s": nil, "t": nil})
		}
		sess.mu.Unlock()
	}
}

// Drop closes every gateway connection's TCP socket without a close
// frame, as a network failure would; the sessions stay resumable and
// the events sent meanwhile wait for a RESUME.
func (s *Server) Drop() {
	for _, sess := range s.liveSessions() {
		sess.mu.Lock()
		if c := sess.conn; c != nil {
			_ = c.ws.UnderlyingConn().Close()
			sess.conn = nil
		}
		sess.mu.Unlock()
	}
}

// CloseGateway closes every gateway connection with a close code (4000
// unknown error, 4009 session timed out, …).
func (s *Server) CloseGateway(code int) {
	for _, sess := range s.liveSessions() {
		sess.mu.Lock()
		if c := sess.conn; c != nil {
			c.closeWith(code, "")
			sess.conn = nil
		}
		sess.mu.Unlock()
	}
}

// Heartbeats is how many op 1 HEARTBEAT payloads clients sent.
func (s *Server) Heartbeats() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heartbeats
}

// RequestHeartbeat sends op 1 on every connection: the gateway may ask
// for a heartbeat that way, and the app answers with one at once
// (https://discord.com/developers/docs/events/gateway#sending-heartbeats).
func (s *Server) RequestHeartbeat() {
	for _, sess := range s.liveSessions() {
		sess.mu.Lock()
		if c := sess.conn; c != nil {
			_ = c.write(map[string]any{"op": opHeartbeat, "d": nil, "s": nil, "t": nil})
		}
		sess.mu.Unlock()
	}
}

// Redeliver sends again, with a new sequence number, the last dispatch
// of each session whose data has this id (a message's or an
// interaction's), and reports whether there was one. The docs promise
// no exactly-once delivery (a RESUME replays whatever came after the
// client's last sequence), so a bot drops an event it has seen by its
// id; this is the fault that tests it.
func (s *Server) Redeliver(id string) bool {
	found := false
	for _, sess := range s.liveSessions() {
		sess.mu.Lock()
		for i := len(sess.log) - 1; i >= 0; i-- {
			var d struct {
				ID string `json:"id"`
			}
			ev := sess.log[i]
			if json.Unmarshal(ev.data, &d) == nil && d.ID == id && ev.name != "READY" {
				sess.seq++
				sess.log = append(sess.log, ev)
				found = true
				_ = sess.flushLocked()
				break
			}
		}
		sess.mu.Unlock()
	}
	return found
}

// Dispatch sends any event to every session as it is given, under the
// next sequence number: for tests of what a client does with events it
// cannot read (a malformed MESSAGE_CREATE, an unknown event name).
// data must be JSON, since the dispatch's d field carries it as is.
func (s *Server) Dispatch(name string, data []byte) {
	if !json.Valid(data) {
		s.t.Errorf("discordtest: Dispatch %s: data is not JSON", name)
		return
	}
	raw := json.RawMessage(append([]byte(nil), data...))
	s.dispatch(name, func(*session) any { return raw })
}
