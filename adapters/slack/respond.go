package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/tidybot/tidybot/bot"
)

// A slash command (or a button press) comes with a response_url that
// posts into its conversation even where the bot is not a member, where
// chat.postMessage fails with not_in_channel (a private channel, a DM
// between people). Slack takes up to 5 posts to it within 30 minutes
// (api.slack.com/interactivity/slash-commands, "Sending delayed
// responses"). The adapter keeps the latest one per channel and answers
// through it when posting fails, so the user always sees the answer.
const (
	hookUses    = 5
	hookFor     = 30 * time.Minute
	hookReserve = 2 // uses kept for a question and the final answer
	hookPrefix  = "hook:"
)

// Hooks keeps response_urls where several serve replicas share them:
// the replica that receives a command is often not the one that posts
// its answer. store/postgres implements it. Without it (one process, as
// with bbolt, whose file one process holds) the adapter keeps them in
// its memory, which is then all there is to share.
type Hooks interface {
	// SaveHook keeps url as channel's response_url until expires, with
	// no use counted (it replaces channel's earlier one).
	SaveHook(ctx context.Context, channel, url string, expires time.Time) error
	// TakeHook counts a use of channel's response_url and returns it,
	// atomically across replicas: ok is false when there is none
	// unexpired at now, or when within uses are taken already.
	TakeHook(ctx context.Context, channel string, within int, now time.Time) (url string, ok bool, err error)
}

// memHooks is Hooks in one process's memory.
type memHooks struct {
	mu    sync.Mutex
	hooks map[string]*hook // by channel: the latest response_url there
}

// hook is a response_url and how much of it is used.
type hook struct {
	url     string
	expires time.Time
	used    int
}

func (m *memHooks) SaveHook(_ context.Context, channel, url string, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hooks == nil {
		m.hooks = map[string]*hook{}
	}
	for ch, h := range m.hooks { // forget the expired ones
		if !h.expires.After(expires.Add(-hookFor)) {
			delete(m.hooks, ch)
		}
	}
	m.hooks[channel] = &hook{url: url, expires: expires}
	return nil
}

func (m *memHooks) TakeHook(_ context.Context, channel string, within int, now time.Time) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.hooks[channel]
	if h == nil || !now.Before(h.expires) || h.used >= within {
		return "", false, nil
	}
	h.used++
	return h.url, true, nil
}

// rememberHook keeps the response_url of an event in channel. A failure
// to keep it is logged (never the URL): the answer may still be posted.
func (a *Adapter) rememberHook(ctx context.Context, channel, responseURL string) {
	if channel == "" || responseURL == "" {
		return
	}
	if err := a.hooks.SaveHook(ctx, channel, responseURL, a.cfg.Now().Add(hookFor)); err != nil {
		a.log.Warn("slack: keep a response_url", slog.String("chat_id", channel), slog.Any("err", a.redact(err)))
	}
}

// takeHook returns the response_url to post to in channel and counts the
// use; a progress edit is given one only while uses beyond hookReserve
// remain.
func (a *Adapter) takeHook(ctx context.Context, channel string, edit bool) (string, bool, error) {
	within := hookUses
	if edit {
		within -= hookReserve
	}
	u, ok, err := a.hooks.TakeHook(ctx, channel, within, a.cfg.Now())
	if err != nil {
		return "", false, fmt.Errorf("slack: response_url of %s: %w", channel, err)
	}
	return u, ok, nil
}

// notMember reports whether err says the bot cannot post in the channel.
func notMember(err error) bool {
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) {
		return false
	}
	code, _, _ := strings.Cut(se.Err, " ")
	return code == "not_in_channel" || code == "channel_not_found"
}

// respond posts m through channel's response_url, visible to the user
// who asked only (ephemeral, Slack's default for a command's answer). ok
// is false when there is no response_url to use.
func (a *Adapter) respond(ctx context.Context, m bot.Outgoing, edit bool) (id string, ok bool, err error) {
	u, ok, err := a.takeHook(ctx, m.ChatID, edit)
	if err != nil || !ok {
		return "", err != nil, err
	}
	text := clipMiddle(strings.TrimSpace(m.Text), maxMessage)
	if text == "" {
		text = "…"
	}
	msg := &slack.WebhookMessage{Text: slackEscape(text), ResponseType: slack.ResponseTypeEphemeral}
	bs := blocks(text, m.Buttons)
	if bs == nil && len([]rune(text)) > maxText {
		bs = sections(text)
	}
	if bs != nil {
		msg.Blocks = &slack.Blocks{BlockSet: bs}
	}
	if err := slack.PostWebhookCustomHTTPContext(ctx, u, a.cfg.HTTPClient, msg); err != nil {
		// The URL is a credential for the conversation: keep it out.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", true, fmt.Errorf("slack: answer in %s through the response_url: %w", m.ChatID, a.redact(err))
	}
	a.mu.Lock()
	a.hookSeq++
	id = hookPrefix + strconv.Itoa(a.hookSeq)
	a.mu.Unlock()
	a.log.Debug("slack answer through response_url", slog.String("chat_id", m.ChatID), slog.Bool("edit", edit))
	return id, true, nil
}

// slackEscape escapes text by mrkdwn's rules (& < >), as
// slack.MsgOptionText(text, true) does for chat.postMessage.
func slackEscape(text string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(text)
}
