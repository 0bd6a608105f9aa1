// Package slack connects the bot to Slack over the Events API (HTTP):
// messages, the /tidy-inbox slash command and button presses arrive as
// signed requests and become bot.Incoming; the bot's messages go out with
// chat.postMessage (in the thread of the message that started a run, in
// channels) and progress is edited in place with chat.update.
package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/hooks"
	"github.com/tidybot/tidybot/internal/retry"
)

// Platform is the platform name in bot.Incoming.
const Platform = "slack"

// maxText keeps a message well under Slack's limits (40,000 characters;
// 3,000 in a section block).
const maxText = 3000

// Config configures an Adapter.
type Config struct {
	BotToken      string
	SigningSecret string
	// AppToken (xapp-…) enables Socket Mode.
	AppToken string
	// APIURL is SLACK_API_URL; it ends in /api/.
	APIURL     string
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Now is the clock for signature timestamps (default time.Now).
	Now func() time.Time
	// Threads says which channel threads the bot takes part in; nil: in
	// channels, only mentions are answered.
	Threads Threads
	// Events counts events the adapter skips because they do not decode
	// (outcome "undecodable"); nil counts nothing.
	Events Events
	// Hooks keeps the response_urls where replicas share them; nil keeps
	// them in this process's memory.
	Hooks Hooks
}

// Events hears what the adapter does with events; cmd/tidybot counts
// them in /metrics.
type Events interface {
	Event(platform, outcome string)
}

// Threads knows the channel threads the bot already takes part in, from
// durable state, so that a reply there reaches the bot without a mention
// even after a restart. *bot.Bot implements it.
type Threads interface {
	// KnowsThread reports whether the bot holds a conversation in thread
	// threadID of chatID on platform; an error means it cannot tell.
	KnowsThread(ctx context.Context, platform, chatID, threadID string) (bool, error)
}

// Adapter is the Slack platform.
type Adapter struct {
	api     slackAPI // waits out 429s itself: for calls outside the bot's send queue
	noRetry slackAPI // no retries: for the calls the bot's send queue makes (it waits out a 429)
	cfg     Config
	log     *slog.Logger
	botID   string // the bot's user id, to ignore its own messages
	teamID  string // the workspace's id (auth.test), a stream's recipient_team_id

	mu      sync.Mutex // protects the fields below
	hooks   Hooks      // the response_urls: cfg.Hooks, else in memory
	hookSeq int
	ims     map[string]string // by user: the bot's own IM with them (see ownIM)
	imOf    map[string]string // by channel: the person of each channel known to be one of the bot's own IMs

	panes panes // the assistant pane's threads (assistant.go)

	lanes *rateLanes // Slack's per-method limits (limits.go)
}

var (
	_ bot.Platform     = (*Adapter)(nil)
	_ bot.Editor       = (*Adapter)(nil)
	_ bot.CommandNamer = (*Adapter)(nil)
	_ bot.Resender     = (*Adapter)(nil)
	_ bot.Adapter      = (*Adapter)(nil)
	_ bot.Router       = (*Adapter)(nil)
)

// New connects to Slack (auth.test) and returns the adapter.
func New(ctx context.Context, cfg Config) (*Adapter, error) {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Adapter{cfg: cfg, log: cfg.Logger, hooks: cfg.Hooks}
	if a.hooks == nil {
		a.hooks = &hooks.Memory{Now: cfg.Now}
	}
	// Every call keeps Slack's per-method lanes; a copy of the client,
	// so the caller's is left as it was.
	a.lanes = newRateLanes(cfg.HTTPClient.Transport, cfg.Now)
	hc := *cfg.HTTPClient
	hc.Transport = a.lanes
	cfg.HTTPClient = &hc
	// OptionRetry after OptionHTTPClient, or the client replaces it.
	a.api = slack.New(cfg.BotToken, slack.OptionAPIURL(cfg.APIURL), slack.OptionHTTPClient(cfg.HTTPClient), slack.OptionRetry(3),
		slack.OptionLog(libLog{a}))
	a.noRetry = slack.New(cfg.BotToken, slack.OptionAPIURL(cfg.APIURL), slack.OptionHTTPClient(cfg.HTTPClient), slack.OptionLog(libLog{a}))
	auth, err := a.api.AuthTestContext(ctx)
	if err != nil {
		return nil, a.connectError(err)
	}
	a.botID, a.teamID = auth.UserID, auth.TeamID
	return a, nil
}

// Name implements bot.Platform.
func (a *Adapter) Name() string { return Platform }

// EditInterval implements bot.Editor (chat.update is tier 3: ~50/min).
func (a *Adapter) EditInterval() time.Duration { return 1500 * time.Millisecond }

// maxMessage is the most text one message shows, as section blocks of
// maxText each: Slack refuses larger block sets (msg_blocks_too_long, seen
// at about 13,000 characters, slackapi/bolt-js#2509).
const maxMessage = 12000

// sections renders text as section blocks of at most maxText characters
// each (a section's limit, docs.slack.dev/reference/block-kit/blocks/section-block).
func sections(text string) []slack.Block {
	var out []slack.Block
	for _, part := range split(text, maxText) {
		out = append(out, slack.NewSectionBlock(slack.NewTextBlockObject(slack.PlainTextType, part, false, false), nil, nil))
	}
	return out
}

// blocks renders text and buttons as Block Kit; nil without buttons.
func blocks(text string, bs []bot.Button) []slack.Block {
	if len(bs) == 0 {
		return nil
	}
	out := sections(text)
	bs, good, bad := splitFeedback(bs)
	var els []slack.BlockElement
	for i, b := range bs {
		btn := slack.NewButtonBlockElement("choice_"+strconv.Itoa(i), b.Data, slack.NewTextBlockObject(slack.PlainTextType, clip(b.Label, 75), false, false))
		els = append(els, btn)
	}
	if len(els) > 0 {
		out = append(out, slack.NewActionBlock("choices", els...))
	}
	if fb := feedbackBlock(good, bad); fb != nil {
		out = append(out, fb)
	}
	return out
}

// clipMiddle keeps the start and the end of a text longer than n
// characters, with "…" between them.
func clipMiddle(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	head := (n - 3) / 2
	return string(r[:head]) + "\n…\n" + string(r[len(r)-(n-3-head):])
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// options builds a message: plain text (escaped by Slack's rules: & < >),
// in a thread when one is given.
func options(m bot.Outgoing, text string, withButtons bool) []slack.MsgOption {
	opts := []slack.MsgOption{slack.MsgOptionText(text, true)}
	if m.ThreadID != "" {
		opts = append(opts, slack.MsgOptionTS(m.ThreadID))
	}
	bs := []slack.Block(nil)
	if withButtons {
		bs = blocks(text, m.Buttons)
	}
	if withButtons && m.Link != nil && dm(m.ChatID) {
		if bs == nil {
			bs = sections(text)
		}
		bs = append(bs, linkBlock(m.Link))
	}
	if bs == nil && len([]rune(text)) > maxText {
		bs = sections(text)
	}
	if bs != nil {
		opts = append(opts, slack.MsgOptionBlocks(bs...))
	}
	return opts
}

// Send implements bot.Platform. A message holds up to maxMessage
// characters (as several section blocks beyond one), so a long question
// stays one message with its buttons; longer text is split, buttons go
// last.
// Where the bot is not a member, the answer goes through the latest
// slash command's response_url there.
func (a *Adapter) Send(ctx context.Context, m bot.Outgoing) (string, error) {
	return a.sendParts(ctx, m, nil)
}

// sendParts is Send, leaving out the parts of m already posted (by
// their index in split's parts: their ts).
func (a *Adapter) sendParts(ctx context.Context, m bot.Outgoing, posted map[int]string) (string, error) {
	if len(posted) == 0 && a.othersDM(ctx, m) {
		// No chat.postMessage can reach a DM between people: straight
		// to the person's response_url.
		id, ok, err := a.respond(ctx, m, false)
		if !ok && err == nil {
			err = fmt.Errorf("slack: post to %s, a DM the bot is not in: no response_url of %s left", m.ChatID, m.UserID)
		}
		return id, err
	}
	chunks := split(m.Text, maxMessage)
	var ts string
	for i, c := range chunks {
		if t, ok := posted[i]; ok {
			ts = t
			continue
		}
		api := a.noRetry
		if i > 0 {
			api = a.api // a retry of the whole Send would post the first chunks twice
		}
		opts := options(m, c, i == len(chunks)-1)
		if m.Ref != "" {
			opts = append(opts, slack.MsgOptionMetadata(outboxMetadata(m.Ref, i, len(chunks))))
		} else {
			opts = append(opts, slack.MsgOptionMetadata(postMetadata()))
		}
		_, t, err := api.PostMessageContext(ctx, m.ChatID, opts...)
		if err != nil {
			if i == 0 && notMember(err) {
				if id, ok, herr := a.respond(ctx, m, false); ok {
					return id, herr
				}
			}
			return "", fmt.Errorf("slack: post to %s: %w", m.ChatID, a.queueError(err))
		}
		ts = t
	}
	if m.Link != nil && !dm(m.ChatID) {
		a.sendLink(ctx, m)
	}
	return ts, nil
}

// Edit implements bot.Editor. The message keeps the whole text, as
// several section blocks when it is longer than one (up to maxMessage
// characters; beyond that its start and its end).
//
// A message posted through a response_url cannot be edited: the new text
// is posted as a new message while the response_url has uses to spare,
// else skipped (the final answer keeps its use).
func (a *Adapter) Edit(ctx context.Context, id string, m bot.Outgoing) error {
	if strings.HasPrefix(id, hookPrefix) {
		_, _, err := a.respond(ctx, m, true)
		return err
	}
	text := clipMiddle(strings.TrimSpace(m.Text), maxMessage)
	bs := blocks(text, m.Buttons)
	if bs == nil {
		// Replaces any earlier blocks (buttons) with the text alone.
		bs = sections(text)
	}
	if m.Link != nil && dm(m.ChatID) {
		bs = append(bs, linkBlock(m.Link)) // as Send puts it: the blocks replace the old ones
	}
	opts := []slack.MsgOption{slack.MsgOptionText(text, true), slack.MsgOptionBlocks(bs...)}
	if _, _, _, err := a.noRetry.UpdateMessageContext(ctx, m.ChatID, id, opts...); err != nil {
		return fmt.Errorf("slack: update %s in %s: %w", id, m.ChatID, a.queueError(err))
	}
	return nil
}

func split(text string, n int) []string {
	text = strings.TrimSpace(text)
	if text == "" {
		return []string{"…"}
	}
	var out []string
	for r := []rune(text); len(r) > n; r = []rune(text) {
		head := string(r[:n])
		if i := strings.LastIndex(head, "\n"); i > len(head)/2 {
			head = head[:i]
		}
		out = append(out, strings.TrimSpace(head))
		text = strings.TrimSpace(text[len(head):])
	}
	if text != "" {
		out = append(out, text)
	}
	return out
}

// verify reads the body and checks Slack's signature: 401 for a missing,
// forged or stale one (±5 minutes), 400 for an unreadable body.
func (a *Adapter) verify(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return nil, false
	}
	if !Verify(a.cfg.SigningSecret, r.Header.Get("X-Slack-Request-Timestamp"), r.Header.Get("X-Slack-Signature"), body, a.cfg.Now()) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return nil, false
	}
	return body, true
}

// count counts one event outcome in Config.Events.
func (a *Adapter) count(outcome string) {
	if a.cfg.Events != nil {
		a.cfg.Events.Event(Platform, outcome)
	}
}

// Verify checks a v0 request signature and its timestamp against now.
func Verify(secret, ts, sig string, body []byte, now time.Time) bool {
	if secret == "" || ts == "" || !strings.HasPrefix(sig, "v0=") {
		return false
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return false
	}
	return hmacEqual(Sign(secret, ts, body), sig)
}

// EventsHandler serves POST /slack/events.
func (a *Adapter) EventsHandler(h bot.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := a.verify(w, r)
		if !ok {
			return
		}
		ev, err := slackevents.ParseEvent(json.RawMessage(body), slackevents.OptionNoVerifyToken())
		if err != nil {
			// A signed event we cannot read: a non-2xx would only buy
			// three identical retries.
			a.log.Warn("slack event not understood", slog.Any("err", a.redact(err)))
			if !json.Valid(body) {
				http.Error(w, "bad request", http.StatusBadRequest)
				return
			}
			a.count("undecodable")
			w.WriteHeader(http.StatusOK)
			return
		}
		switch ev.Type {
		case slackevents.URLVerification:
			if v, ok := ev.Data.(*slackevents.EventsAPIURLVerificationEvent); ok {
				w.Header().Set("Content-Type", "text/plain")
				_, _ = io.WriteString(w, v.Challenge)
				return
			}
		case slackevents.CallbackEvent:
			home, err := a.homeOpened(r.Context(), h, ev.InnerEvent.Data, ev.TeamID)
			var in bot.Incoming
			ok := false
			if !home && err == nil {
				in, ok, err = a.incoming(r.Context(), ev.InnerEvent.Data)
				in.TeamID = senderTeam(in.TeamID, ev.TeamID)
			}
			if err == nil && ok {
				err = h.Handle(r.Context(), in)
			}
			if err != nil {
				a.log.Error("slack event", slog.Any("err", a.redact(err)))
				http.Error(w, "try again", http.StatusServiceUnavailable)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	})
}

// incoming turns an inner event into a bot event; ok is false for events
// the bot ignores: its own messages, edits and other subtypes, and, in
// channels, messages not addressed to it. A channel message is addressed
// to the bot when it mentions the bot or replies in a thread the bot
// takes part in; every DM is.
//
// Slack sends one mention in a channel twice, as message.channels and as
// app_mention, with different event ids (docs.slack.dev/reference/events/app_mention),
// and retries keep their event id: the event id given to the bot is the
// message's channel and ts, so the bot runs one message once whichever
// event comes first. An ignored event is never handed over, so it marks
// nothing as seen.
func (a *Adapter) incoming(ctx context.Context, inner any) (bot.Incoming, bool, error) {
	var user, text, channel, ts, threadTS, team string
	var dm bool
	var att *bot.Attachment
	switch e := inner.(type) {
	case *slackevents.MessageEvent:
		// A message with files has subtype file_share
		// (docs.slack.dev/reference/events/message/file_share); every
		// other subtype (edits, joins, bot messages) is not for the bot.
		if e.BotID != "" || (e.SubType != "" && e.SubType != "file_share") || e.User == "" || e.User == a.botID {
			return bot.Incoming{}, false, nil
		}
		user, text, channel, ts, threadTS, team = e.User, e.Text, e.Channel, e.TimeStamp, e.ThreadTimeStamp, e.UserTeam
		dm = e.ChannelType == "im"
		if dm {
			a.learnIM(e.User, e.Channel)
		}
		if e.Message != nil {
			att = attachment(e.Message.Files)
			if team == "" {
				team = e.Message.Team
			}
		}
	case *slackevents.AppMentionEvent:
		if e.BotID != "" || e.User == "" || e.User == a.botID {
			return bot.Incoming{}, false, nil
		}
		user, text, channel, ts, threadTS, team = e.User, e.Text, e.Channel, e.TimeStamp, e.ThreadTimeStamp, e.UserTeam
		dm = a.ownIM(ctx, channel, user)
		att = attachment(e.Files)
	default:
		a.assistantEvent(inner)
		return bot.Incoming{}, false, nil
	}
	text, mentioned := stripMention(text, a.botID)
	if !dm && !mentioned {
		if threadTS == "" || a.cfg.Threads == nil {
			return bot.Incoming{}, false, nil
		}
		known, err := a.cfg.Threads.KnowsThread(ctx, Platform, channel, threadTS)
		if err != nil {
			return bot.Incoming{}, false, fmt.Errorf("slack: is thread %s in %s ours: %w", threadTS, channel, err)
		}
		if !known {
			return bot.Incoming{}, false, nil
		}
	}
	if strings.TrimSpace(text) == "" && att == nil {
		return bot.Incoming{}, false, nil
	}
	thread := threadTS
	if _, _, cmd := command(text); dm && thread != "" && !cmd {
		a.titlePane(channel, thread, text) // a command (/help) names no thread
	}
	if !dm && thread == "" {
		thread = ts // in a channel, a run's posts go in the thread of its message
	}
	in := bot.Incoming{Platform: Platform, ChatID: channel, ThreadID: thread, MessageID: ts, UserID: user, Text: text,
		EventID: "msg:" + channel + ":" + ts, DM: dm, TeamID: team, At: time.Now(), Attachment: att}
	if cmd, args, ok := command(text); ok && att == nil {
		in.Command, in.Text = cmd, args
	}
	return in, true, nil
}

// stripMention removes the bot's mentions ("<@UBOT>", "<@UBOT|name>")
// from text, with the space around them, and reports whether there was
// one.
func stripMention(text, botID string) (string, bool) {
	found := false
	prefix := "<@" + botID
	var b strings.Builder
	for {
		i := strings.Index(text, prefix)
		if i < 0 {
			break
		}
		rest := text[i+len(prefix):]
		end := strings.IndexByte(rest, '>')
		if end < 0 || (end > 0 && rest[0] != '|') {
			// Another user whose id starts with ours, or no closing '>'.
			b.WriteString(text[:i+len(prefix)])
			text = rest
			continue
		}
		found = true
		b.WriteString(strings.TrimRight(text[:i], " "))
		text = strings.TrimLeft(rest[end+1:], " ")
		before := b.String()
		if before != "" && !strings.HasSuffix(before, "\n") && text != "" && !strings.ContainsAny(text[:1], ",.;:!?\n") {
			b.WriteByte(' ')
		}
	}
	b.WriteString(text)
	return strings.TrimSpace(b.String()), found
}

// connectError says why auth.test failed at start: the network (an
// agent.ErrUnreachable naming DNS, refused, no route or a timeout: serve
// waits and tries again), the token (an ok:false answer such as
// invalid_auth, docs.slack.dev/reference/methods/auth.test#errors), or
// another answer.
func (a *Adapter) connectError(err error) error {
	host := a.cfg.APIURL
	if u, perr := url.Parse(a.cfg.APIURL); perr == nil && u.Host != "" {
		host = u.Host
	}
	if u := retry.UnreachedAtStart(err, "Slack at "+host, "the network connection and SLACK_API_URL", a.redact(err)); u != nil {
		return fmt.Errorf("slack: auth.test: %w", u)
	}
	var refused slack.SlackErrorResponse
	if errors.As(err, &refused) {
		return fmt.Errorf("slack: auth.test: Slack refused the token (%s): check SLACK_BOT_TOKEN", a.redactText(refused.Err))
	}
	return fmt.Errorf("slack: auth.test (check SLACK_API_URL): %w", a.redact(err))
}

// redact removes the configured secrets from err's text: an upstream that
// echoes a token must not put it into our logs or errors.
func (a *Adapter) redact(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := a.redactText(msg); clean != msg {
		return errors.New(clean)
	}
	return err
}

// Who waits out a 429 (Retry-After, https://api.slack.com/apis/rate-limits):
// the calls the bot makes through its per-platform send queue (Send's
// first chunk, Edit) go through a.noRetry, which does not retry; their error
// implements bot.RateLimited and the queue pauses every call to Slack for
// that long, then retries. Other calls (auth.test, file downloads, later
// chunks of a long message) go through a.api, whose client waits them out
// (slack.OptionRetry). One place per call, so a 429 is never waited out
// twice.

// queueError redacts err and keeps a 429's Retry-After readable as
// bot.RateLimited.
func (a *Adapter) queueError(err error) error {
	clean := a.redact(err)
	if rl, ok := errors.AsType[*slack.RateLimitedError](err); ok {
		// An HTTP 429 with Retry-After (https://api.slack.com/apis/rate-limits).
		return bot.RetryLater(clean, rl.RetryAfter)
	}
	return clean
}

func (a *Adapter) redactText(s string) string {
	for _, sec := range []struct{ value, name string }{
		{a.cfg.BotToken, "SLACK_BOT_TOKEN"}, {a.cfg.AppToken, "SLACK_APP_TOKEN"}, {a.cfg.SigningSecret, "SLACK_SIGNING_SECRET"},
	} {
		if sec.value != "" {
			s = strings.ReplaceAll(s, sec.value, "<"+sec.name+">")
		}
	}
	return s
}

// libLog takes slack-go's own log lines (debug output) into our log,
// redacted, instead of its default logger on stderr.
type libLog struct{ a *Adapter }

func (l libLog) Output(_ int, s string) error {
	l.a.log.Debug("slack-go", slog.String("msg", l.a.redactText(strings.TrimSpace(s))))
	return nil
}

// CommandName implements bot.CommandNamer: the app registers /tidy-inbox
// and /tidy (deploy/slack-manifest.yaml); every other command is a word
// after /tidy, since Slack rejects an unregistered slash command.
func (a *Adapter) CommandName(name string) string {
	if name == ownSlash {
		return "/" + ownSlash
	}
	return "/tidy " + name
}

// command reads a command typed as a message: "/undo" (a typed slash
// word reaches a bot as text, where an unregistered slash command would
// not) or "/tidy undo" (the registered command, typed).
func command(text string) (string, string, bool) {
	if !strings.HasPrefix(text, "/") {
		return "", "", false
	}
	head, rest, _ := strings.Cut(text[1:], " ")
	if strings.EqualFold(head, "tidy") {
		cmd, args := subcommand(rest)
		return cmd, args, true
	}
	if c, ok := bot.LookupCommand(head); ok {
		return c.Name, strings.TrimSpace(rest), true
	}
	return "", "", false
}

// subcommand maps the text of /tidy to the bot's command: its first word
// when the bot knows it (/tidy undo → "undo"), help when it is empty, and
// otherwise "tidy" with the whole text, for the bot to answer.
func subcommand(text string) (cmd, args string) {
	text = strings.TrimSpace(text)
	if text == "" {
		return "help", ""
	}
	word, rest, _ := strings.Cut(text, " ")
	if c, ok := bot.LookupCommand(word); ok {
		return c.Name, strings.TrimSpace(rest)
	}
	return "tidy", text
}

// CommandsHandler serves POST /slack/commands (slash commands): it answers
// at once, within Slack's 3 seconds, and the run reports in the channel.
func (a *Adapter) CommandsHandler(h bot.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := a.verify(w, r)
		if !ok {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sc, err := slack.SlashCommandParse(r)
		if err != nil || sc.Command == "" || sc.UserID == "" || sc.ChannelID == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		a.rememberHook(r.Context(), sc.ChannelID, sc.UserID, sc.ResponseURL)
		in := slashIncoming(sc, a.ownIM(r.Context(), sc.ChannelID, sc.UserID))
		if err := h.Handle(r.Context(), in); err != nil {
			a.log.Error("slack command", slog.Any("err", a.redact(err)))
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK) // an empty 200: the answer comes in the channel
	})
}

// InteractivityHandler serves POST /slack/interactivity (button presses).
func (a *Adapter) InteractivityHandler(h bot.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := a.verify(w, r)
		if !ok {
			return
		}
		form, err := url.ParseQuery(string(body))
		var cb slack.InteractionCallback
		if err == nil {
			err = json.Unmarshal([]byte(form.Get("payload")), &cb)
		}
		if err != nil || cb.User.ID == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		in, ok := actionIncoming(cb)
		in = a.homeDM(r.Context(), cb, in)
		a.rememberHook(r.Context(), in.ChatID, in.UserID, cb.ResponseURL)
		if !ok {
			w.WriteHeader(http.StatusOK)
			return
		}
		if err := h.Handle(r.Context(), in); err != nil {
			a.log.Error("slack button", slog.Any("err", a.redact(err)))
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK) // acknowledges the press
	})
}

// slashIncoming turns a slash command into a bot event. Slack delivers
// only the commands an app registers (deploy/slack-manifest.yaml):
// /tidy-inbox, and /tidy, whose first word is the bot's command
// (/tidy undo, /tidy cancel, …). Any other registered name is read as a
// command of its own (/undo).
//
// dm says whether the command was typed in the bot's own IM with its
// user (see ownIM): a DM between two people has a D… id too.
func slashIncoming(sc slack.SlashCommand, dm bool) bot.Incoming {
	name := strings.ToLower(strings.TrimPrefix(sc.Command, "/"))
	in := bot.Incoming{Platform: Platform, ChatID: sc.ChannelID, UserID: sc.UserID, UserName: sc.UserName, Text: strings.TrimSpace(sc.Text),
		EventID: "cmd:" + sc.TriggerID, DM: dm, TeamID: sc.TeamID, At: time.Now()}
	if c, ok := bot.LookupCommand(name); ok {
		name = c.Name
	}
	in.Command = name
	if name == "tidy" {
		in.Command, in.Text = subcommand(sc.Text)
	}
	return in
}

// actionIncoming turns a button press into a bot event; ok is false for
// other interactions.
func actionIncoming(cb slack.InteractionCallback) (bot.Incoming, bool) {
	if cb.Type != slack.InteractionTypeBlockActions || len(cb.ActionCallback.BlockActions) == 0 || cb.User.ID == "" {
		return bot.Incoming{}, false
	}
	act := cb.ActionCallback.BlockActions[0]
	if act.ActionID == linkActionID {
		return bot.Incoming{}, false // the browser opened the link; nothing to do
	}
	if cb.View.Type == slack.VTHomeTab && !strings.HasPrefix(act.Value, bot.HomePrefix) {
		return bot.Incoming{}, false // only the Home's own controls are pressed there
	}
	in := bot.Incoming{Platform: Platform, ChatID: cb.Channel.ID, ThreadID: cb.Container.ThreadTs, UserID: cb.User.ID, Button: act.Value,
		MessageID: cb.Container.MessageTs, EventID: "act:" + cb.TriggerID, TeamID: senderTeam(cb.User.TeamID, cb.Team.ID), At: time.Now()}
	if in.ChatID == "" {
		in.ChatID = cb.Container.ChannelID
	}
	return in, true
}

// ownIM reports whether channel is the bot's own IM with user: the one
// direct conversation there is with that person. A slash command (or a
// mention) from a DM between two people, where the bot is no member and
// the channel id starts with D as well, is not: it is a shared place,
// where each person has their own conversation. The bot's IM with a
// person is what conversations.open(users=<user>) returns
// (api.slack.com/methods/conversations.open, scope im:write), asked
// once per person and kept. When Slack cannot say, the place counts as
// shared: keyed per person, nobody acts on someone else's runs.
func (a *Adapter) ownIM(ctx context.Context, channel, user string) bool {
	if !strings.HasPrefix(channel, "D") || user == "" {
		return false // IM ids start with D; the rest are channels and group DMs
	}
	if a.knownIM(channel, user) {
		return true
	}
	im, err := a.imWith(ctx, user)
	if err != nil {
		a.log.Warn("slack: cannot tell the bot's DM with a user; treating the conversation as shared",
			slog.String("channel", channel), slog.String("user_id", user), slog.Any("err", a.redact(err)))
	}
	return err == nil && im == channel
}

// knownIM reports whether channel was learnt as the bot's own IM with
// user (learnIM): a fact no later lookup contradicts.
func (a *Adapter) knownIM(channel, user string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.imOf[channel] == user
}

// learnIM keeps channel as the bot's own IM with user: a message event
// of channel_type im comes from the bot's own IMs only
// (docs.slack.dev/reference/events/message.im).
func (a *Adapter) learnIM(user, channel string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ims == nil {
		a.ims, a.imOf = map[string]string{}, map[string]string{}
	}
	a.ims[user] = channel
	a.imOf[channel] = user
}

// imWith returns the bot's own IM with user, asked once per person and
// kept; an error when Slack cannot say (not kept: the next call asks
// again).
func (a *Adapter) imWith(ctx context.Context, user string) (string, error) {
	a.mu.Lock()
	im, ok := a.ims[user]
	a.mu.Unlock()
	if ok {
		return im, nil
	}
	// No waiting out a 429 here: Slack wants the event acknowledged
	// within 3 s.
	ch, _, _, err := a.noRetry.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{user}})
	if err != nil {
		return "", fmt.Errorf("slack: conversations.open with %s: %w", user, err)
	}
	if ch == nil || ch.ID == "" {
		return "", fmt.Errorf("slack: conversations.open with %s: no channel", user)
	}
	a.learnIM(user, ch.ID)
	return ch.ID, nil
}

// othersDM reports whether m goes to a DM between people (a D… channel
// that is not the bot's own IM with m's person, see ownIM), where the
// bot is never a member: a 1:1 DM has its two people only.
// When Slack cannot say, chat.postMessage is tried first, as anywhere.
func (a *Adapter) othersDM(ctx context.Context, m bot.Outgoing) bool {
	if !dm(m.ChatID) || m.UserID == "" || a.knownIM(m.ChatID, m.UserID) {
		return false
	}
	im, err := a.imWith(ctx, m.UserID)
	return err == nil && im != m.ChatID
}

// Routes implements bot.Router: the three signed endpoints of the
// Events API, when SLACK_SIGNING_SECRET is set (none without it: every
// request would fail its check).
func (a *Adapter) Routes(mux *http.ServeMux, h bot.Handler) error {
	if a.cfg.SigningSecret == "" {
		return nil
	}
	mux.Handle("POST /slack/events", a.EventsHandler(h))
	mux.Handle("POST /slack/commands", a.CommandsHandler(h))
	mux.Handle("POST /slack/interactivity", a.InteractivityHandler(h))
	a.log.Info("slack Events API ready: /slack/events, /slack/commands, /slack/interactivity")
	return nil
}

// Run implements bot.Receiver: Socket Mode when SLACK_APP_TOKEN is set
// (RunSocketMode); otherwise events arrive on Routes' handlers and Run
// waits for ctx.
func (a *Adapter) Run(ctx context.Context, h bot.Handler) error {
	if a.cfg.AppToken == "" {
		<-ctx.Done()
		return nil
	}
	a.log.Info("slack Socket Mode started")
	return a.RunSocketMode(ctx, h)
}
