package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/tidybot/tidybot/bot"
)

// RunSocketMode receives events over Socket Mode (SLACK_APP_TOKEN, no
// public address needed) until ctx ends. Each envelope is handed to h
// (which stores it durably) and acknowledged only then, well within
// Slack's 3 seconds; one h refuses is not acknowledged, so Slack redelivers
// it. It returns an error only when the connection cannot be kept (a bad
// app token).
func (a *Adapter) RunSocketMode(ctx context.Context, h bot.Handler) error {
	if a.cfg.AppToken == "" {
		return fmt.Errorf("slack: Socket Mode needs SLACK_APP_TOKEN")
	}
	api := slack.New(a.cfg.BotToken, slack.OptionAppLevelToken(a.cfg.AppToken), slack.OptionAPIURL(a.cfg.APIURL), slack.OptionHTTPClient(a.cfg.HTTPClient),
		slack.OptionLog(libLog{a}))
	sm := socketmode.New(api, socketmode.OptionLog(libLog{a}))
	errc := make(chan error, 1)
	go func() { errc <- sm.RunContext(ctx) }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slack: Socket Mode (check SLACK_APP_TOKEN): %w", a.redact(err))
		case evt := <-sm.Events:
			a.socketEvent(ctx, sm, evt, h)
		}
	}
}

// socketEvent handles one Socket Mode event.
func (a *Adapter) socketEvent(ctx context.Context, sm *socketmode.Client, evt socketmode.Event, h bot.Handler) {
	if evt.Type == socketmode.EventTypeConnectionError {
		// slack-go retries by itself; say why, without the token an
		// upstream may echo.
		if ce, ok := evt.Data.(*slack.ConnectionErrorEvent); ok {
			a.log.Warn("slack Socket Mode connection failed; retrying", slog.Int("attempt", ce.Attempt), slog.Duration("backoff", ce.Backoff),
				slog.Any("err", a.redact(ce.ErrorObj)))
		}
		return
	}
	if evt.Type == socketmode.EventTypeErrorBadMessage {
		a.badEnvelope(sm, evt)
		return
	}
	if evt.Request == nil || evt.Request.EnvelopeID == "" {
		// Lifecycle events: connecting and errors have no request; hello
		// has one without an envelope id and takes no ack (only envelopes
		// carrying an envelope_id are acknowledged:
		// api.slack.com/apis/connections/socket-implement; slack-go
		// socketmode parseEvent). disconnect never reaches us: slack-go
		// reconnects on it.
		return
	}
	var in bot.Incoming
	ok := false
	switch evt.Type {
	case socketmode.EventTypeEventsAPI:
		if ea, isEA := evt.Data.(slackevents.EventsAPIEvent); isEA {
			home, err := a.homeOpened(ctx, h, ea.InnerEvent.Data, ea.TeamID)
			if !home && err == nil {
				in, ok, err = a.incoming(ctx, ea.InnerEvent.Data)
				in.TeamID = senderTeam(in.TeamID, ea.TeamID)
			}
			if err != nil {
				a.log.Error("slack socket event", slog.String("envelope_id", evt.Request.EnvelopeID), slog.Any("err", a.redact(err)))
				return // not acknowledged: Slack redelivers it
			}
		}
	case socketmode.EventTypeSlashCommand:
		if sc, isSC := evt.Data.(slack.SlashCommand); isSC && sc.UserID != "" {
			a.rememberHook(ctx, sc.ChannelID, sc.UserID, sc.ResponseURL)
			in, ok = slashIncoming(sc, a.ownIM(ctx, sc.ChannelID, sc.UserID)), true
		}
	case socketmode.EventTypeInteractive:
		if cb, isCB := evt.Data.(slack.InteractionCallback); isCB {
			in, ok = actionIncoming(cb)
			in = a.homeDM(ctx, cb, in)
			a.rememberHook(ctx, in.ChatID, in.UserID, cb.ResponseURL)
		}
	}
	if ok {
		if err := h.Handle(ctx, in); err != nil {
			a.log.Error("slack socket event", slog.String("envelope_id", evt.Request.EnvelopeID), slog.Any("err", a.redact(err)))
			return // not acknowledged: Slack redelivers it
		}
	}
	if err := sm.Ack(*evt.Request); err != nil {
		a.log.Warn("slack ack", slog.Any("err", a.redact(err)))
	}
}

// badEnvelope handles an envelope slack-go could not decode (its payload
// does not fit the library's types): it is logged, counted and
// acknowledged by its envelope_id, so Slack does not send it again and
// again; without an envelope_id there is nothing to acknowledge.
func (a *Adapter) badEnvelope(sm *socketmode.Client, evt socketmode.Event) {
	bad, ok := evt.Data.(*socketmode.ErrorBadMessage)
	if !ok {
		return
	}
	var env struct {
		EnvelopeID string `json:"envelope_id"`
		Type       string `json:"type"`
	}
	_ = json.Unmarshal(bad.Message, &env)
	a.log.Warn("slack Socket Mode envelope does not decode; skipped", slog.String("envelope_id", env.EnvelopeID),
		slog.String("type", env.Type), slog.Any("err", a.redact(bad.Cause)))
	a.count("undecodable")
	if env.EnvelopeID == "" {
		return
	}
	if err := sm.Ack(socketmode.Request{EnvelopeID: env.EnvelopeID}); err != nil {
		a.log.Warn("slack ack", slog.Any("err", a.redact(err)))
	}
}
