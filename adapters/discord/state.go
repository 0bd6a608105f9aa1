package discord

import (
	"context"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/tidybot/tidybot/internal/utf16text"
)

// What the adapter remembers in this process's memory: what it learnt
// of channels (which are threads and their parents, which are a
// person's DM), and which of its messages answer an interaction (for
// their edits, 15 minutes each). Nothing of it is needed after a
// restart or on another replica: a thread is learnt again
// (GET /channels/{id}), a DM at the person's next message, and a message
// is edited through its channel instead. The tokens of interactions
// still to be answered are in Hooks (hooks.go).

// interactionHook is an interaction's token: it answers the
// interaction for 15 minutes
// (discord.com/developers/docs/interactions/receiving-and-responding#interaction-callback).
type interactionHook struct {
	id, appID, token string
	expires          time.Time
	place            string // where it was kept in Hooks, once taken
	// ready closes once this process made the interaction's response,
	// or could not (answered).
	ready chan struct{}
}

func newHook(i *discordgo.Interaction, now time.Time) *interactionHook {
	return &interactionHook{id: i.ID, appID: i.AppID, token: i.Token, expires: now.Add(hookFor), ready: make(chan struct{})}
}

// wait waits for the interaction's response (at most the 3 s Discord
// gives it, and a bit).
func (h *interactionHook) wait(ctx context.Context) {
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-h.ready:
	case <-ctx.Done():
	case <-t.C:
	}
}

// keepToken remembers that message id answers interaction h, for its
// edits.
func (a *Adapter) keepToken(id string, h interactionHook) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokens[id] = hookToken{appID: h.appID, token: h.token, expires: h.expires}
	a.prune()
}

// tokenOf is the live token that edits message id, if it answers an
// interaction.
func (a *Adapter) tokenOf(id string) (hookToken, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.tokens[id]
	if !ok || !a.cfg.Now().Before(t.expires) {
		return hookToken{}, false
	}
	return t, true
}

// prune forgets expired tokens; a.mu is held.
func (a *Adapter) prune() {
	now := a.cfg.Now()
	for id, t := range a.tokens {
		if !now.Before(t.expires) {
			delete(a.tokens, id)
		}
	}
}

// learnThread records that channel thread is a thread of parent.
func (a *Adapter) learnThread(thread, parent string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	putBounded(a.threads, thread, parent)
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
	putBounded(a.names, messageID, text)
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
	return utf16text.Clip(name, 100)
}

// wroteIn records that message id was written in channel, a thread: Ack
// is handed the conversation's chat (the thread's parent).
func (a *Adapter) wroteIn(id, channel string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	putBounded(a.wrote, id, channel)
}

// putBounded puts key in m, forgetting all of m first once it holds more
// than 1000 keys: what is forgotten is only learnt again (see above).
func putBounded[V any](m map[string]V, key string, value V) {
	if len(m) > 1000 {
		clear(m)
	}
	m[key] = value
}

// channelOf is the thread message id was written in, "" when not known.
func (a *Adapter) channelOf(id string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.wrote[id]
}

// learnDM records that channel is user's DM with the bot.
func (a *Adapter) learnDM(channel, user string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	putBounded(a.dms, channel, user)
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
