package discord

import (
	"context"
	"fmt"
	"regexp"

	"github.com/bwmarrin/discordgo"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/utf16text"
)

// optionText is the one option every slash command takes: the words
// after it (/settings timezone Europe/Berlin), optional.
const optionText = "text"

// commandName is Discord's rule for a slash command's name: 1 to 32
// lowercase letters, digits, "-" or "_"
// (discord.com/developers/docs/interactions/application-commands#application-command-object-application-command-naming).
// Hyphens are allowed, so the bot's names are Discord's as they are.
var commandName = regexp.MustCompile(`^[-_\p{Ll}\p{N}]{1,32}$`)

// CommandName implements bot.CommandNamer: /tidy-inbox is registered and
// typed as it is.
func (a *Adapter) CommandName(name string) string { return "/" + name }

// ApplicationCommands are the bot's commands as registered with Discord
// (chat input commands, each with its help line, at most 100
// characters, and an optional text option). team adds team mode's
// (/connect, /disconnect).
func ApplicationCommands(team bool) ([]*discordgo.ApplicationCommand, error) {
	var out []*discordgo.ApplicationCommand
	for _, c := range bot.Commands(team) {
		if !commandName.MatchString(c.Name) {
			return nil, fmt.Errorf("discord: command %q is no Discord command name (lowercase letters, digits, - and _, at most 32)", c.Name)
		}
		out = append(out, &discordgo.ApplicationCommand{
			Name: c.Name, Type: discordgo.ChatApplicationCommand, Description: utf16text.Clip(c.Menu(), 100),
			Options: []*discordgo.ApplicationCommandOption{{
				Type: discordgo.ApplicationCommandOptionString, Name: optionText, Description: "What to add (optional)", Required: false,
			}},
		})
	}
	return out, nil
}

// Register registers the slash commands (PUT
// /applications/{id}/commands, or the server's with DISCORD_GUILD_ID,
// which shows them at once), replacing any the application had. A
// network failure is an agent.ErrUnreachable (Run waits it out).
func (a *Adapter) Register(ctx context.Context) error {
	cmds, err := ApplicationCommands(a.cfg.Team)
	if err != nil {
		return err
	}
	app := a.appIDNow()
	bucket := discordgo.EndpointApplicationGlobalCommands(app)
	if a.cfg.GuildID != "" {
		bucket = discordgo.EndpointApplicationGuildCommands(app, a.cfg.GuildID)
	}
	var last error
	err = a.waiting(ctx, bucket, "register commands", func() error {
		_, last = a.api.ApplicationCommandBulkOverwrite(app, a.cfg.GuildID, cmds, discordgo.WithContext(ctx))
		return last
	})
	if err != nil {
		if u := a.unreached(last); u != nil {
			return fmt.Errorf("discord: register commands: %w", u)
		}
	}
	return err
}
