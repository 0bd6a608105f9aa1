package discord

import (
	"context"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/tidybot/tidybot/bot"
)

// What the adapter remembers, in this process's memory only: what it
// learnt of channels (which are threads and their parents, which are a
// person's DM), and the tokens of live interactions (15 minutes each).
// Nothing of it is needed after a restart: a thread is learnt again
// (GET /channels/{id}), a DM at the person's next message, and an
// interaction whose token is lost is answered in its channel instead.

// interactionHook is one interaction the adapter answered with a
// deferred response: its token answers it for 15 minutes
// (discord.com/developers/docs/interactions/receiving-and-responding#interaction-callback).
type interactionHook struct {
	id, appID, token string
	expires          time.Time
	// ready closes once the deferred response was made (ok) or could
	// not be (!ok): a follow-up before it would be refused.
	ready chan struct{}
	ok    bool
}

// Follow-ups (and the edit of @original) work only once Discord has
// the interaction's first response: a follow-up is sent "after the
// initial response"
// (discord.com/developers/docs/interactions/receiving-and-responding#followup-messages).
// Over the HTTP interactions endpoint the adapter's first response is its
// HTTP answer, which Discord reads when it reads it: a webhook call made
// the moment that answer is written can still be refused with 10015
// Unknown Webhook. Such a refusal within ackFor of the interaction's
// arrival is Discord not knowing the token yet, not a lost token: the
// call is made again after a short pause (50 ms, doubling up to 500 ms)
// until ackFor has passed. Only that chat's lane of the send queue
// waits; a bot.RetryLater instead would hold the chat for the queue's
// least pause (a second), in which the status message's edits are
// dropped.
const ackFor = 5 * time.Second

// codeUnknownWebhook is Discord's JSON error code for a token it does
// not know (yet, or any more)
// (discord.com/developers/docs/topics/opcodes-and-status-codes#json-json-error-codes).
const codeUnknownWebhook = 10015

// whenKnown makes call, a webhook call with h's token, again while
// Discord refuses the token as unknown within ackFor of the
// interaction's arrival.
func (h interactionHook) whenKnown(ctx context.Context, call func() error) error {
	pause := 50 * time.Millisecond
	for {
		err := call()
		if restCode(err) != codeUnknownWebhook || time.Until(h.expires.Add(-hookFor+ackFor)) <= 0 {
			return err
		}
		if serr := sleep(ctx, pause); serr != nil {
			return err
		}
		pause = min(2*pause, 500*time.Millisecond)
	}
}

func newHook(i *discordgo.Interaction) *interactionHook {
	return &interactionHook{id: i.ID, appID: i.AppID, token: i.Token, expires: time.Now().Add(hookFor), ready: make(chan struct{})}
}

// done records whether the deferred response was made.
func (h *interactionHook) done(ok bool) {
	h.ok = ok
	close(h.ready)
}

// wait waits for the deferred response (at most the 3 s Discord gives
// it) and reports whether it was made.
func (h *interactionHook) wait(ctx context.Context) bool {
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-h.ready:
		return h.ok && time.Now().Before(h.expires)
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

// A slash command's hook answers only the messages of its own event
// (bot.Outgoing.EventID, the interaction's "i"+id): a run already going
// in that chat when the command came never answers under "… used
// /tidy-inbox".

// addPending keeps a slash command's hook for the first message the bot
// sends for its event (takePending).
func (a *Adapter) addPending(in bot.Incoming, h *interactionHook) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hooks[in.EventID] = append(a.hooks[in.EventID], h)
	a.prune()
}

// dropPending forgets a hook whose command was not stored.
func (a *Adapter) dropPending(in bot.Incoming, h *interactionHook) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := in.EventID
	hs := a.hooks[k]
	for i, x := range hs {
		if x == h {
			a.hooks[k] = append(hs[:i:i], hs[i+1:]...)
			break
		}
	}
	if len(a.hooks[k]) == 0 {
		delete(a.hooks, k)
	}
}

// takePending returns the hook of the slash command that m answers
// (m.EventID), once its deferred response was made; none for a message
// of another event.
func (a *Adapter) takePending(ctx context.Context, m bot.Outgoing) (interactionHook, bool) {
	if m.EventID == "" {
		return interactionHook{}, false
	}
	return a.takeOf(ctx, m.EventID)
}

// takeOf takes the oldest live hook kept under k.
func (a *Adapter) takeOf(ctx context.Context, k string) (interactionHook, bool) {
	for {
		a.mu.Lock()
		hs := a.hooks[k]
		if len(hs) == 0 {
			a.mu.Unlock()
			return interactionHook{}, false
		}
		h := hs[0]
		a.hooks[k] = hs[1:]
		if len(a.hooks[k]) == 0 {
			delete(a.hooks, k)
		}
		a.mu.Unlock()
		if h.wait(ctx) {
			return *h, true
		}
	}
}

// putPending gives back a hook whose answer could not be posted, first
// in line.
func (a *Adapter) putPending(m bot.Outgoing, h interactionHook) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := m.EventID
	hc := h
	hc.ready = make(chan struct{})
	close(hc.ready)
	a.hooks[k] = append([]*interactionHook{&hc}, a.hooks[k]...)
}

// keepToken remembers that message id answers interaction h, for its
// edits.
func (a *Adapter) keepToken(id string, h interactionHook) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokens[id] = hookToken{appID: h.appID, token: h.token, expires: h.expires}
}

// tokenOf is the live token that edits message id, if it answers an
// interaction.
func (a *Adapter) tokenOf(id string) (hookToken, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.tokens[id]
	if !ok || !time.Now().Before(t.expires) {
		return hookToken{}, false
	}
	return t, true
}

// keepPress remembers a button press's hook under its interaction id
// (the bot's ButtonRef), for AnswerButton.
func (a *Adapter) keepPress(h *interactionHook) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.presses[h.id] = h
	a.prune()
}

func (a *Adapter) press(ref string) (*interactionHook, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h, ok := a.presses[ref]
	return h, ok
}

// prune forgets expired tokens; a.mu is held.
func (a *Adapter) prune() {
	now := time.Now()
	for id, t := range a.tokens {
		if !now.Before(t.expires) {
			delete(a.tokens, id)
		}
	}
	for id, h := range a.presses {
		if !now.Before(h.expires) {
			delete(a.presses, id)
		}
	}
	for k, hs := range a.hooks {
		kept := hs[:0]
		for _, h := range hs {
			if now.Before(h.expires) {
				kept = append(kept, h)
			}
		}
		if len(kept) == 0 {
			delete(a.hooks, k)
		} else {
			a.hooks[k] = kept
		}
	}
}

// learnThread records that channel thread is a thread of parent.
func (a *Adapter) learnThread(thread, parent string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.threads[thread] = parent
}

func (a *Adapter) threadKnown(thread string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.threads[thread]
	return ok
}

// noThreads reports whether starting a thread from message id was
// refused (no permission): its answers are replies in the channel.
func (a *Adapter) noThreads(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.plain["nothread:"+id]
}

// nameThread keeps a name for the thread a mention will start.
func (a *Adapter) nameThread(messageID, text string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.names) > 1000 {
		clear(a.names)
	}
	a.names[messageID] = text
}

// threadName is the name of the thread started from message id: the
// start of the person's words (at most 100 characters, Discord's limit),
// else the bot's name.
func (a *Adapter) threadName(id string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	name := a.names[id]
	delete(a.names, id)
	if name == "" {
		name = "tidybot"
	}
	return clip(name, 100)
}

// learnDM records that channel is user's DM with the bot.
func (a *Adapter) learnDM(channel, user string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dms[channel] = user
}

// dmOf is the person whose DM channel is, "" when not known as a DM.
func (a *Adapter) dmOf(channel string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dms[channel]
}

// appIDNow is the application's id (Config.AppID, else READY's, else
// the bot's user id, which a bot made in the developer portal shares).
func (a *Adapter) appIDNow() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.appID != "" {
		return a.appID
	}
	return a.self
}
