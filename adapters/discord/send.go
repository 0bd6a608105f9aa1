package discord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/retry"
	"github.com/tidybot/tidybot/internal/utf16text"
)

// maxText is Discord's limit on a message's content: "up to 2000
// characters" (discord.com/developers/docs/resources/message#create-message).
// The adapter counts UTF-16 units, which are never fewer than characters.
const maxText = 2000

// Discord's limits on message components
// (discord.com/developers/docs/components/reference): at most 5 action
// rows of at most 5 buttons; a label of at most 80 characters, a
// custom_id of at most 100.
const (
	maxRows     = 5
	maxPerRow   = 5
	maxLabel    = 80
	maxCustomID = 100
)

// Discord's JSON error codes the adapter reads
// (discord.com/developers/docs/topics/opcodes-and-status-codes#json-json-error-codes).
const (
	codeThreadExists      = 160004 // "A thread has already been created for this message"
	codeMissingAccess     = 50001
	codeMissingPermission = 50013
	codeWrongChannelType  = 50024 // "Cannot execute action on this channel type"
)

// noPings keeps the bot's text from notifying anyone: model output
// that says @everyone or <@id> is shown, not sent as a mention
// (discord.com/developers/docs/resources/message#allowed-mentions-object:
// an empty parse list allows none).
var noPings = &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}

// Send implements bot.Platform: plain text split into messages of at
// most 2,000 characters at line or word boundaries, buttons under the
// last. A person's slash command is answered in its own reply (the
// deferred response, then follow-ups) while its token lives; a message
// in a thread that does not exist yet (a mention in a server channel,
// ThreadID its message id) first starts it. The first call is the send
// queue's: a 429 is returned as bot.RateLimited, never waited for; a
// later part of a long text waits out its 429 (a retry of the whole
// Send would post the first part twice).
func (a *Adapter) Send(ctx context.Context, m bot.Outgoing) (string, error) {
	return a.send(ctx, m, 1)
}

// send is Send; uses is how many uses of the command's token m's run may
// have taken with this one (Resend: 2, the same edit made again).
func (a *Adapter) send(ctx context.Context, m bot.Outgoing, uses int) (string, error) {
	if m.ChatID == "" {
		return "", errors.New("discord: send: no channel id")
	}
	parts := utf16text.Split(m.Text, maxText)
	hook, ok, err := a.takePending(ctx, m, uses)
	if err != nil {
		a.log.Warn("discord: no interaction token to answer with; answering in the channel", slog.String("chat_id", m.ChatID), slog.Any("err", err))
	}
	if ok {
		id, err := a.sendHook(ctx, hook, m, parts)
		if !errors.Is(err, errTokenRefused) {
			return id, err
		}
		a.log.Info("discord: Discord refused a command's token; answering in the channel", slog.String("chat_id", m.ChatID), slog.Any("err", err))
	}
	channel, ref, err := a.target(ctx, m)
	if err != nil {
		return "", err
	}
	var last *discordgo.Message
	for i, p := range parts {
		msg := &discordgo.MessageSend{Content: p, AllowedMentions: noPings}
		if i == 0 && ref != "" {
			msg.Reference = &discordgo.MessageReference{MessageID: ref, ChannelID: m.ChatID, FailIfNotExists: new(bool)}
		}
		if i == len(parts)-1 {
			msg.Components = a.components(m)
		}
		bucket := discordgo.EndpointChannelMessages(channel)
		send := func() error {
			var err error
			if m.Ref != "" {
				last, err = a.postTagged(ctx, channel, msg, nonceFor(m.Ref, i))
			} else {
				last, err = a.api.ChannelMessageSendComplex(channel, msg, discordgo.WithContext(ctx))
			}
			return err
		}
		if i == 0 {
			err = a.queued(bucket, "send message", send)
		} else {
			err = a.waiting(ctx, bucket, "send message", send)
		}
		if err != nil {
			return "", err
		}
	}
	if last == nil {
		return "", errors.New("discord: send message: Discord returned no message")
	}
	return last.ID, nil
}

// A message that must reach its person (Outgoing.Ref, an outbox entry)
// is posted with a nonce and enforce_nonce: "If true and nonce is
// present, it will be checked for uniqueness in the past few minutes. If
// another message was created by the same author with the same nonce,
// that message will be returned and no new message will be created"
// (discord.com/developers/docs/resources/message#create-message). So a
// post whose answer was lost (a timeout, a crash before the outbox
// recorded it) and is made again within those minutes returns the first
// one instead of posting twice. discordgo v0.29's MessageSend has no
// nonce field: the call is made with its generic request.

var _ bot.Resender = (*Adapter)(nil)

// tagged is a message to create with its nonce.
type tagged struct {
	*discordgo.MessageSend
	Nonce        string `json:"nonce"`
	EnforceNonce bool   `json:"enforce_nonce"`
}

// nonceFor is part i's nonce of outbox entry ref: at most 25 characters
// (Discord's limit), the same on every try.
func nonceFor(ref string, i int) string {
	sum := sha256.Sum256([]byte(ref + "\x00" + strconv.Itoa(i)))
	return "t" + hex.EncodeToString(sum[:12])
}

// postTagged creates msg in channel with its nonce enforced.
func (a *Adapter) postTagged(ctx context.Context, channel string, msg *discordgo.MessageSend, nonce string) (*discordgo.Message, error) {
	endpoint := discordgo.EndpointChannelMessages(channel)
	body, err := a.api.RequestWithBucketID("POST", endpoint, tagged{MessageSend: msg, Nonce: nonce, EnforceNonce: true}, endpoint, discordgo.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	var out discordgo.Message
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("discord: create message: %w", err)
	}
	return &out, nil
}

// Resend implements bot.Resender: it posts m as Send does, each part with
// the nonce Send gave it, so a part Discord already has (created in the
// last few minutes) is returned, not posted again. Older posts Discord
// no longer matches are posted again: since is not needed to look. An
// answer that replaced its command's "thinking" is that edit made again:
// the token its run took is taken once more (while Hooks still holds it:
// PostgreSQL's across a restart, not one process's memory).
func (a *Adapter) Resend(ctx context.Context, m bot.Outgoing, _ time.Time) (string, error) {
	return a.send(ctx, m, 2)
}

// sendHook answers a slash command through its interaction: the first
// part replaces the deferred response ("… is thinking"), the rest are
// follow-ups; each message's id keeps the token for its edits.
func (a *Adapter) sendHook(ctx context.Context, h interactionHook, m bot.Outgoing, parts []string) (string, error) {
	var id string
	for i, p := range parts {
		var comps []discordgo.MessageComponent
		if i == len(parts)-1 {
			comps = a.components(m)
		}
		var msg *discordgo.Message
		var err error
		if i == 0 {
			edit := &discordgo.WebhookEdit{Content: &p, Components: &comps, AllowedMentions: noPings}
			err = a.queued(webhookEdits, "answer command", func() error {
				return a.whenKnown(ctx, h, func() error {
					var err error
					msg, err = a.api.WebhookMessageEdit(h.appID, h.token, "@original", edit, discordgo.WithContext(ctx))
					return err
				})
			})
		} else {
			params := &discordgo.WebhookParams{Content: p, Components: comps, AllowedMentions: noPings}
			err = a.waiting(ctx, followups(h), "follow up command", func() error {
				var err error
				msg, err = a.api.FollowupMessageCreate(&discordgo.Interaction{AppID: h.appID, Token: h.token}, true, params, discordgo.WithContext(ctx))
				return err
			})
		}
		if err != nil && i == 0 {
			return "", a.refused(ctx, m.UserID, h, err) // not answered: given back
		}
		if err != nil {
			return "", err
		}
		if msg == nil {
			return "", errors.New("discord: answer command: Discord returned no message")
		}
		id = msg.ID
		a.keepToken(id, h)
	}
	return id, nil
}

// Edit implements bot.Editor. An unchanged text is not an error; a text
// over the limit keeps its last 2,000 characters (progress grows at the
// end). A message that answers an interaction is edited through its
// token while it lives, any other through the channel.
func (a *Adapter) Edit(ctx context.Context, id string, m bot.Outgoing) error {
	text := m.Text
	if utf16text.Units(text) > maxText {
		parts := utf16text.Split(text, maxText)
		text = parts[len(parts)-1]
	} else if strings.TrimSpace(text) == "" {
		text = "…"
	}
	comps := a.components(m)
	if h, ok := a.tokenOf(id); ok {
		edit := &discordgo.WebhookEdit{Content: &text, Components: &comps, AllowedMentions: noPings}
		return a.queued(webhookEdits, "edit message", func() error {
			_, err := a.api.WebhookMessageEdit(h.appID, h.token, id, edit, discordgo.WithContext(ctx))
			return err
		})
	}
	channel := m.ChatID
	if m.ThreadID != "" && m.ThreadID != m.ChatID && !a.noThreads(m.ThreadID) {
		channel = m.ThreadID // the bot's messages of a conversation in a thread are in it
	}
	edit := &discordgo.MessageEdit{ID: id, Channel: channel, Content: &text, Components: &comps, AllowedMentions: noPings}
	return a.queued(channelEdits(channel), "edit message", func() error {
		_, err := a.api.ChannelMessageEditComplex(edit, discordgo.WithContext(ctx))
		return err
	})
}

// components are m's buttons as action rows (at most 5 of 5 buttons):
// an answer's choices blue (primary), a command such as Undo and the
// feedback pair grey, and the Details link (a link button) when the
// message goes to its person alone, in their DM with the bot.
func (a *Adapter) components(m bot.Outgoing) []discordgo.MessageComponent {
	var buttons []discordgo.MessageComponent
	for _, b := range m.Buttons {
		if b.Data == "" || len(b.Data) > maxCustomID {
			a.log.Warn("discord: button dropped: its data is empty or longer than Discord's 100 characters", slog.String("label", b.Label))
			continue
		}
		label := b.Label
		if label == "" {
			label = "…"
		}
		style := discordgo.PrimaryButton
		if b.Command != "" || b.Feedback != "" {
			style = discordgo.SecondaryButton
		}
		buttons = append(buttons, discordgo.Button{Label: utf16text.Clip(label, maxLabel), Style: style, CustomID: b.Data})
	}
	if m.Link != nil && m.Link.URL != "" && a.dmOf(m.ChatID) == m.Link.UserID {
		buttons = append(buttons, discordgo.Button{Label: utf16text.Clip(m.Link.Label, maxLabel), Style: discordgo.LinkButton, URL: m.Link.URL})
	}
	rows := []discordgo.MessageComponent{}
	for len(buttons) > 0 && len(rows) < maxRows {
		n := min(len(buttons), maxPerRow)
		rows = append(rows, discordgo.ActionsRow{Components: buttons[:n]})
		buttons = buttons[n:]
	}
	if len(buttons) > 0 {
		a.log.Warn("discord: buttons dropped: Discord shows at most 25 under a message", slog.Int("dropped", len(buttons)))
	}
	return rows
}

// target is the channel m goes to and, when it must be a reply instead
// of a thread, the message it replies to. A ThreadID names a thread (a
// channel of its own); one the adapter does not know yet is the id of
// the server message that mentioned the bot, and the thread is started
// from it (its id is the message's:
// discord.com/developers/docs/resources/channel#start-thread-from-message).
// Where the bot may not start threads it replies in the channel.
func (a *Adapter) target(ctx context.Context, m bot.Outgoing) (channel, reply string, err error) {
	if m.ThreadID == "" || m.ThreadID == m.ChatID {
		return m.ChatID, "", nil
	}
	if a.threadKnown(m.ThreadID) {
		return m.ThreadID, "", nil
	}
	if a.noThreads(m.ThreadID) {
		return m.ChatID, m.ThreadID, nil
	}
	if _, thread, _ := a.place(ctx, m.ThreadID, true); thread != "" {
		return m.ThreadID, "", nil // a thread already (one a person made, or learnt before a restart)
	}
	start := &discordgo.ThreadStart{Name: a.threadName(m.ThreadID), AutoArchiveDuration: 1440}
	err = a.queued(discordgo.EndpointChannelMessageThread(m.ChatID, m.ThreadID), "start thread", func() error {
		_, err := a.api.MessageThreadStartComplex(m.ChatID, m.ThreadID, start, discordgo.WithContext(ctx))
		return err
	})
	switch code := restCode(err); {
	case err == nil || code == codeThreadExists:
		a.learnThread(m.ThreadID, m.ChatID)
		return m.ThreadID, "", nil
	case code == codeMissingAccess || code == codeMissingPermission || code == codeWrongChannelType:
		a.log.Info("discord: cannot start a thread there (Create Public Threads permission?); replying in the channel",
			slog.String("channel_id", m.ChatID), slog.Any("err", err))
		a.mu.Lock()
		putBounded(a.plain, "nothread:"+m.ThreadID, true)
		a.mu.Unlock()
		return m.ChatID, m.ThreadID, nil
	default:
		return "", "", err
	}
}

// restCode is the JSON error code of Discord's answer, 0 for none.
func restCode(err error) int {
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Message != nil {
		return re.Message.Code
	}
	return 0
}

// Who waits out a 429 (Retry-After, X-RateLimit-Bucket,
// discord.com/developers/docs/topics/rate-limits): calls the bot makes
// through its per-platform send queue (Send's first part, Edit,
// AnswerButton) do not wait here; their error implements bot.RateLimited
// and the queue holds back that chat for that long, then retries, while
// other chats (other channels, other buckets) go on. Calls outside that
// queue (a later part of a long message, registering commands) wait
// here. discordgo's own waiting is off (ShouldRetryOnRateLimit), and a
// queued call whose bucket discordgo knows to be spent is not made (it
// would sleep in discordgo's rate limiter): it returns the wait at once.

// The buckets discordgo's rate limiter keeps for the calls queued
// checks must be the ones it uses (discordgo restapi.go): a message
// edit is counted per channel (ChannelMessageEditComplex:
// EndpointChannelMessage(channel, "")), and every webhook message edit,
// whatever its token, in one bucket (WebhookMessageEdit:
// EndpointWebhookToken("", "")). Another key would find no spent bucket,
// and discordgo would sleep inside the call until the reset.
var webhookEdits = discordgo.EndpointWebhookToken("", "")

// followups is the bucket of h's follow-ups: FollowupMessageCreate with
// wait counts a token's follow-ups under their URI, query included
// (webhookExecute: EndpointWebhookToken(app, token)+"?wait=true").
func followups(h interactionHook) string {
	return discordgo.EndpointWebhookToken(h.appID, h.token) + "?wait=true"
}

func channelEdits(channel string) string { return discordgo.EndpointChannelMessage(channel, "") }

// queued runs one API call of the bot's send queue: a spent bucket or a
// 429 is returned at once as an error that implements bot.RateLimited.
func (a *Adapter) queued(bucket, what string, fn func() error) error {
	if wait := a.spent(bucket); wait > 0 {
		return fmt.Errorf("discord: %s: %w", what, bot.RetryLater(errors.New("rate limited (bucket spent)"), wait))
	}
	return a.wrap(what, fn())
}

// waiting runs one API call outside the bot's send queue, waiting out
// 429s up to three times.
func (a *Adapter) waiting(ctx context.Context, bucket, what string, fn func() error) error {
	for attempt := 0; ; attempt++ {
		if wait := a.spent(bucket); wait > 0 {
			if err := retry.Sleep(ctx, wait); err != nil {
				return err
			}
		}
		err := fn()
		var rl *discordgo.RateLimitError
		if errors.As(err, &rl) && attempt < 3 {
			a.log.Warn("discord rate limit", slog.String("call", what), slog.Duration("retry_after", rl.RetryAfter))
			if err := retry.Sleep(ctx, max(rl.RetryAfter, 50*time.Millisecond)); err != nil {
				return err
			}
			continue
		}
		return a.wrap(what, err)
	}
}

// spent is how long discordgo's rate limiter would sleep before a call
// on bucket (its own bucket, or the global limit), 0 when it would not.
func (a *Adapter) spent(bucket string) time.Duration {
	if a.sess == nil || a.sess.Ratelimiter == nil {
		return 0
	}
	b := a.sess.Ratelimiter.GetBucket(bucket)
	b.Lock()
	defer b.Unlock()
	return a.sess.Ratelimiter.GetWaitTime(b, 1)
}

// wrap adds context to err, redacts tokens and makes a 429 a
// bot.RateLimited with its retry_after.
func (a *Adapter) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	clean := redact(err, a.cfg.Token)
	var rl *discordgo.RateLimitError
	if errors.As(err, &rl) {
		after := rl.RetryAfter
		if after <= 0 {
			after = time.Second
		}
		clean = bot.RetryLater(clean, after)
	}
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusTooManyRequests {
		clean = bot.RetryLater(clean, time.Second)
	}
	return fmt.Errorf("discord: %s: %w", what, clean)
}
