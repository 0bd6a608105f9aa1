package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/hooks"
	"github.com/tidybot/tidybot/internal/retry"
)

// An interaction's token answers it for 15 minutes: "Interaction tokens
// are valid for 15 minutes and can be used to send followup messages"
// (discord.com/developers/docs/interactions/receiving-and-responding#followup-messages);
// Discord counts no uses within that window (its rate limits apply), so
// the adapter decides what a token is used for. Whoever holds it can
// post in the interaction's name, and what is posted through the
// deferred response of a command shows as the answer to that person's
// command: a token is its person's, never the channel's (issue 33).
//
// With several serve replicas the one that receives an interaction over
// its gateway session (or HTTP) is often not the one that runs the
// conversation (issue 35), so the tokens are kept in Hooks, the store
// contract Slack's response_urls use (adapters/slack Hooks; store/postgres
// implements it, internal/hooks.Memory for one process), mapped so:
//   - a slash command's token is saved under its channel and event
//     (commandPlace) and person before its deferred response is made;
//     the first message the bot sends for that event (Outgoing.EventID)
//     takes it (one use: it replaces the "thinking…"), binding it to
//     that message's run;
//   - a button press's token is saved under the press itself and its
//     presser, for the one answer only the presser sees (AnswerButton).
// The keys start with "discord:", so they never meet Slack's.

// Hooks keeps interaction tokens where several serve replicas share
// them: the contract adapters/slack's Hooks is too.
type Hooks = hooks.Store

// commandPlace is where a slash command's token is kept: its channel and
// its event (the interaction's "i"+id, bot.Outgoing.EventID of the
// messages that answer it). Only a message of the command's own event
// takes it: a run already going in that chat for the same person never
// answers under "… used /tidy-inbox".
func commandPlace(chat, event string) string { return Platform + ":" + chat + "/" + event }

// pressPlace is where a press's token is kept: the press itself.
func pressPlace(id string) string { return Platform + ":press:" + id }

// hookValue is what is kept of a token: when it was received (unix
// milliseconds), the application id and the token, the parts of the
// webhook's path (/webhooks/{app}/{token}).
func hookValue(h *interactionHook) string {
	return strconv.FormatInt(h.expires.Add(-hookFor).UnixMilli(), 10) + "/" + h.appID + "/" + h.token
}

func hookOf(v string) (interactionHook, bool) {
	ms, rest, _ := strings.Cut(v, "/")
	app, token, _ := strings.Cut(rest, "/")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || app == "" || token == "" {
		return interactionHook{}, false
	}
	return interactionHook{appID: app, token: token, expires: time.UnixMilli(n).Add(hookFor)}, true
}

// ackFor is how long after its arrival an interaction may still be
// being acknowledged by the replica that received it (Discord gives 3
// s): a token Discord refuses within it is given back and tried again
// (refused): another replica was quicker than the acknowledgement.
const ackFor = 5 * time.Second

// whenKnown makes call, a webhook call with h's token, again while
// Discord refuses the token within ackFor of the interaction's
// arrival: a follow-up (or the edit of @original) works only "after the
// initial response"
// (discord.com/developers/docs/interactions/receiving-and-responding#followup-messages),
// and over the HTTP interactions endpoint the initial response is the
// adapter's HTTP answer, which Discord reads when it reads it (or
// another replica's, still on its way): a call made meanwhile is refused
// with 10015 Unknown Webhook. The call is made again after a short pause
// (50 ms, doubling) for up to knownWithin, while within ackFor of the
// arrival; only that chat's lane of the send queue waits. (A
// bot.RetryLater at once would hold the chat for the queue's least
// pause, a second, in which the status message's edits are dropped.)
// What is still refused then goes to refused: a bot.RetryLater within
// ackFor, the channel after it.
func (a *Adapter) whenKnown(ctx context.Context, h interactionHook, call func() error) error {
	pause := 50 * time.Millisecond
	until := a.cfg.Now().Add(knownWithin)
	for {
		err := call()
		now := a.cfg.Now()
		if !refusedToken(err) || !now.Before(until) || !now.Before(h.expires.Add(-hookFor+ackFor)) {
			return err
		}
		if retry.Sleep(ctx, pause) != nil {
			return err
		}
		pause = min(2*pause, 500*time.Millisecond)
	}
}

// knownWithin is how long whenKnown tries a refused token again in place.
const knownWithin = time.Second

// refused sorts out an error of the first use of h's token, taken for
// person: Discord refusing it within ackFor of its arrival
// gives it back and asks the send queue to try again once the
// acknowledgement had time; later it is errTokenRefused (it expired, or
// was never acknowledged: the answer goes elsewhere); any other failure
// gives it back for the queue's retry.
func (a *Adapter) refused(ctx context.Context, person string, h interactionHook, err error) error {
	if !refusedToken(err) {
		a.saveHook(ctx, h.place, person, &h)
		return err
	}
	if wait := h.expires.Add(-hookFor + ackFor).Sub(a.cfg.Now()); wait > 0 {
		a.saveHook(ctx, h.place, person, &h)
		return bot.RetryLater(err, min(wait, time.Second))
	}
	return fmt.Errorf("%w: %w", errTokenRefused, err)
}

// errTokenRefused is the error of a token Discord no longer takes (it
// expired, or was never acknowledged): the answer goes to the channel
// instead.
var errTokenRefused = errors.New("discord: the interaction's token was refused")

// refusedToken reports whether Discord refused an interaction's token
// (discord.com/developers/docs/topics/opcodes-and-status-codes#json-json-error-codes).
func refusedToken(err error) bool {
	c := restCode(err)
	return c == codeUnknownWebhook || c == codeInvalidWebhookToken
}

// pressRef is a press's ButtonRef: its interaction id and its presser.
func pressRef(id, user string) string { return id + "/" + user }

// saveHook keeps h's token for its answer; a failure is logged (never
// the token): the answer still comes, as a message in the channel.
func (a *Adapter) saveHook(ctx context.Context, place, person string, h *interactionHook) {
	if err := a.hooks.SaveHook(ctx, place, person, hookValue(h), h.expires); err != nil {
		a.log.Warn("discord: keep an interaction's token", slog.String("interaction_id", h.id), slog.Any("err", redact(err, a.cfg.Token)))
	}
}

// takeHook takes a token of person kept at place for one use: bound to
// run, or person's newest unbound one. It waits first for this
// process's interactions at place that are still being answered.
func (a *Adapter) takeHook(ctx context.Context, place, person, run string, within int) (interactionHook, bool, error) {
	a.settled(ctx, place, person)
	v, ok, err := a.hooks.TakeHook(ctx, place, person, run, within, a.cfg.Now())
	if err != nil {
		return interactionHook{}, false, fmt.Errorf("discord: interaction token of %s: %w", person, redact(err, a.cfg.Token))
	}
	if !ok {
		return interactionHook{}, false, nil
	}
	h, ok := hookOf(v)
	if !ok {
		return interactionHook{}, false, errors.New("discord: a kept interaction token does not read")
	}
	h.place = place
	return h, true, nil
}

// takePending takes the token of the slash command m answers (m.EventID,
// of m's person in m's chat) whose "thinking…" is still to be replaced;
// a message of no event, or of another, takes none; within is how many
// uses the run may have taken (1, or 2 to make its edit again). A command such as
// /undo typed in the channel acts on the person's conversation in a
// thread: its answer names that thread, and still its event.
func (a *Adapter) takePending(ctx context.Context, m bot.Outgoing, within int) (interactionHook, bool, error) {
	if m.UserID == "" || m.EventID == "" {
		return interactionHook{}, false, nil
	}
	if m.RunID == "" {
		within = 1 // unbound: a second use could be another message's
	}
	return a.takeHook(ctx, commandPlace(m.ChatID, m.EventID), m.UserID, m.RunID, within)
}

// Discord's JSON error codes for a token it does not take
// (discord.com/developers/docs/topics/opcodes-and-status-codes#json-json-error-codes).
const (
	codeUnknownWebhook      = 10015
	codeInvalidWebhookToken = 50027
)

// answering marks h as being answered at place for person by this
// process until its end: takeHook waits for it.
func (a *Adapter) answering(place, person string, h *interactionHook) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := place + "|" + person
	a.inflight[k] = append(a.inflight[k], h)
}

// answered ends answering.
func (a *Adapter) answered(place, person string, h *interactionHook) {
	a.mu.Lock()
	k := place + "|" + person
	hs := a.inflight[k]
	for i, x := range hs {
		if x == h {
			a.inflight[k] = append(hs[:i:i], hs[i+1:]...)
			break
		}
	}
	if len(a.inflight[k]) == 0 {
		delete(a.inflight, k)
	}
	a.mu.Unlock()
	close(h.ready)
}

// settled waits (at most the 3 s Discord gives a response, and a bit)
// until this process has answered its interactions of person at place
// and kept their tokens: a message sent the moment the interaction was
// stored still finds its token.
func (a *Adapter) settled(ctx context.Context, place, person string) {
	a.mu.Lock()
	hs := append([]*interactionHook(nil), a.inflight[place+"|"+person]...)
	a.mu.Unlock()
	for _, h := range hs {
		h.wait(ctx)
	}
}
