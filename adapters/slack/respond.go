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
	"github.com/tidybot/tidybot/internal/hooks"
)

// A slash command (or a button press) comes with a response_url that
// posts into its conversation even where the bot is not a member, where
// chat.postMessage fails with not_in_channel (a private channel, a DM
// between people). Slack takes up to 5 posts to it within 30 minutes
// (api.slack.com/interactivity/slash-commands, "Sending delayed
// responses"), and what is posted is shown to the person who typed the
// command or pressed the button alone (ephemeral). So a response_url is
// that person's, never a channel's: the adapter keeps each one under its
// channel and person, and binds it to the first run that answers through
// it. A message uses only a response_url of its own person (Outgoing.UserID):
// the one bound to its run, else the person's newest one bound to none
// (which its run then holds); one without a person gets none. Another
// person's command or press in the same channel touches nothing of it.
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
// its memory (internal/hooks.Memory), which is then all there is to
// share.
type Hooks = hooks.Store

// rememberHook keeps the response_url of user's event in channel. A
// failure to keep it is logged (never the URL): the answer may still be
// posted.
func (a *Adapter) rememberHook(ctx context.Context, channel, user, responseURL string) {
	if channel == "" || user == "" || responseURL == "" {
		return
	}
	if err := a.hooks.SaveHook(ctx, channel, user, responseURL, a.cfg.Now().Add(hookFor)); err != nil {
		a.log.Warn("slack: keep a response_url", slog.String("chat_id", channel), slog.Any("err", a.redact(err)))
	}
}

// takeHook returns the response_url to post m with and counts the use;
// a progress edit is given one only while uses beyond hookReserve
// remain. A message to nobody in particular is given none.
func (a *Adapter) takeHook(ctx context.Context, m bot.Outgoing, edit bool) (string, bool, error) {
	if m.UserID == "" {
		return "", false, nil
	}
	within := hookUses
	if edit {
		within -= hookReserve
	}
	u, ok, err := a.hooks.TakeHook(ctx, m.ChatID, m.UserID, m.RunID, within, a.cfg.Now())
	if err != nil {
		return "", false, fmt.Errorf("slack: response_url of %s in %s: %w", m.UserID, m.ChatID, err)
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

// respond posts m through a response_url of its person (see takeHook),
// visible to them only (ephemeral, Slack's default for a command's
// answer). ok is false when there is no response_url to use.
func (a *Adapter) respond(ctx context.Context, m bot.Outgoing, edit bool) (id string, ok bool, err error) {
	u, ok, err := a.takeHook(ctx, m, edit)
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
