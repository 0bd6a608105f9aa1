package slack

import (
	"errors"
	"regexp"
	"strings"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.AllowRule = AllowedID

var (
	// memberID is a Slack member id: U… or, on Enterprise Grid, W…
	// (api.slack.com/changelog/2016-08-11-user-id-format-changes).
	memberID = regexp.MustCompile(`^[UW][A-Z0-9]+$`)
	// teamID is a Slack workspace id: T… (the team_id of every event,
	// docs.slack.dev/apis/events-api/#callback-field).
	teamID = regexp.MustCompile(`^T[A-Z0-9]+$`)
)

// senderTeam is the team of the person who wrote (Incoming.TeamID, what a
// slack:team:T… entry matches): their own team as the event names it
// (user_team, else the message's team; a button press's user.team_id),
// not the envelope's team_id, the workspace the event was delivered to.
// In a Slack Connect channel the two differ for a member of the other
// organisation ("user_team" and "source_team" are set "when the message
// comes from a channel that is shared between workspaces", slack-go
// slackevents.MessageEvent; docs.slack.dev/apis/slack-connect/), and the
// host workspace's entry must not admit them. An event naming no team
// comes from the workspace itself: envelope is its team.
func senderTeam(own, envelope string) string {
	if own != "" {
		return own
	}
	return envelope
}

// Workspace is the word a TIDYBOT_ALLOWED_USERS entry uses for a whole
// Slack workspace: slack:team:T… (Slack's API calls it a team), the form
// package bot matches.
const Workspace = "team"

// AllowedID is Slack's rule for the id of a TIDYBOT_ALLOWED_USERS entry:
// a member id ("slack:U0ABC123"), or in team mode a whole workspace
// ("slack:team:T0ABC123"; the adapter sets Incoming.TeamID to the
// sender's own team, see senderTeam).
func AllowedID(id string, team bool) error {
	if ws, ok := strings.CutPrefix(id, "team:"); ok {
		if !teamID.MatchString(ws) {
			return errors.New("can never match: Slack workspace ids look like T0ABC123 (slack:team:T0ABC123)")
		}
		if !team {
			return errors.New("is for team mode only (TODOIST_CLIENT_ID and TODOIST_CLIENT_SECRET): in personal mode the whole workspace would use your one Todoist; list member ids instead")
		}
		return nil
	}
	if !memberID.MatchString(id) {
		return errors.New("can never match: Slack member ids look like U0ABC123 or W0ABC123 (profile → ⋮ → Copy member ID)")
	}
	return nil
}
