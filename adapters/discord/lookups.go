package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/retry"
)

// What only Discord can tell of an event, and when it is asked. An
// event names its channel and its sender; two things more may need a
// REST call: whether a server channel is a thread, and whose (GET
// /channels/{id}, for a thread not seen since a restart: GUILD_CREATE
// lists the active threads, THREAD_CREATE the new ones), and, in team
// mode, which servers a DM's sender shares with the bot (members.go).
// discordgo calls the adapter's handlers from its gateway reader, one
// event after the other (SyncEvents): a call made there would hold up
// every later event of every chat, and an interaction must get its
// first response within 3 s
// (discord.com/developers/docs/interactions/receiving-and-responding#responding-to-an-interaction).
// So the reader asks nothing:
//   - a message is read (arrive) and queued in its channel's lane (a
//     thread is a channel of its own), where what is left is asked
//     (settle), each call bounded by lookupWithin; when Discord does
//     not answer, the message waits and is asked again (the waits of a
//     store that is down), that channel's later messages behind it,
//     other channels going on;
//   - an interaction whose place is known without asking (its
//     payload's channel names a thread's parent; its sender's servers
//     were learnt within membersFor) is stored, then answered
//     (interactions.go); any other gets its deferred response at once,
//     and the lookups and the storing follow (within lateWithin); what
//     is not stored by then is answered "try again" through its token.
//
// Where Discord answers but says nothing useful (404 for a channel, 403)
// the channel is taken for a channel, not a thread, and a server for
// one the person is not in.

// lookupWithin bounds each call that asks Discord about an event.
const lookupWithin = 5 * time.Second

// lateWithin bounds the lookups and the storing of an interaction
// answered before them (its token lives 15 minutes; the person sees
// "… is thinking" meanwhile).
const lateWithin = 30 * time.Second

var (
	// errAsk is settle's error when only Discord can tell and it was
	// told not to ask.
	errAsk = errors.New("discord: only Discord can tell")
	// errNoAnswer is wrapped by the error of a lookup Discord did not
	// answer.
	errNoAnswer = errors.New("no answer from Discord")
)

// noAnswer reports whether err is Discord not answering (the network,
// the time, a 429 discordgo does not wait out, a 5xx) rather than an
// answer.
func noAnswer(err error) bool {
	if err == nil {
		return false
	}
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil {
		return re.Response.StatusCode == http.StatusTooManyRequests || re.Response.StatusCode >= 500
	}
	return true
}

// arrival is an event as read off the wire, before what only Discord
// may tell (settle).
type arrival struct {
	ev      bot.Incoming // all but SharedTeams, or a server channel's place
	channel string       // the channel it came from
	mention bool         // a server message: answered in a thread started from it, unless in one
	named   string       // the words a thread started from it is named after
}

// settle completes ar's event: a DM's SharedTeams, a server channel's
// chat and thread. With ask false it asks Discord nothing (errAsk when
// it would have to); a lookup Discord does not answer is an error
// wrapping errNoAnswer.
func (a *Adapter) settle(ctx context.Context, ar arrival, ask bool) (bot.Incoming, error) {
	ev := ar.ev
	if ev.DM {
		teams, err := a.sharedGuilds(ctx, ev.UserID, ask)
		if err != nil {
			return bot.Incoming{}, err
		}
		ev.SharedTeams = teams
		return ev, nil
	}
	chat, thread, err := a.place(ctx, ar.channel, ask)
	if err != nil {
		return bot.Incoming{}, err
	}
	ev.ChatID, ev.ThreadID = chat, thread
	if ar.mention {
		if thread == "" {
			ev.ThreadID = ev.MessageID // the thread the answer starts from this message
			a.nameThread(ev.MessageID, ar.named)
		} else {
			a.wroteIn(ev.MessageID, ar.channel) // the sign of life shows in the thread
		}
	}
	return ev, nil
}

// settleWaiting settles ar, asking Discord again while it does not
// answer (waits doubling from handleWait to handleWaitMax, as deliver's),
// until ctx ends.
func (a *Adapter) settleWaiting(ctx context.Context, ar arrival) (bot.Incoming, error) {
	wait := handleWait
	for {
		ev, err := a.settle(ctx, ar, true)
		if err == nil || ctx.Err() != nil {
			return ev, err
		}
		a.log.Warn("discord: Discord did not answer what an event needs; asking again", slog.String("event_id", ar.ev.EventID),
			slog.Any("err", err), slog.Duration("retry_in", wait))
		if serr := retry.Sleep(ctx, wait); serr != nil {
			return bot.Incoming{}, err
		}
		wait = min(2*wait, handleWaitMax)
	}
}

// place is where a server channel's events belong: a thread is its
// parent's chat and its own thread; any other channel is a chat. A
// thread is learnt from THREAD_CREATE, an interaction's channel,
// discordgo's state or, when ask is set, GET /channels/{id} (else
// errAsk). A channel Discord does not know (or will not show) is taken
// for a channel; one it does not answer about is an error wrapping
// errNoAnswer.
func (a *Adapter) place(ctx context.Context, channel string, ask bool) (chat, thread string, err error) {
	a.mu.Lock()
	parent, isThread := a.threads[channel]
	plain := a.plain[channel]
	a.mu.Unlock()
	switch {
	case isThread:
		return parent, channel, nil
	case plain:
		return channel, "", nil
	}
	var c *discordgo.Channel
	if a.sess != nil && a.sess.State != nil {
		c, _ = a.sess.State.Channel(channel)
	}
	if c == nil {
		if !ask {
			return "", "", errAsk
		}
		lctx, cancel := context.WithTimeout(ctx, lookupWithin)
		defer cancel()
		c, err = a.api.Channel(channel, discordgo.WithContext(lctx))
		if noAnswer(err) {
			return "", "", fmt.Errorf("discord: GET /channels/%s: %w: %w", channel, errNoAnswer, redact(err, a.cfg.Token))
		}
		if err != nil {
			a.log.Debug("discord: channel not looked up; taken for a channel", slog.String("channel_id", channel), slog.Any("err", redact(err, a.cfg.Token)))
		}
	}
	if c != nil && c.IsThread() && c.ParentID != "" {
		a.learnThread(channel, c.ParentID)
		return c.ParentID, channel, nil
	}
	a.mu.Lock()
	putBounded(a.plain, channel, true)
	a.mu.Unlock()
	return channel, "", nil
}

// wireChannel is the part of an interaction's channel the adapter
// reads: "channel: partial channel object, Channel that the interaction
// was sent from"
// (discord.com/developers/docs/interactions/receiving-and-responding#interaction-object).
// discordgo v0.29.0's Interaction has no such field, so it is read from
// the JSON again. Type is a pointer: a channel without one says nothing.
type wireChannel struct {
	ID       string                 `json:"id"`
	Type     *discordgo.ChannelType `json:"type"`
	ParentID string                 `json:"parent_id"`
}

// interactionChannel reads the channel of an interaction's JSON; nil
// when it has none.
func interactionChannel(raw []byte) *wireChannel {
	var v struct {
		Channel *wireChannel `json:"channel"`
	}
	if json.Unmarshal(raw, &v) != nil || v.Channel == nil || v.Channel.ID == "" || v.Channel.Type == nil {
		return nil
	}
	return v.Channel
}

// learnChannel keeps what an interaction's channel says of it: a
// thread's parent, or that a server channel is no thread.
func (a *Adapter) learnChannel(c *wireChannel) {
	if c == nil {
		return
	}
	ch := discordgo.Channel{ID: c.ID, Type: *c.Type, ParentID: c.ParentID}
	switch {
	case ch.IsThread() && c.ParentID != "":
		a.learnThread(c.ID, c.ParentID)
	case !ch.IsThread() && ch.Type != discordgo.ChannelTypeDM && ch.Type != discordgo.ChannelTypeGroupDM:
		a.mu.Lock()
		putBounded(a.plain, c.ID, true)
		a.mu.Unlock()
	}
}
