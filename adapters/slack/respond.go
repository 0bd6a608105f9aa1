package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
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

// hook is a response_url and how much of it is used.
type hook struct {
	url     string
	expires time.Time
	used    int
}

// rememberHook keeps the response_url of an event in channel.
func (a *Adapter) rememberHook(channel, responseURL string) {
	if channel == "" || responseURL == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hooks == nil {
		a.hooks = map[string]*hook{}
	}
	now := a.cfg.Now()
	for ch, h := range a.hooks { // forget the expired ones
		if now.After(h.expires) {
			delete(a.hooks, ch)
		}
	}
	a.hooks[channel] = &hook{url: responseURL, expires: now.Add(hookFor)}
}

// takeHook returns the response_url to post to in channel and counts the
// use; a progress edit is given one only while uses beyond hookReserve
// remain.
func (a *Adapter) takeHook(channel string, edit bool) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := a.hooks[channel]
	if h == nil || a.cfg.Now().After(h.expires) {
		return "", false
	}
	left := hookUses - h.used
	if left <= 0 || (edit && left <= hookReserve) {
		return "", false
	}
	h.used++
	return h.url, true
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
	u, ok := a.takeHook(m.ChatID, edit)
	if !ok {
		return "", false, nil
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
