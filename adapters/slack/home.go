package slack

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/tidybot/tidybot/bot"
)

// The App Home tab (docs.slack.dev/surfaces/app-home): when a person
// opens it Slack sends app_home_opened (docs.slack.dev/reference/events/app_home_opened,
// tab "home" or "messages"), and the app publishes the tab's view for
// that person with views.publish (docs.slack.dev/reference/methods/views.publish).
// Its buttons' presses arrive as block_actions whose view is of type
// "home" and that name no channel.

var _ bot.HomePublisher = (*Adapter)(nil)

// HomeOpener builds and publishes a person's Home; *bot.Bot implements
// it, returning once the publish is queued, so that the event is
// acknowledged at once. A handler that does not leaves the Home tab
// empty.
type HomeOpener interface {
	OpenHome(ctx context.Context, platform, userID, teamID string) error
}

// homeOpened hands an app_home_opened of the Home tab to h; ok is false
// for any other event. The Messages tab has nothing to publish.
func (a *Adapter) homeOpened(ctx context.Context, h bot.Handler, inner any, team string) (bool, error) {
	e, ok := inner.(*slackevents.AppHomeOpenedEvent)
	if !ok {
		return false, nil
	}
	o, isOpener := h.(HomeOpener)
	if e.Tab != "home" || e.User == "" || !isOpener {
		return true, nil
	}
	if err := o.OpenHome(ctx, Platform, e.User, team); err != nil {
		return true, fmt.Errorf("slack: Home of %s: %w", e.User, err)
	}
	return true, nil
}

// Block Kit's limits on what a Home shows (docs.slack.dev/reference/block-kit/blocks,
// docs.slack.dev/reference/block-kit/block-elements/button-element):
// a view holds up to 100 blocks; a section's text up to 3,000
// characters; a button's text up to 75 and its value up to 2,000.
const (
	maxHomeBlocks   = 100
	maxButtonLabel  = 75
	maxButtonValues = 2000
)

// PublishHome implements bot.HomePublisher: views.publish of a Home tab
// view drawn from h.
func (a *Adapter) PublishHome(ctx context.Context, userID string, h bot.Home) error {
	view := slack.HomeTabViewRequest{Type: slack.VTHomeTab, Blocks: slack.Blocks{BlockSet: homeBlocks(h)}}
	if _, err := a.api.PublishViewContext(ctx, slack.PublishViewContextRequest{UserID: userID, View: view}); err != nil {
		return fmt.Errorf("slack: views.publish for %s: %w", userID, a.redact(err))
	}
	return nil
}

// homeBlocks draws h as Block Kit: a header, the notice, one section per
// setting with its buttons, autopilot's last filings each with its Undo,
// the account and the day's usage.
func homeBlocks(h bot.Home) []slack.Block {
	text := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.PlainTextType, clip(s, maxText), false, false)
	}
	out := []slack.Block{slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, "Your tidybot settings", false, false))}
	if h.Notice != "" {
		out = append(out, slack.NewSectionBlock(text(h.Notice), nil, nil))
	}
	if !h.Allowed {
		return out
	}
	buttons := func(id string, bs []bot.Button) slack.Block {
		var els []slack.BlockElement
		for i, b := range bs {
			if len(b.Data) > maxButtonValues {
				continue
			}
			els = append(els, slack.NewButtonBlockElement(id+"_"+strconv.Itoa(i), b.Data,
				slack.NewTextBlockObject(slack.PlainTextType, clip(b.Label, maxButtonLabel), false, false)))
		}
		return slack.NewActionBlock(id, els...)
	}
	for i, s := range h.Settings {
		out = append(out, slack.NewSectionBlock(text(s.Label+": "+s.Value), nil, nil))
		if len(s.Buttons) > 0 {
			out = append(out, buttons("home_set_"+strconv.Itoa(i), s.Buttons))
		}
	}
	if h.Typed != "" {
		out = append(out, slack.NewContextBlock("", text(h.Typed)))
	}
	if len(h.Filings) > 0 {
		out = append(out, slack.NewDividerBlock(), slack.NewSectionBlock(text("Autopilot's last filings (Undo puts a filing back as it was):"), nil, nil))
		for i, f := range h.Filings {
			out = append(out, slack.NewSectionBlock(text(f.Text), nil, nil), buttons("home_filing_"+strconv.Itoa(i), []bot.Button{f.Undo}))
		}
	}
	if acc := h.Account; acc != nil {
		out = append(out, slack.NewDividerBlock(), slack.NewSectionBlock(text("Todoist: "+acc.Text), nil, nil))
		for _, b := range []*bot.Button{acc.Disconnect, acc.Connect} {
			if b != nil {
				out = append(out, buttons("home_account", []bot.Button{*b}))
			}
		}
	}
	if h.Usage != "" {
		out = append(out, slack.NewDividerBlock(), slack.NewSectionBlock(text(h.Usage), nil, nil))
	}
	if len(out) > maxHomeBlocks {
		out = out[:maxHomeBlocks]
	}
	return out
}

// homeDM gives a press on the Home, which names no channel, the bot's
// own IM with the presser as its conversation: what the press posts (a
// Connect link) goes there. Left without one when Slack cannot say.
func (a *Adapter) homeDM(ctx context.Context, cb slack.InteractionCallback, in bot.Incoming) bot.Incoming {
	if cb.View.Type != slack.VTHomeTab || in.ChatID != "" || in.UserID == "" {
		return in
	}
	im, err := a.imWith(ctx, in.UserID)
	if err != nil {
		a.log.Warn("slack: no DM for a press on the Home", slog.String("user_id", in.UserID), slog.Any("err", a.redact(err)))
		return in
	}
	in.ChatID, in.DM = im, true
	return in
}
