package discord

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/utf16text"
)

// An interaction (a slash command, a button press) must get its first
// response within 3 s, and only one
// (discord.com/developers/docs/interactions/receiving-and-responding#responding-to-an-interaction).
// The adapter hands it to the bot first and answers once Handle stored
// it: a slash command with a deferred response (type 5, "… is
// thinking"), which the bot's first message to that person in that chat
// then replaces (and later ones follow up, while the token lives); a
// press with a deferred update (type 6: the message stays as it is, the
// bot edits it). An interaction that could not be stored in time gets an
// ephemeral "try again" instead; one seen before (the gateway's replay
// after a RESUME) gets nothing more. One whose event needs Discord to
// tell something first (lookups.go) gets its deferred response before
// that is asked, and is stored after; one not stored then (within
// lateWithin) gets "try again" through its token.

// responder makes an interaction's first (and only) response.
type responder func(*discordgo.InteractionResponse) error

// interaction hands one interaction to the bot and responds to it. ch
// is the interaction's channel as its JSON gives it (nil for none).
// later, when not nil, is what is left to do once the response is made:
// the caller runs it (over HTTP, after the handler returned, so that
// Discord has the response), with a context that outlives the request.
func (in *intake) interaction(i *discordgo.Interaction, ch *wireChannel, respond responder) (later func(context.Context)) {
	a := in.a
	if i.Type == discordgo.InteractionPing {
		a.report(respond(&discordgo.InteractionResponse{Type: discordgo.InteractionResponsePong}), i)
		return nil
	}
	if !a.firstTime(i.ID) {
		return nil // replayed after a RESUME: stored and answered already
	}
	a.learnChannel(ch)
	ar, ok := a.interactionArrival(i)
	if !ok {
		a.report(respond(ephemeral(bot.UnusableText)), i)
		return nil
	}
	hook := newHook(i, a.cfg.Now())
	kind := discordgo.InteractionResponseDeferredChannelMessageWithSource
	if ar.ev.Button != "" {
		kind = discordgo.InteractionResponseDeferredMessageUpdate
	}
	ev, err := a.settle(in.ctx, ar, false)
	if err != nil { // only Discord can tell: the response first
		a.report(respond(&discordgo.InteractionResponse{Type: kind}), i)
		return func(ctx context.Context) { in.late(ctx, ar, hook) }
	}
	place := hookPlace(ev, i.ID)
	a.answering(place, ev.UserID, hook)
	if err := a.deliver(in.ctx, in.h, ev, interactionBudget); err != nil {
		a.log.Warn("discord: interaction not stored in time; the person is asked to try again", slog.String("event_id", ev.EventID), slog.Any("err", redact(err, a.cfg.Token)))
		a.answered(place, ev.UserID, hook)
		a.forget(i.ID)
		a.report(respond(ephemeral(bot.NotTakenText)), i)
		return nil
	}
	// Kept before the response: a replica that takes it sooner than the
	// response is made is refused and tries again (refused).
	a.saveHook(in.ctx, place, ev.UserID, hook)
	err = respond(&discordgo.InteractionResponse{Type: kind})
	a.answered(place, ev.UserID, hook)
	a.report(err, i)
	return nil
}

// late stores an interaction answered before its lookups: it asks
// Discord what ar needs, keeps the token where the answer finds it and
// hands the event to the bot, all within lateWithin; an interaction not
// stored then is told to try again through its token.
func (in *intake) late(ctx context.Context, ar arrival, hook *interactionHook) {
	a := in.a
	ctx, cancel := context.WithTimeout(ctx, lateWithin)
	defer cancel()
	ev, err := a.settleWaiting(ctx, ar)
	if err == nil {
		a.saveHook(ctx, hookPlace(ev, hook.id), ev.UserID, hook)
		err = a.deliver(ctx, in.h, ev, 0)
	}
	if err == nil {
		return
	}
	a.log.Warn("discord: interaction not stored in time; the person is asked to try again", slog.String("event_id", ar.ev.EventID), slog.Any("err", redact(err, a.cfg.Token)))
	tctx, tcancel := context.WithTimeout(context.WithoutCancel(ctx), lookupWithin)
	defer tcancel()
	a.tryAgain(tctx, hook, ar.ev.Button != "")
}

// tryAgain tells the person through h's token that their interaction
// was not taken: a command's "… is thinking" becomes the notice; a
// press, whose message stays the bot's, gets it as a message only they
// see.
func (a *Adapter) tryAgain(ctx context.Context, h *interactionHook, press bool) {
	text := bot.NotTakenText
	err := a.whenKnown(ctx, *h, func() error { // over HTTP, Discord may not have read the response yet
		if press {
			_, err := a.api.FollowupMessageCreate(&discordgo.Interaction{AppID: h.appID, Token: h.token}, true,
				&discordgo.WebhookParams{Content: text, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noPings}, discordgo.WithContext(ctx))
			return err
		}
		_, err := a.api.WebhookMessageEdit(h.appID, h.token, "@original", &discordgo.WebhookEdit{Content: &text, AllowedMentions: noPings}, discordgo.WithContext(ctx))
		return err
	})
	if err != nil {
		a.log.Warn("discord: could not ask the person to try again", slog.String("interaction_id", h.id), slog.Any("err", redact(err, a.cfg.Token)))
	}
}

// hookPlace is where the token of interaction id, whose event is ev, is
// kept: a command's under its chat and event, a press's under itself.
func hookPlace(ev bot.Incoming, id string) string {
	if ev.Button != "" {
		return pressPlace(id)
	}
	return commandPlace(ev.ChatID, ev.EventID)
}

// report logs a failed response.
func (a *Adapter) report(err error, i *discordgo.Interaction) {
	if err != nil {
		a.log.Warn("discord: interaction response failed", slog.String("interaction_id", i.ID), slog.Any("err", redact(err, a.cfg.Token)))
	}
}

func ephemeral(text string) *discordgo.InteractionResponse {
	return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: text, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noPings}}
}

// firstTime reports whether interaction id is seen for the first time
// (remembered for its token's 15 minutes).
func (a *Adapter) firstTime(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.cfg.Now()
	if t, ok := a.seen[id]; ok && now.Before(t) {
		return false
	}
	if len(a.seen) > 1000 {
		for k, t := range a.seen {
			if !now.Before(t) {
				delete(a.seen, k)
			}
		}
	}
	a.seen[id] = now.Add(hookFor)
	return true
}

// forget lets interaction id be taken again (it was not stored).
func (a *Adapter) forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.seen, id)
}

// gatewayResponder responds to a gateway interaction with a REST call
// (POST /interactions/{id}/{token}/callback).
func (a *Adapter) gatewayResponder(ctx context.Context, i *discordgo.Interaction) responder {
	return func(r *discordgo.InteractionResponse) error {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return a.wrap("respond to interaction", a.api.InteractionRespond(i, r, discordgo.WithContext(ctx)))
	}
}

// interactionArrival reads a slash command or a button press as a bot
// event, asking Discord nothing (settle completes it); ok is false for
// other interactions (autocomplete, modals).
func (a *Adapter) interactionArrival(i *discordgo.Interaction) (arrival, bool) {
	user := i.User
	if i.Member != nil && i.Member.User != nil {
		user = i.Member.User
	}
	// A command or press off the wire always has its Data (discordgo's
	// Interaction.UnmarshalJSON fails without it: the event is
	// undecodable, TestInteractionWithoutDataDoesNotDecode); one built
	// otherwise would make ApplicationCommandData and
	// MessageComponentData panic (TestInteractionWithoutDataIsRefusedNotAPanic).
	if user == nil || user.ID == "" || i.ChannelID == "" || user.Bot || i.Data == nil {
		return arrival{}, false
	}
	ev := bot.Incoming{Platform: Platform, ChatID: i.ChannelID, UserID: user.ID, UserName: user.Username,
		EventID: "i" + i.ID, At: time.Now(), DM: i.GuildID == "", TeamID: i.GuildID}
	if ev.DM {
		a.learnDM(i.ChannelID, user.ID)
	}
	switch i.Type {
	case discordgo.InteractionApplicationCommand:
		d := i.ApplicationCommandData()
		if d.Name == "" {
			return arrival{}, false
		}
		ev.Command = d.Name
		ev.AwaitsAnswer = true // deferred: "… is thinking" until answered
		if c, ok := bot.LookupCommand(d.Name); ok {
			ev.Command = c.Name
		}
		for _, o := range d.Options {
			if o != nil && o.Name == optionText {
				if s, ok := o.Value.(string); ok {
					ev.Text = strings.TrimSpace(s)
				}
			}
		}
		return arrival{ev: ev, channel: i.ChannelID}, true
	case discordgo.InteractionMessageComponent:
		d := i.MessageComponentData()
		if d.CustomID == "" {
			return arrival{}, false
		}
		ev.Button, ev.ButtonRef = d.CustomID, pressRef(i.ID, user.ID)
		if i.Message != nil {
			ev.MessageID = i.Message.ID
		}
		return arrival{ev: ev, channel: i.ChannelID}, true
	}
	return arrival{}, false
}

// AnswerButton implements bot.ButtonAnswerer. The press was answered
// with a deferred update as soon as it was stored; a text (the wrong
// person's press: "Only the person who asked…") is an ephemeral
// follow-up that only the presser sees, through the press's token kept
// in Hooks (by whichever replica received it), used once. A press whose
// token is not kept (15 minutes passed, answered already, or kept in
// another process's memory) has nothing to answer.
func (a *Adapter) AnswerButton(ctx context.Context, ref, text string) error {
	if strings.TrimSpace(text) == "" {
		return nil
	}
	id, user, ok := strings.Cut(ref, "/")
	if !ok || id == "" || user == "" {
		a.log.Debug("discord: button answer dropped: no press of this adapter", slog.String("ref", ref))
		return nil // an event stored before presses named their person
	}
	h, ok, err := a.takeHook(ctx, pressPlace(id), user, "", 1)
	if err != nil {
		return err
	}
	if !ok {
		a.log.Debug("discord: button answer dropped: the press's token is not kept", slog.String("interaction_id", id))
		return nil
	}
	params := &discordgo.WebhookParams{Content: utf16text.Clip(text, maxText), Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noPings}
	err = a.queued(followups(h), "answer button", func() error {
		return a.whenKnown(ctx, h, func() error { // Discord may not have read the press's HTTP answer yet
			_, err := a.api.FollowupMessageCreate(&discordgo.Interaction{AppID: h.appID, Token: h.token}, true, params, discordgo.WithContext(ctx))
			return err
		})
	})
	if err != nil {
		err = a.refused(ctx, user, h, err)
	}
	if errors.Is(err, errTokenRefused) {
		return nil // nothing to answer any more
	}
	return err
}

// Routes implements bot.Router: POST /discord/interactions when
// DISCORD_PUBLIC_KEY is set (the portal's Interactions Endpoint URL;
// Discord then sends interactions there instead of over the gateway),
// nothing otherwise.
func (a *Adapter) Routes(mux *http.ServeMux, h bot.Handler) error {
	if a.cfg.PublicKey == "" {
		return nil
	}
	key, err := publicKey(a.cfg.PublicKey)
	if err != nil {
		return err
	}
	mux.Handle("POST /discord/interactions", a.InteractionsHandler(key, h))
	return nil
}

// publicKey reads DISCORD_PUBLIC_KEY (hex, the portal's General
// Information → Public Key).
func publicKey(s string) (ed25519.PublicKey, error) {
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, errors.New("discord: DISCORD_PUBLIC_KEY is not a public key: copy the 64 hex digits of General Information → Public Key in the developer portal")
	}
	return ed25519.PublicKey(b), nil
}

// InteractionsHandler serves POST /discord/interactions: a request whose
// Ed25519 signature (X-Signature-Ed25519 over X-Signature-Timestamp and
// the body, discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers)
// does not verify gets 401 before its body is read as JSON; a body that
// is no interaction 400; a PING its PONG; any other interaction is
// handed to h and answered in the HTTP response (the same answers as
// over the gateway).
func (a *Adapter) InteractionsHandler(key ed25519.PublicKey, h bot.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		sig, err := hex.DecodeString(r.Header.Get("X-Signature-Ed25519"))
		ts := r.Header.Get("X-Signature-Timestamp")
		if err != nil || len(sig) != ed25519.SignatureSize || ts == "" || !ed25519.Verify(key, append([]byte(ts), body...), sig) {
			http.Error(w, "invalid request signature", http.StatusUnauthorized)
			return
		}
		var i discordgo.Interaction
		if err := json.Unmarshal(body, &i); err != nil || i.Type == 0 || (i.Type != discordgo.InteractionPing && i.ID == "") {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		in := &intake{a: a, h: h, ctx: r.Context()}
		later := in.interaction(&i, interactionChannel(body), func(resp *discordgo.InteractionResponse) error {
			var buf bytes.Buffer
			if err := json.NewEncoder(&buf).Encode(resp); err != nil {
				return fmt.Errorf("discord: interaction response: %w", err)
			}
			w.Header().Set("Content-Type", "application/json")
			_, err := w.Write(buf.Bytes())
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			return err
		})
		if later != nil {
			go later(context.WithoutCancel(r.Context()))
		}
	})
}
