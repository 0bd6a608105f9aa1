package discord

import (
	"context"
	"log/slog"
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
// look a server every ten minutes; a failed look is not kept.

// membersFor is how long a person's servers are remembered.
const membersFor = 10 * time.Minute

// shared remembers the servers people share with the bot.
type shared struct {
	mu    sync.Mutex
	users map[string]sharedEntry
}

type sharedEntry struct {
	guilds []string
	until  time.Time
}

// sharedGuilds is the servers user shares with the bot; only in team
// mode (personal mode allows people one by one).
func (a *Adapter) sharedGuilds(ctx context.Context, user string) []string {
	if !a.cfg.Team || a.sess == nil || a.sess.State == nil {
		return nil
	}
	now := time.Now()
	a.shared.mu.Lock()
	if e, ok := a.shared.users[user]; ok && now.Before(e.until) {
		a.shared.mu.Unlock()
		return e.guilds
	}
	a.shared.mu.Unlock()
	a.sess.State.RLock()
	var guilds []string
	for _, g := range a.sess.State.Guilds {
		guilds = append(guilds, g.ID)
	}
	a.sess.State.RUnlock()
	var in []string
	complete := true
	for _, g := range guilds {
		if m, err := a.sess.State.Member(g, user); err == nil && m != nil {
			in = append(in, g)
			continue
		}
		m, err := a.api.GuildMember(g, user, discordgo.WithContext(ctx))
		switch {
		case err == nil && m != nil:
			in = append(in, g)
		case restCode(err) == codeUnknownMember || restCode(err) == codeUnknownGuild:
		default:
			complete = false
			a.log.Warn("discord: could not ask whether a DM's sender is in a server", slog.String("guild_id", g), slog.String("user_id", user), slog.Any("err", redact(err, a.cfg.Token)))
		}
	}
	if complete {
		a.shared.mu.Lock()
		if a.shared.users == nil || len(a.shared.users) > 10_000 {
			a.shared.users = map[string]sharedEntry{}
		}
		a.shared.users[user] = sharedEntry{guilds: in, until: now.Add(membersFor)}
		a.shared.mu.Unlock()
	}
	return in
}

// Discord's JSON error codes for a member or server that is not there
// (discord.com/developers/docs/topics/opcodes-and-status-codes#json-json-error-codes).
const (
	codeUnknownGuild  = 10004
	codeUnknownMember = 10007
)
