package discord

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
)

// A direct message carries no server, yet in team mode a whole server
// is allowed (discord:team:SERVER_ID): its members are told to send
// /connect in a DM. So for a DM the adapter tells the bot the servers
// its sender shares with the bot (bot.Incoming.SharedTeams), and the
// bot's one allowlist rule decides. The bot's servers are the gateway's
// (GUILD_CREATE, the GUILDS intent); membership is asked with GET
// /guilds/{guild.id}/members/{user.id}
// (discord.com/developers/docs/resources/guild#get-guild-member), which
// needs no privileged intent: 10007 Unknown Member says no. What it
// learnt of a person is kept for membersFor, so a conversation costs one
// look a server every ten minutes. The looks are made off the gateway's
// reader (lookups.go): in the DM's lane for a message, after the
// deferred response for an interaction.

// membersFor is how long a person's servers are taken as known without
// asking again. What was learnt is kept longer (until the map is
// full): when Discord does not answer a later look, it is what the
// adapter goes by.
const membersFor = 10 * time.Minute

// shared remembers the servers people share with the bot.
type shared struct {
	mu    sync.Mutex // protects users
	users map[string]sharedEntry
}

type sharedEntry struct {
	guilds []string
	until  time.Time // fresh until then; kept after it for when Discord does not answer
}

// sharedGuilds is the servers user shares with the bot; only in team
// mode (personal mode allows people one by one). Asked within
// membersFor of the last complete answer, it asks Discord nothing;
// otherwise each server it is not sure of is asked (each call bounded
// by lookupWithin) unless ask is false (then errAsk). When Discord does
// not answer (the network, a 429, a 5xx, the time) the servers learnt
// before stand in; a person of whom nothing was learnt is not known
// (an error wrapping errNoAnswer): the caller waits and asks again,
// since telling a member they are a stranger is worse than a late
// answer.
func (a *Adapter) sharedGuilds(ctx context.Context, user string, ask bool) ([]string, error) {
	if !a.cfg.Team || a.sess == nil || a.sess.State == nil {
		return nil, nil
	}
	now := a.cfg.Now()
	a.shared.mu.Lock()
	e, learnt := a.shared.users[user]
	a.shared.mu.Unlock()
	if learnt && now.Before(e.until) {
		return e.guilds, nil
	}
	a.sess.State.RLock()
	var guilds []string
	for _, g := range a.sess.State.Guilds {
		guilds = append(guilds, g.ID)
	}
	a.sess.State.RUnlock()
	var in, unsure []string
	for _, g := range guilds {
		if m, err := a.sess.State.Member(g, user); err == nil && m != nil {
			in = append(in, g)
			continue
		}
		unsure = append(unsure, g)
	}
	if len(unsure) > 0 && !ask {
		return nil, errAsk
	}
	var failed error
	var unanswered []string
	for _, g := range unsure {
		lctx, cancel := context.WithTimeout(ctx, lookupWithin)
		m, err := a.api.GuildMember(g, user, discordgo.WithContext(lctx))
		cancel()
		switch {
		case err == nil && m != nil:
			in = append(in, g)
		case restCode(err) == codeUnknownMember || restCode(err) == codeUnknownGuild:
		case noAnswer(err):
			unanswered = append(unanswered, g)
			failed = fmt.Errorf("discord: GET /guilds/%s/members/%s: %w: %w", g, user, errNoAnswer, redact(err, a.cfg.Token))
		default: // an answer that says nothing of membership: taken for no
			a.log.Warn("discord: could not ask whether a DM's sender is in a server", slog.String("guild_id", g), slog.String("user_id", user), slog.Any("err", redact(err, a.cfg.Token)))
		}
	}
	if failed != nil {
		if !learnt {
			return nil, failed
		}
		a.log.Warn("discord: Discord did not say which servers a DM's sender is in; going by what it said before", slog.String("user_id", user), slog.Any("err", failed))
		for _, g := range e.guilds {
			if slices.Contains(unanswered, g) {
				in = append(in, g)
			}
		}
		return in, nil
	}
	a.shared.mu.Lock()
	if a.shared.users == nil || len(a.shared.users) > 10_000 {
		a.shared.users = map[string]sharedEntry{}
	}
	a.shared.users[user] = sharedEntry{guilds: in, until: now.Add(membersFor)}
	a.shared.mu.Unlock()
	return in, nil
}

// Discord's JSON error codes for a member or server that is not there
// (discord.com/developers/docs/topics/opcodes-and-status-codes#json-json-error-codes).
const (
	codeUnknownGuild  = 10004
	codeUnknownMember = 10007
)
