// Package telegram connects the bot to Telegram: updates arrive by long
// polling or a webhook and become bot.Incoming; the bot's messages go out
// as plain text (safe for model output), split at Telegram's limit, with
// inline keyboards for choices, edited in place for progress.
package telegram

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/retry"
	"github.com/tidybot/tidybot/internal/utf16text"
)

// Platform is the platform name in bot.Incoming.
const Platform = "telegram"

// maxText is Telegram's message limit in UTF-16 units.
const maxText = 4096

// Config configures an Adapter.
type Config struct {
	Token string
	// APIURL is TELEGRAM_API_URL: no /bot, no trailing slash.
	APIURL string
	// WebhookURL and WebhookSecret select webhook mode.
	WebhookURL    string
	WebhookSecret string
	// HTTPClient needs a timeout longer than PollTimeout.
	HTTPClient *http.Client
	// PollTimeout is the long-polling timeout (default 25s).
	PollTimeout time.Duration
	Logger      *slog.Logger
	// Team registers team mode's commands too (each person connects
	// their own Todoist).
	Team bool
	// Events counts updates the adapter skips because they do not decode
	// (outcome "undecodable"); nil counts nothing.
	Events Events
	// Leader chooses the one replica that long-polls (nil: this process
	// always does); Offsets keeps the getUpdates offset for the next
	// leader (nil: in memory only).
	Leader  Leader
	Offsets Offsets
}

// Events hears what the adapter does with updates; cmd/tidybot counts
// them in /metrics.
type Events interface {
	Event(platform, outcome string)
}

// Adapter is the Telegram platform.
type Adapter struct {
	api botAPI
	// poller is api for long polling, bound to a context (see pollerFor).
	poller func(ctx context.Context) botAPI
	cfg    Config
	log    *slog.Logger
	self   string // the bot's username, from getMe
	selfID int64  // the bot's user id, from getMe
}

var (
	_ bot.Platform       = (*Adapter)(nil)
	_ bot.Editor         = (*Adapter)(nil)
	_ bot.ButtonAnswerer = (*Adapter)(nil)
	_ bot.CommandNamer   = (*Adapter)(nil)
	_ bot.Adapter        = (*Adapter)(nil)
	_ bot.Router         = (*Adapter)(nil)
)

// New connects to Telegram (getMe) and returns the adapter.
func New(cfg Config) (*Adapter, error) {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = 25 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	endpoint := strings.TrimRight(cfg.APIURL, "/") + "/bot%s/%s"
	api, err := tgbotapi.NewBotAPIWithClient(cfg.Token, endpoint, cfg.HTTPClient)
	if err != nil {
		return nil, connectError(err, cfg)
	}
	if api.Self.UserName == "" {
		return nil, errors.New("telegram: getMe gave no username (check TELEGRAM_BOT_TOKEN)")
	}
	a := &Adapter{api: api, poller: pollerFor(api, cfg), cfg: cfg, log: cfg.Logger, self: api.Self.UserName, selfID: api.Self.ID}
	a.logPrivacy(api.Self.CanReadAllGroupMessages)
	return a, nil
}

// connectError says why getMe failed at start: the network (an
// agent.ErrUnreachable naming DNS, refused, no route or a timeout: serve
// waits and tries again), the token (401 Unauthorized; 404 Not Found
// for a token of the wrong form, core.telegram.org/bots/api#authorizing-your-bot),
// or another answer of Telegram's.
func connectError(err error, cfg Config) error {
	if u := unreached(err, cfg); u != nil {
		return fmt.Errorf("telegram: getMe: %w", u)
	}
	var te *tgbotapi.Error
	if errors.As(err, &te) && (te.Code == http.StatusUnauthorized || te.Code == http.StatusNotFound) {
		return fmt.Errorf("telegram: getMe: Telegram refused the token (%s): check TELEGRAM_BOT_TOKEN", redact(errors.New(te.Message), cfg.Token))
	}
	return fmt.Errorf("telegram: getMe: %w", redact(err, cfg.Token))
}

// unreached is err, the error of a call made at start (getMe, Setup),
// as an agent.ErrUnreachable when it is the network (DNS, refused, no
// route, a timeout): worth waiting for (retry.Connect). Nil when it is
// not. It classifies err before redact, which keeps only the text.
func unreached(err error, cfg Config) *agent.Error {
	host := cfg.APIURL
	if u, perr := url.Parse(cfg.APIURL); perr == nil && u.Host != "" {
		host = u.Host
	}
	return retry.UnreachedAtStart(err, "Telegram at "+host, "the network connection and TELEGRAM_API_URL", redact(err, cfg.Token))
}

// redact removes the token from an error: the library's transport errors
// carry the request URL, which holds it.
func redact(err error, token string) error {
	if err == nil || token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), token, "<TELEGRAM_BOT_TOKEN>"))
}

// Name implements bot.Platform.
func (a *Adapter) Name() string { return Platform }

// EditInterval implements bot.Editor: about one edit per 2 s per message.
func (a *Adapter) EditInterval() time.Duration { return 2 * time.Second }

// Who waits out a 429 (retry_after, see
// https://core.telegram.org/bots/api#responseparameters): calls the bot
// makes through its per-platform send queue (Send's first chunk, Edit,
// AnswerButton) do not wait here; their error implements bot.RateLimited
// and the queue pauses every call to Telegram for that long, then
// retries. Calls outside that queue (Setup, a later chunk of a long
// message, which a retry of the whole Send would post twice) wait here.
// One place per call, so a 429 is never waited out twice.

// call runs one API call outside the bot's send queue, waiting out 429s
// (retry_after) up to three times, and redacts the token from errors.
func (a *Adapter) call(ctx context.Context, what string, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		var te *tgbotapi.Error
		if errors.As(err, &te) && te.RetryAfter > 0 && attempt < 3 {
			a.log.Warn("telegram rate limit", slog.String("call", what), slog.Int("retry_after_s", te.RetryAfter))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(te.RetryAfter) * time.Second):
			}
			continue
		}
		return a.wrap(what, err)
	}
}

// queuedCall runs one API call the bot's send queue makes: a 429 is
// returned at once as an error that implements bot.RateLimited.
func (a *Adapter) queuedCall(what string, fn func() error) error {
	return a.wrap(what, fn())
}

// wrap adds context to err, redacts the token and keeps a 429's
// retry_after readable as bot.RateLimited.
func (a *Adapter) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	clean := redact(err, a.cfg.Token)
	var te *tgbotapi.Error
	if errors.As(err, &te) && te.RetryAfter > 0 {
		// A 429 with parameters.retry_after
		// (https://core.telegram.org/bots/api#responseparameters).
		clean = bot.RetryLater(clean, time.Duration(te.RetryAfter)*time.Second)
	}
	return fmt.Errorf("telegram: %s: %w", what, clean)
}

func chatID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("telegram: bad chat id %q", s)
	}
	return id, nil
}

func keyboard(bs []bot.Button) *tgbotapi.InlineKeyboardMarkup {
	if len(bs) == 0 {
		return nil
	}
	var rows [][]tgbotapi.InlineKeyboardButton
	pair := false // the last row holds a lone feedback button
	for _, b := range bs {
		label := b.Label
		if label == "" {
			label = "…"
		}
		btn := tgbotapi.NewInlineKeyboardButtonData(utf16text.Clip(label, 64), b.Data)
		if b.Feedback != "" && pair {
			rows[len(rows)-1] = append(rows[len(rows)-1], btn) // 👍 👎 side by side
			pair = false
			continue
		}
		rows = append(rows, tgbotapi.NewInlineKeyboardRow(btn))
		pair = b.Feedback != ""
	}
	kb := tgbotapi.NewInlineKeyboardMarkup(rows...)
	return &kb
}

// Send implements bot.Platform: plain text (no parse mode, so model
// output needs no escaping), split into chunks of at most 4096 UTF-16
// units at line or word boundaries; buttons go under the last chunk.
func (a *Adapter) Send(ctx context.Context, m bot.Outgoing) (string, error) {
	chat, err := chatID(m.ChatID)
	if err != nil {
		return "", err
	}
	chunks := utf16text.Split(m.Text, maxText)
	var last tgbotapi.Message
	for i, c := range chunks {
		msg := tgbotapi.NewMessage(chat, c)
		if i == len(chunks)-1 {
			kb := keyboard(m.Buttons)
			if m.Link != nil && m.ChatID == m.Link.UserID {
				kb = withLink(kb, m.Link)
			}
			if kb != nil {
				msg.ReplyMarkup = kb
			}
			askForReply(&msg, m)
		}
		send := func() error {
			var err error
			last, err = a.sendIn(msg, m.ThreadID)
			return err
		}
		if i == 0 {
			err = a.queuedCall("send message", send)
		} else {
			err = a.call(ctx, "send message", send)
		}
		if err != nil {
			return "", err
		}
	}
	if m.Link != nil && m.ChatID != m.Link.UserID {
		a.sendLink(ctx, m)
	}
	return strconv.Itoa(last.MessageID), nil
}

// Edit implements bot.Editor. An unchanged text is not an error; a text
// over the limit keeps its last 4096 units (progress grows at the end).
func (a *Adapter) Edit(ctx context.Context, id string, m bot.Outgoing) error {
	chat, err := chatID(m.ChatID)
	if err != nil {
		return err
	}
	msgID, err := strconv.Atoi(id)
	if err != nil {
		return fmt.Errorf("telegram: bad message id %q", id)
	}
	text := m.Text
	if utf16text.Units(text) > maxText {
		parts := utf16text.Split(text, maxText)
		text = parts[len(parts)-1]
	}
	edit := tgbotapi.NewEditMessageText(chat, msgID, text)
	if kb := keyboard(m.Buttons); kb != nil {
		edit.ReplyMarkup = kb
	}
	err = a.queuedCall("edit message", func() error {
		_, err := a.api.Request(edit)
		return err
	})
	if err != nil && strings.Contains(err.Error(), "message is not modified") {
		return nil
	}
	return err
}

// AnswerButton implements bot.ButtonAnswerer (answerCallbackQuery, which
// stops the spinner on the user's button; text ≤ 200 characters).
func (a *Adapter) AnswerButton(ctx context.Context, ref, text string) error {
	return a.queuedCall("answer button", func() error {
		_, err := a.api.Request(tgbotapi.NewCallback(ref, utf16text.Clip(text, 200)))
		return err
	})
}

// CommandName implements bot.CommandNamer: Telegram's command names
// allow no hyphen (https://core.telegram.org/bots/api#botcommand), so
// tidy-inbox is registered as /tidy_inbox.
func (a *Adapter) CommandName(name string) string { return commandName(name) }

func commandName(name string) string {
	return "/" + strings.ReplaceAll(name, "-", "_")
}

// Commands are the bot's commands as registered with Telegram
// (setMyCommands): names without hyphens, each with its help line
// capitalised. team adds team mode's (/connect, /disconnect).
func Commands(team bool) []tgbotapi.BotCommand {
	var out []tgbotapi.BotCommand
	for _, c := range bot.Commands(team) {
		out = append(out, tgbotapi.BotCommand{Command: strings.TrimPrefix(commandName(c.Name), "/"), Description: c.Menu()})
	}
	return out
}

// BotFatherList is the command list BotFather's /setcommands takes, one
// "name - description" line per command: deploy/telegram-commands.txt.
func BotFatherList(team bool) string {
	var sb strings.Builder
	for _, c := range Commands(team) {
		sb.WriteString(c.Command + " - " + c.Description + "\n")
	}
	return sb.String()
}

// Setup registers the commands and either sets the webhook (webhook mode)
// or deletes it (long polling). A network failure is an
// agent.ErrUnreachable, as New's (Run waits it out).
func (a *Adapter) Setup(ctx context.Context) error {
	if err := a.setupCall(ctx, "set commands", func() error {
		_, err := a.api.Request(tgbotapi.NewSetMyCommands(Commands(a.cfg.Team)...))
		return err
	}); err != nil {
		return err
	}
	if a.cfg.WebhookURL == "" {
		return a.setupCall(ctx, "delete webhook", func() error {
			_, err := a.api.Request(tgbotapi.DeleteWebhookConfig{})
			return err
		})
	}
	// v5.5.1 has no secret_token field: set it through the raw call.
	return a.setupCall(ctx, "set webhook", func() error {
		_, err := a.api.MakeRequest("setWebhook", tgbotapi.Params{
			"url": a.cfg.WebhookURL, "secret_token": a.cfg.WebhookSecret,
			"allowed_updates": `["message","callback_query"]`,
		})
		return err
	})
}

// setupCall is call for Setup: a network failure is said as New says it
// (an agent.ErrUnreachable naming the reason), so that Run waits for it.
func (a *Adapter) setupCall(ctx context.Context, what string, fn func() error) error {
	var last error
	err := a.call(ctx, what, func() error { last = fn(); return last })
	if err == nil {
		return nil
	}
	if u := unreached(last, a.cfg); u != nil {
		return fmt.Errorf("telegram: %s: %w", what, u)
	}
	return err
}

// Run implements bot.Receiver: it registers the commands and the
// webhook (Setup), then, without a webhook, polls until ctx ends; with
// one, updates arrive on Routes' handler and Run waits for ctx. Telegram
// that New reached but Setup cannot (the network dropped since) is
// waited for as at start (retry.Connect: logged, tried again after waits
// that double), not an end of intake: serve would stop.
func (a *Adapter) Run(ctx context.Context, h bot.Handler) error {
	err := retry.Connect(ctx, 0, func() error { return a.Setup(ctx) }, func(err error, wait time.Duration) {
		a.log.Warn("telegram: cannot register the commands and webhook; retrying", slog.Any("err", err), slog.Duration("retry_in", wait))
	})
	if ctx.Err() != nil {
		return nil // stopped, maybe while waiting: a stop
	}
	if err != nil {
		return err
	}
	a.log.Info("telegram ready", slog.Bool("webhook", a.cfg.WebhookURL != ""))
	if a.cfg.WebhookURL != "" {
		<-ctx.Done()
		return nil
	}
	return a.Poll(ctx, h)
}

// Routes implements bot.Router: POST /telegram/webhook in webhook mode
// (TELEGRAM_WEBHOOK_URL), nothing when polling.
func (a *Adapter) Routes(mux *http.ServeMux, h bot.Handler) error {
	if a.cfg.WebhookURL == "" {
		return nil
	}
	mux.Handle("POST /telegram/webhook", a.WebhookHandler(h))
	return nil
}

// ctxClient binds the library's requests (which take no context) to ctx,
// so a long poll ends at shutdown.
type ctxClient struct {
	hc  *http.Client
	ctx context.Context //nolint:containedctx // the library's requests have none
}

func (c ctxClient) Do(req *http.Request) (*http.Response, error) {
	return c.hc.Do(req.WithContext(c.ctx))
}

// Poll receives updates by long polling until ctx ends, while this
// process leads (Config.Leader): it waits to lead, polls from the
// offset the last leader saved (Config.Offsets), and when its
// leadership is lost, waits to lead again. Each update is handed to h
// (which stores it durably and dedupes by update id) before the next
// getUpdates confirms it, so a crash loses nothing; the updates of
// different chats are stored at once, those of one chat in order
// (storeBatch). An update that does not decode is logged, counted
// (Config.Events) and confirmed, so it does not hold up the ones after
// it.
func (a *Adapter) Poll(ctx context.Context, h bot.Handler) error {
	leader := a.cfg.Leader
	if leader == nil {
		leader = alwaysLeader{}
	}
	offset := 0
	for ctx.Err() == nil {
		lead, release, err := leader.LeadPolling(ctx, a.pollName())
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			a.log.Warn("telegram: could not take the polling lead; retrying", slog.Any("err", err), slog.Duration("retry_in", time.Second))
			sleep(ctx, time.Second)
			continue
		}
		if a.cfg.Leader != nil {
			a.log.Info("telegram: this replica long-polls")
		}
		offset, err = a.poll(ctx, lead, h, a.startOffset(ctx, offset))
		release()
		if errors.Is(err, errStopped) {
			return nil
		}
		if err != nil {
			return err
		}
		if ctx.Err() == nil {
			a.log.Warn("telegram: polling lead lost; waiting to lead again")
		}
	}
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// errStopped ends polling: the bot takes no more updates.
var errStopped = errors.New("telegram: the bot stopped")

// conflictWait is how long a poller that got 409 waits to see whether
// it lost its lead (a new leader polled before this one noticed) before
// it concludes that a poller outside tidybot's leadership holds the bot.
var conflictWait = 5 * time.Second

// poll polls from offset while lead lasts and returns the offset it
// reached. Updates go to h under ctx, so one being stored when the lead
// ends is stored whole; ctx carries lead's values there and to the
// saved offsets (withLead): the Leader's fence, which refuses them once
// another process leads.
func (a *Adapter) poll(ctx, lead context.Context, h bot.Handler, offset int) (int, error) {
	ctx = withLead{Context: ctx, lead: lead}
	poller := a.poller(lead)
	saved := offset
	backoff := time.Second
	for lead.Err() == nil {
		if offset != saved {
			a.saveOffset(ctx, offset)
			saved = offset
		}
		cfg := tgbotapi.UpdateConfig{Offset: offset, Timeout: int(a.cfg.PollTimeout / time.Second), AllowedUpdates: []string{"message", "callback_query"}}
		// Not GetUpdates: it decodes the whole array at once, so one
		// update the library's types do not take failed every poll.
		var updates []update
		resp, err := poller.Request(cfg)
		if err == nil {
			updates, err = decodeUpdates(resp.Result)
		}
		if err != nil {
			if lead.Err() != nil {
				break
			}
			wait := backoff
			var te *tgbotapi.Error
			if errors.As(err, &te) {
				if te.Code == http.StatusConflict {
					// A new leader may have polled before this one saw
					// its lead end: wait to see.
					if a.cfg.Leader != nil {
						sleep(lead, conflictWait)
						if lead.Err() != nil {
							break
						}
					}
					return offset, fmt.Errorf("telegram: another poller or a webhook holds this bot (409): %w", redact(err, a.cfg.Token))
				}
				if te.RetryAfter > 0 {
					wait = time.Duration(te.RetryAfter) * time.Second
				}
			}
			a.log.Warn("telegram getUpdates failed", slog.Any("err", redact(err, a.cfg.Token)), slog.Duration("retry_in", wait))
			sleep(lead, wait)
			backoff = min(backoff*2, time.Minute)
			continue
		}
		backoff = time.Second
		next, stop, failed := a.storeBatch(ctx, h, updates, offset)
		offset = next
		if stop {
			a.saveOffset(ctx, offset)
			return offset, errStopped // what was not stored is not confirmed: Telegram redelivers it
		}
		if failed {
			// Not stored: left unconfirmed; try again shortly.
			sleep(lead, time.Second)
		}
	}
	if offset != saved {
		a.saveOffset(ctx, offset)
	}
	return offset, nil
}

// update is one update of a getUpdates answer: decoded, or err says why
// not (id is its update_id either way).
type update struct {
	tgbotapi.Update
	id     int
	err    error
	thread string // the forum topic it came from (see topicOf), "" if none
}

// decodeUpdates decodes a getUpdates result update by update, so one
// that does not decode is skipped alone. Only a result that is not an
// array, or an update without a numeric update_id, fails the whole
// answer: without its id an update cannot be confirmed.
func decodeUpdates(result json.RawMessage) ([]update, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(result, &raws); err != nil {
		return nil, fmt.Errorf("telegram: read updates: %w", err)
	}
	out := make([]update, 0, len(raws))
	for _, raw := range raws {
		u, ok := decodeUpdate(raw)
		if !ok {
			return nil, fmt.Errorf("telegram: read updates: an update without update_id: %.80s", raw)
		}
		out = append(out, u)
	}
	return out, nil
}

// decodeUpdate decodes one update; ok is false when raw has no numeric
// update_id (it is no update), and u.err says why an update with one
// does not decode.
func decodeUpdate(raw []byte) (u update, ok bool) {
	var id struct {
		UpdateID int `json:"update_id"`
	}
	if err := json.Unmarshal(raw, &id); err != nil || id.UpdateID <= 0 {
		return update{}, false
	}
	u.id = id.UpdateID
	u.err = json.Unmarshal(raw, &u.Update)
	u.thread = topicOf(raw)
	return u, true
}

// undecodable logs and counts an update that is skipped because it does
// not decode. The JSON error names the field and type, never a value.
func (a *Adapter) undecodable(id int, err error) {
	a.log.Warn("telegram update does not decode; skipped", slog.Int("update_id", id), slog.Any("err", err))
	if a.cfg.Events != nil {
		a.cfg.Events.Event(Platform, "undecodable")
	}
}

// dispatch hands one update to h; updates that are not for the bot are
// dropped.
func (a *Adapter) dispatch(ctx context.Context, h bot.Handler, u update) error {
	in, ok := a.Incoming(u.Update)
	if !ok {
		return nil
	}
	in.ThreadID = u.thread // replies and progress go to the message's topic
	return h.Handle(ctx, in)
}

// WebhookHandler serves POST /telegram/webhook: a request without the
// secret gets 401 and touches nothing, a body that is no update (no
// update_id) 400, an update that does not decode is skipped with a 200
// (logged and counted), and an update is handed to h before 200
// (Telegram retries anything else).
func (a *Adapter) WebhookHandler(h bot.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("X-Telegram-Bot-Api-Secret-Token")
		if a.cfg.WebhookSecret == "" || subtle.ConstantTimeCompare([]byte(got), []byte(a.cfg.WebhookSecret)) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		u, ok := decodeUpdate(body)
		if !ok {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if u.err != nil {
			// An update we cannot use: a 200, or Telegram sends it
			// again and again.
			a.undecodable(u.id, u.err)
			w.WriteHeader(http.StatusOK)
			return
		}
		if err := a.dispatch(r.Context(), h, u); err != nil {
			a.log.Error("telegram webhook update", slog.Int("update_id", u.UpdateID), slog.Any("err", redact(err, a.cfg.Token)))
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

// Incoming turns an update into a bot event; ok is false for updates the
// bot ignores: its own messages, messages with neither text nor a voice
// note, audio file or image, and, in groups,
// messages not addressed to it. In a group the bot handles a message that
// mentions it (@username, or a text_mention of it), replies to one of its
// messages, or is a command for it: /cmd@ourbot, or a command of ours
// without a bot name; a command for another bot (/cmd@otherbot) or one
// we do not know, unaddressed, is someone else's. With privacy mode off,
// or as an admin, a bot gets every group message
// (core.telegram.org/bots/features#privacy-mode).
//
// A button press is handled even without its message (inline mode):
// Telegram shows a spinner until answerCallbackQuery, so it must reach
// the bot to be answered (core.telegram.org/bots/api#callbackquery).
func (a *Adapter) Incoming(u tgbotapi.Update) (bot.Incoming, bool) {
	event := "u" + strconv.Itoa(u.UpdateID)
	if cb := u.CallbackQuery; cb != nil {
		if cb.From == nil || cb.ID == "" {
			return bot.Incoming{}, false
		}
		in := bot.Incoming{
			Platform: Platform, UserID: strconv.FormatInt(cb.From.ID, 10),
			UserName: cb.From.UserName, Button: cb.Data, ButtonRef: cb.ID, EventID: event, At: time.Now(),
		}
		if cb.Message != nil && cb.Message.Chat != nil {
			in.ChatID, in.MessageID, in.DM = strconv.FormatInt(cb.Message.Chat.ID, 10), strconv.Itoa(cb.Message.MessageID), cb.Message.Chat.IsPrivate()
		}
		return in, true
	}
	m := u.Message
	if m == nil || m.From == nil || m.Chat == nil || m.From.IsBot {
		return bot.Incoming{}, false
	}
	att := attachment(m)
	if att != nil {
		// A caption is the media's text, with its own entities
		// (core.telegram.org/bots/api#message): read it as the text.
		c := *m
		c.Text, c.Entities = m.Caption, m.CaptionEntities
		m = &c
	}
	if strings.TrimSpace(m.Text) == "" && att == nil {
		return bot.Incoming{}, false
	}
	dm := m.Chat.IsPrivate()
	in := bot.Incoming{
		Platform: Platform, ChatID: strconv.FormatInt(m.Chat.ID, 10), UserID: strconv.FormatInt(m.From.ID, 10),
		UserName: m.From.UserName, MessageID: strconv.Itoa(m.MessageID), EventID: event, DM: dm,
		At: time.Unix(int64(m.Date), 0), Text: m.Text, Attachment: att,
	}
	if strings.HasPrefix(m.Text, "/") && att == nil {
		cmd, args, addressed, ok := a.command(m.Text)
		if !ok || (!dm && !addressed && !known(cmd)) {
			return bot.Incoming{}, false // a command for another bot
		}
		in.Command, in.Text = cmd, args
		return in, true
	}
	if dm {
		return in, true
	}
	text, mentioned := a.stripMentions(m)
	replied := m.ReplyToMessage != nil && m.ReplyToMessage.From != nil && m.ReplyToMessage.From.ID == a.selfID
	if !mentioned && !replied {
		return bot.Incoming{}, false
	}
	if strings.TrimSpace(text) == "" && att == nil {
		return bot.Incoming{}, false
	}
	in.Text = text
	return in, true
}

// known reports whether cmd is one of the bot's commands.
func known(cmd string) bool {
	_, ok := bot.LookupCommand(cmd)
	return ok
}

// stripMentions removes the bot's mentions from a message's text and
// reports whether there was one. Entities count UTF-16 code units
// (core.telegram.org/bots/api#messageentity).
func (a *Adapter) stripMentions(m *tgbotapi.Message) (string, bool) {
	text := utf16.Encode([]rune(m.Text))
	found := false
	var out []uint16
	last := 0
	for _, e := range m.Entities {
		if e.Length <= 0 || e.Offset < last || e.Offset+e.Length > len(text) {
			continue
		}
		span := string(utf16.Decode(text[e.Offset : e.Offset+e.Length]))
		ours := (e.Type == "mention" && strings.EqualFold(strings.TrimPrefix(span, "@"), a.self)) ||
			(e.Type == "text_mention" && e.User != nil && e.User.ID == a.selfID)
		if !ours {
			continue
		}
		found = true
		out = append(out, text[last:e.Offset]...)
		last = e.Offset + e.Length
	}
	out = append(out, text[last:]...)
	if !found {
		return m.Text, false
	}
	// Drop the space left before punctuation ("hey @bot, …" → "hey, …").
	s := strings.Join(strings.Fields(string(utf16.Decode(out))), " ")
	s = strings.NewReplacer(" ,", ",", " .", ".", " ?", "?", " !", "!", " :", ":").Replace(s)
	return strings.TrimLeft(s, ",:; "), true
}

// command parses "/name[@bot] args"; addressed is set when the bot's own
// name follows the command, ok is false for another bot's. The raw text
// is read, not the entity: Telegram cuts "/tidy-inbox" at the hyphen.
func (a *Adapter) command(text string) (cmd, args string, addressed, ok bool) {
	if !strings.HasPrefix(text, "/") {
		return "", "", false, false
	}
	head, rest := text[1:], ""
	if i := strings.IndexAny(head, " \n\t"); i >= 0 {
		head, rest = head[:i], head[i+1:]
	}
	name, at, hasAt := strings.Cut(head, "@")
	if hasAt && !strings.EqualFold(at, a.self) {
		return "", "", false, false
	}
	name = strings.ToLower(name)
	if c, ok := bot.LookupCommand(name); ok {
		name = c.Name // tidy_inbox is tidy-inbox
	}
	return name, strings.TrimSpace(rest), hasAt, name != ""
}

// withLead is a context that ends with its Context and carries the
// values of lead (a Leader's lead, derived from that Context): what a
// poll stores is stored whole when the lead ends, and fenced by it.
type withLead struct {
	context.Context
	lead context.Context
}

func (c withLead) Value(key any) any { return c.lead.Value(key) }
