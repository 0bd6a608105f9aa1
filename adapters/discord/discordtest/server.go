// Package discordtest is a fake of Discord's REST API (v9 and v10
// paths) and Gateway, served by httptest, for tests that drive the real
// client library (github.com/bwmarrin/discordgo) end to end.
//
// New starts it; Transport sends discordgo's requests for
// https://discord.com/... to it (discordgo's endpoints are package
// variables rooted there), and GET /gateway answers the fake's
// WebSocket URL, so a test does:
//
//	srv := discordtest.New(t)
//	dg, _ := discordgo.New("Bot " + discordtest.Token)
//	dg.Client = &http.Client{Transport: srv.Transport()}
//	dg.Open()
//
// People act through the Server: DM and Say (DMFiles and SayFiles with
// attachments, served on the CDN paths) deliver MESSAGE_CREATE over
// the gateway, Command and Press deliver INTERACTION_CREATE (or, after
// SetInteractionsEndpoint, a signed post to the app's endpoint, as
// PostCommand and PostPress do).
// What the bot did is read back with Messages (per channel, text after
// edits, buttons, files), Interaction, Threads, Typing, Reactions and
// Commands. Events sent before the bot identified reach no one, as on
// Discord: a test that opens the gateway in the background calls
// WaitReady first. Faults: RateLimit and GlobalRateLimit (429s), Fail
// (5xx), Hold (calls that wait until released), Reconnect (op 7),
// InvalidSession (op 9), Drop (the TCP connection closes without a
// close frame), CloseGateway (a close code), Redeliver (an event sent twice), Dispatch (any event, as
// given), WithoutMessageContent and
// RefuseDisallowedIntents (the privileged MESSAGE_CONTENT intent),
// SetInteractionDeadline.
//
// Every rule the fake enforces cites its source next to the code: a
// page of https://discord.com/developers/docs or a discordgo file.
package discordtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Token is the bot token the fake accepts, sent as "Bot " + Token.
const Token = "fake-discord-bot-token"

// discordEpoch is the first millisecond of 2015, the epoch of Discord's
// snowflake ids (https://discord.com/developers/docs/reference#snowflakes).
const discordEpoch = 1420070400000

// Server is the fake Discord. Its methods are safe for concurrent use.
type Server struct {
	t     testing.TB
	hs    *httptest.Server
	appID string
	botID string
	pub   ed25519.PublicKey
	priv  ed25519.PrivateKey

	// mu protects every field below.
	mu                sync.Mutex
	lastID            uint64
	users             map[string]*user
	channels          map[string]*channel
	dms               map[string]string // user id → DM channel id
	threads           []string
	typing            map[string]int
	interactions      map[string]*interaction
	byToken           map[string]*interaction
	commands          map[string][]*command // guild id ("" global) → commands
	buckets           map[string]*bucket
	forced            []*forcedLimit
	holds             []*hold
	globalForced      int
	limited           int
	retryAfter        time.Duration
	bucketLimit       int
	bucketWindow      time.Duration
	interactionWindow time.Duration
	sessions          map[string]*session
	conns             map[*gwConn]bool
	identifies        int
	heartbeats        int
	resumes           int
	messageContent    bool
	strictIntents     bool
	heartbeatMS       int
	requests          map[string]int
	reactions         map[string][]string // channel/message → emoji
	files             map[string]*attachment
	guilds            []string                   // the guilds the bot is in, in order
	members           map[string]map[string]bool // guild → its members (who spoke or used a command there, or Join)
	cdn, mediaProxy   string                     // attachment URLs' bases
	endpoint          string                     // the Interactions Endpoint URL, "" for the gateway
}

// New starts the fake; t.Cleanup closes it.
func New(t testing.TB) *Server {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("discordtest: key: %v", err)
	}
	s := &Server{
		t:                 t,
		pub:               pub,
		priv:              priv,
		users:             map[string]*user{},
		members:           map[string]map[string]bool{},
		channels:          map[string]*channel{},
		dms:               map[string]string{},
		typing:            map[string]int{},
		interactions:      map[string]*interaction{},
		byToken:           map[string]*interaction{},
		commands:          map[string][]*command{},
		buckets:           map[string]*bucket{},
		sessions:          map[string]*session{},
		conns:             map[*gwConn]bool{},
		requests:          map[string]int{},
		reactions:         map[string][]string{},
		files:             map[string]*attachment{},
		retryAfter:        500 * time.Millisecond,
		bucketLimit:       50,
		bucketWindow:      time.Second,
		interactionWindow: 3 * time.Second,
		messageContent:    true,
		cdn:               "https://cdn.discordapp.com",
		mediaProxy:        "https://media.discordapp.net",
		// Discord's own value, in milliseconds
		// (https://discord.com/developers/docs/events/gateway#hello-event).
		heartbeatMS: 41250,
	}
	s.appID = s.newID()
	s.botID = s.appID // a bot user's id is its application's id
	s.users[s.botID] = &user{ID: s.botID, Name: "tidybot", Bot: true}
	s.hs = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	t.Cleanup(s.Close)
	return s
}

// Close closes the gateway connections and the server.
func (s *Server) Close() {
	s.mu.Lock()
	holds := slices.Clone(s.holds)
	s.mu.Unlock()
	for _, h := range holds {
		s.release(h)
	}
	s.mu.Lock()
	conns := make([]*gwConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.ws.Close()
	}
	s.hs.Close()
}

// URL is the fake's base URL (http://127.0.0.1:PORT); REST is served
// under /api/v9/ and /api/v10/, the gateway at /gateway.
func (s *Server) URL() string { return s.hs.URL }

// APIURL is the REST base discordgo uses, on the fake: URL()+"/api/v9/".
func (s *Server) APIURL() string { return s.hs.URL + "/api/v9/" }

// GatewayURL is the WebSocket URL GET /gateway answers.
func (s *Server) GatewayURL() string { return "ws" + s.hs.URL[len("http"):] + "/gateway" }

// AppID is the bot's application id.
func (s *Server) AppID() string { return s.appID }

// BotID is the bot user's id (the same snowflake as its application).
func (s *Server) BotID() string { return s.botID }

// PublicKey is the application's public key, which verifies the
// signature of interactions posted by PostInteraction.
func (s *Server) PublicKey() ed25519.PublicKey { return s.pub }

// Transport sends requests for https://discord.com/ (and
// discordapp.com, and the CDN hosts cdn.discordapp.com and
// media.discordapp.net, where attachments are) to the fake and every
// other request as usual.
func (s *Server) Transport() http.RoundTripper {
	u, _ := url.Parse(s.hs.URL)
	return &transport{host: u.Host, next: s.hs.Client().Transport}
}

type transport struct {
	host string
	next http.RoundTripper
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.URL.Host {
	case "discord.com", "discordapp.com", "www.discord.com", "cdn.discordapp.com", "media.discordapp.net":
		r = r.Clone(r.Context())
		r.URL.Scheme = "http"
		r.URL.Host = t.host
		r.Host = t.host
	}
	return t.next.RoundTrip(r)
}

// newID returns a new snowflake, greater than every earlier one, so ids
// order messages as Discord's do
// (https://discord.com/developers/docs/reference#snowflakes: the top 42
// bits are milliseconds since the Discord epoch). Called with mu held
// or before the server starts.
func (s *Server) newID() string {
	id := uint64(time.Now().UnixMilli()-discordEpoch) << 22
	if id <= s.lastID {
		id = s.lastID + 1
	}
	s.lastID = id
	return strconv.FormatUint(id, 10)
}

// SetRetryAfter sets how long a 429 tells the client to wait (0.5 s
// unless set).
func (s *Server) SetRetryAfter(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retryAfter = d
}

// SetBucketLimit sets every bucket's size and window (50 calls a second
// unless set); a call over it is answered 429 as Discord does.
func (s *Server) SetBucketLimit(n int, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bucketLimit, s.bucketWindow = n, window
}

// SetInteractionDeadline changes the 3 s an interaction may wait for
// its first answer (for tests of the late answer).
func (s *Server) SetInteractionDeadline(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.interactionWindow = d
}

// SetHeartbeatInterval sets the heartbeat_interval HELLO sends.
func (s *Server) SetHeartbeatInterval(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heartbeatMS = int(d / time.Millisecond)
}

// WithoutMessageContent turns the privileged MESSAGE_CONTENT intent off
// for the application: guild messages reach the bot with empty content
// unless they mention it (DMs keep theirs), as
// https://discord.com/developers/docs/events/gateway#message-content-intent
// documents. A bot that asks for the intent anyway gets empty content,
// or the close code 4014 after RefuseDisallowedIntents.
func (s *Server) WithoutMessageContent() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messageContent = false
}

// RefuseDisallowedIntents makes IDENTIFY with a privileged intent the
// application lacks close the connection with 4014, as Discord does
// (https://discord.com/developers/docs/topics/opcodes-and-status-codes#gateway-gateway-close-event-codes).
func (s *Server) RefuseDisallowedIntents() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.strictIntents = true
}

// Requests is how many REST calls of a route ("POST /channels/{}/messages")
// the fake answered, whatever the status.
func (s *Server) Requests(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[normalizeRoute(route)]
}

// AttachmentsOnFake makes attachment URLs point at the fake itself
// (URL()+"/attachments/…") instead of https://cdn.discordapp.com, for a
// client whose transport rewrites only discord.com.
func (s *Server) AttachmentsOnFake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cdn, s.mediaProxy = s.hs.URL, s.hs.URL
}
