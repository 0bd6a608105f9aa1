// Package discord connects the bot to Discord through discordgo: events
// arrive over the gateway WebSocket (and, optionally, interactions over
// HTTP, POST /discord/interactions) and become bot.Incoming; the bot's
// messages go out as plain text (mentions disabled), split at Discord's
// 2,000 characters, with message components for choices, edited in
// place for progress. In a DM every message reaches the bot; in a
// server channel only a mention of the bot and its slash commands do,
// and a mention is answered in a thread started from that message.
package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/hooks"
	"github.com/tidybot/tidybot/internal/retry"
)

// Platform is the platform name in bot.Incoming.
const Platform = "discord"

// DefaultAPIURL is where Discord's REST API lives (discordgo's
// EndpointDiscord, without the trailing slash).
const DefaultAPIURL = "https://discord.com"

// Config configures an Adapter.
type Config struct {
	// Token is DISCORD_BOT_TOKEN, the bot's token (without "Bot ").
	Token string
	// APIURL is DISCORD_API_URL: the base of Discord's REST API
	// (https://discord.com, or a fake's http://127.0.0.1:PORT); the
	// gateway's address comes from its GET /api/v9/gateway.
	APIURL string
	// HTTPClient makes the REST calls (its Transport is kept; the adapter
	// sends requests for https://discord.com/ to APIURL).
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Team registers team mode's commands too (/connect, /disconnect).
	Team bool
	// PublicKey is DISCORD_PUBLIC_KEY (hex): set, interactions are also
	// taken on POST /discord/interactions, each request's Ed25519
	// signature checked.
	PublicKey string
	// GuildID is DISCORD_GUILD_ID: set, the slash commands are registered
	// in that server only (at once), else globally.
	GuildID string
	// MessageContent asks the gateway for the privileged MESSAGE_CONTENT
	// intent (DISCORD_MESSAGE_CONTENT): without it a server message's
	// text reaches the bot only when it mentions the bot, which is all
	// the bot reads there anyway.
	MessageContent bool
	// AppID is DISCORD_APP_ID, the application's id; empty, it is read
	// from the gateway's READY (application.id).
	AppID string
	// Events counts events the adapter skips because they do not decode
	// (outcome "undecodable"); nil counts nothing.
	Events Events
	// Hooks keeps the tokens of interactions where replicas share them
	// (store/postgres); nil keeps them in this process's memory.
	Hooks Hooks
	// Now is the clock of the tokens' lifetimes (default time.Now).
	Now func() time.Time
}

// Events hears what the adapter does with events; cmd/tidybot counts
// them in /metrics.
type Events interface {
	Event(platform, outcome string)
}

// Adapter is the Discord platform.
type Adapter struct {
	api   session
	sess  *discordgo.Session // for the gateway (Open, handlers) and the rate limiter
	cfg   Config
	log   *slog.Logger
	self  string // the bot's user id, from GET /users/@me
	name  string // the bot's user name
	appID string // the application id (Config.AppID, else READY's)

	mu       sync.Mutex                    // protects the maps below: the learnt ones bounded (putBounded), the others expire
	threads  map[string]string             // thread channel id → parent channel id, as learnt
	plain    map[string]bool               // channel ids known not to be threads; "nothread:"+message id
	names    map[string]string             // message id → a name for the thread started from it
	wrote    map[string]string             // message id → the thread it was written in (for Ack)
	dms      map[string]string             // DM channel id → its person
	tokens   map[string]hookToken          // message id → the token of the interaction it answers
	inflight map[string][]*interactionHook // place|person → interactions being answered (hooks.go)
	seen     map[string]time.Time          // interaction id → until when it is remembered as taken

	hooks Hooks // the tokens of interactions to answer: cfg.Hooks, else in memory

	shared shared // user id → the servers they share with the bot (members.go)
}

// hookToken is the token of the interaction a message answers, good for
// 15 minutes (discord.com/developers/docs/interactions/receiving-and-responding#followup-messages).
type hookToken struct {
	appID, token string
	expires      time.Time
}

// hookFor is how long an interaction token answers.
const hookFor = 15 * time.Minute

var (
	_ bot.Platform       = (*Adapter)(nil)
	_ bot.Editor         = (*Adapter)(nil)
	_ bot.ButtonAnswerer = (*Adapter)(nil)
	_ bot.CommandNamer   = (*Adapter)(nil)
	_ bot.Adapter        = (*Adapter)(nil)
	_ bot.Router         = (*Adapter)(nil)
)

// New connects to Discord (GET /users/@me) and returns the adapter. A
// refused token is an error naming DISCORD_BOT_TOKEN; a network failure
// an agent.ErrUnreachable, which serve waits out.
func New(cfg Config) (*Adapter, error) {
	s, err := newSession(&cfg)
	if err != nil {
		return nil, err
	}
	me, err := s.User("@me", discordgo.WithContext(context.Background()))
	if err != nil {
		return nil, connectError(err, cfg)
	}
	if me == nil || me.ID == "" {
		return nil, errors.New("discord: GET /users/@me gave no user id (check DISCORD_BOT_TOKEN)")
	}
	a := &Adapter{api: s, sess: s, cfg: cfg, log: cfg.Logger, self: me.ID, name: me.Username, appID: cfg.AppID,
		threads: map[string]string{}, plain: map[string]bool{}, names: map[string]string{}, wrote: map[string]string{}, dms: map[string]string{},
		tokens: map[string]hookToken{}, inflight: map[string][]*interactionHook{}, seen: map[string]time.Time{}, hooks: cfg.Hooks}
	if a.hooks == nil {
		a.hooks = &hooks.Memory{Now: cfg.Now} // one process (bbolt): its memory is all there is to share
	}
	return a, nil
}

// newSession makes a discordgo session for cfg (defaults filled in)
// whose REST calls go to cfg.APIURL, never wait out a 429 (the bot's
// send queue does: bot.RateLimited) and carry no gateway yet.
func newSession(cfg *Config) (*discordgo.Session, error) {
	if cfg.Token == "" {
		return nil, errors.New("discord: DISCORD_BOT_TOKEN is not set")
	}
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	base, err := url.Parse(strings.TrimRight(cfg.APIURL, "/"))
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, fmt.Errorf("discord: DISCORD_API_URL %q is no URL (e.g. %s)", cfg.APIURL, DefaultAPIURL)
	}
	s, err := discordgo.New("Bot " + cfg.Token)
	if err != nil {
		return nil, fmt.Errorf("discord: %w", redact(err, cfg.Token))
	}
	hc := *cfg.HTTPClient
	hc.Transport = rewrite{base: base, next: cfg.HTTPClient.Transport}
	s.Client = &hc
	s.ShouldRetryOnRateLimit = false // a 429 is the send queue's to wait out
	s.MaxRestRetries = 1
	s.SyncEvents = true // events in the gateway's order; intake keeps each chat's
	s.StateEnabled = true
	s.LogLevel = discordgo.LogWarning
	routeLibraryLogs(cfg.Logger, cfg.Token)
	s.Identify.Intents = intents(cfg.MessageContent)
	return s, nil
}

// libraryLog is where discordgo's own log lines go (its Logger is one
// package variable, so the last adapter made sets it): the adapter's
// logger, redacted of the token, instead of the standard log package.
var (
	libraryLog  atomic.Pointer[libraryLogger]
	libraryOnce sync.Once
)

type libraryLogger struct {
	log   *slog.Logger
	token string
}

func routeLibraryLogs(l *slog.Logger, token string) {
	libraryLog.Store(&libraryLogger{log: l, token: token})
	libraryOnce.Do(func() {
		discordgo.Logger = func(level, _ int, format string, a ...any) {
			ll := libraryLog.Load()
			if ll == nil {
				return
			}
			msg := redact(fmt.Errorf(format, a...), ll.token).Error()
			lvl := slog.LevelDebug
			if level <= discordgo.LogWarning {
				lvl = slog.LevelWarn // discordgo reconnects by itself: a warning
			}
			ll.log.Log(context.Background(), lvl, "discordgo: "+msg)
		}
	})
}

// intents are the gateway intents the bot asks for
// (discord.com/developers/docs/events/gateway#gateway-intents): server
// messages and DMs, servers (for threads' parents); MESSAGE_CONTENT only
// when configured, as it is privileged (switched on in the developer
// portal, else the gateway closes with 4014).
func intents(content bool) discordgo.Intent {
	i := discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages
	if content {
		i |= discordgo.IntentMessageContent
	}
	return i
}

// rewrite sends discordgo's requests, whose endpoints are fixed to
// https://discord.com/ (discordgo endpoints.go), to the configured base.
type rewrite struct {
	base *url.URL
	next http.RoundTripper
}

func (r rewrite) RoundTrip(req *http.Request) (*http.Response, error) {
	next := r.next
	if next == nil {
		next = http.DefaultTransport
	}
	if req.URL.Host != "discord.com" || (r.base.Host == "discord.com" && r.base.Scheme == "https" && r.base.Path == "") {
		return next.RoundTrip(req)
	}
	out := req.Clone(req.Context())
	u := *req.URL
	u.Scheme, u.Host = r.base.Scheme, r.base.Host
	u.Path = strings.TrimRight(r.base.Path, "/") + req.URL.Path
	if req.URL.RawPath != "" {
		u.RawPath = strings.TrimRight(r.base.Path, "/") + req.URL.RawPath
	}
	out.URL, out.Host = &u, ""
	return next.RoundTrip(out)
}

// connectError says why GET /users/@me failed at start: the network (an
// agent.ErrUnreachable: serve waits and tries again), the token (401,
// discord.com/developers/docs/reference#authentication), or another
// answer of Discord's.
func connectError(err error, cfg Config) error {
	if u := retry.UnreachedAtStart(err, "Discord at "+hostOf(cfg.APIURL), "the network connection and DISCORD_API_URL", redact(err, cfg.Token)); u != nil {
		return fmt.Errorf("discord: GET /users/@me: %w", u)
	}
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil && (re.Response.StatusCode == http.StatusUnauthorized || re.Response.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("discord: GET /users/@me: Discord refused the token (%s): check DISCORD_BOT_TOKEN", re.Response.Status)
	}
	return fmt.Errorf("discord: GET /users/@me: %w", redact(err, cfg.Token))
}

// unreached is err as an agent.ErrUnreachable when it is the network.
func (a *Adapter) unreached(err error) *agent.Error {
	return retry.UnreachedAtStart(err, "Discord at "+hostOf(a.cfg.APIURL), "the network connection and DISCORD_API_URL", redact(err, a.cfg.Token))
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return raw
}

// webhookPath matches an interaction's webhook path, whose last part is
// the interaction's token (/webhooks/{application.id}/{interaction.token}),
// and an interaction callback's (/interactions/{id}/{token}/callback).
var webhookPath = regexp.MustCompile(`/(webhooks|interactions)/([0-9]+)/[A-Za-z0-9._-]+`)

// redact removes the bot token and any interaction token from an error:
// the library's errors carry the request URL (which holds an
// interaction's token) and Discord's answer (which may echo a token).
func redact(err error, token string) error {
	if err == nil {
		return nil
	}
	s := err.Error()
	clean := webhookPath.ReplaceAllString(s, "/$1/$2/<token>")
	if token != "" {
		clean = strings.ReplaceAll(clean, token, "<DISCORD_BOT_TOKEN>")
	}
	if clean == s {
		return err
	}
	return errors.New(clean)
}

// Name implements bot.Platform.
func (a *Adapter) Name() string { return Platform }

// EditInterval implements bot.Editor: Discord limits each route by its
// own bucket (X-RateLimit-*, discord.com/developers/docs/topics/rate-limits);
// a message's edits share one, about five per five seconds per channel.
func (a *Adapter) EditInterval() time.Duration { return 1500 * time.Millisecond }

// Self is the bot's user id (GET /users/@me).
func (a *Adapter) Self() string { return a.self }
