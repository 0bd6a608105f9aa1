package discord

import (
	"errors"
	"regexp"
	"strings"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.AllowRule = AllowedID

// snowflake is a Discord id: a number of up to 20 digits
// (discord.com/developers/docs/reference#snowflakes); a user name is no
// id.
var snowflake = regexp.MustCompile(`^[0-9]{15,20}$`)

// Workspace is the word a TIDYBOT_ALLOWED_USERS entry uses for a whole
// Discord server: discord:guild:SERVER_ID (a server is a guild in
// Discord's API, discord.com/developers/docs/resources/guild).
// internal/config reads such an entry as discord:team:SERVER_ID, the form
// package bot matches for every platform's workspace (the adapter sets
// Incoming.TeamID to the server's id).
const Workspace = "guild"

// AllowedID is Discord's rule for the id of a TIDYBOT_ALLOWED_USERS
// entry, as package bot matches it: a user id
// ("discord:123456789012345678"), or in team mode a whole server (written
// discord:guild:SERVER_ID, given here as "team:SERVER_ID": its members,
// in its channels) or everyone ("discord:*").
func AllowedID(id string, team bool) error {
	if id == "*" {
		if !team {
			return errors.New("is for team mode only (TODOIST_CLIENT_ID and TODOIST_CLIENT_SECRET), where each person uses their own Todoist")
		}
		return nil
	}
	if guild, ok := strings.CutPrefix(id, "team:"); ok {
		if !snowflake.MatchString(guild) {
			return errors.New("can never match: Discord server ids are numbers of 15 to 20 digits (discord:" + Workspace + ":123456789012345678; Server Settings → Widget → Server ID, or Copy Server ID in developer mode)")
		}
		if !team {
			return errors.New("is for team mode only (TODOIST_CLIENT_ID and TODOIST_CLIENT_SECRET): in personal mode the whole server would use your one Todoist; list user ids instead")
		}
		return nil
	}
	if strings.Contains(id, ":") {
		return errors.New("can never match: a whole Discord server is written discord:" + Workspace + ":SERVER_ID (team mode), a person discord:USER_ID")
	}
	if !snowflake.MatchString(id) {
		return errors.New("can never match: Discord user ids are numbers of 15 to 20 digits (discord:123456789012345678, not a user name; User Settings → Advanced → Developer Mode, then right-click the person → Copy User ID); the bot tells an unknown user their id")
	}
	return nil
}
