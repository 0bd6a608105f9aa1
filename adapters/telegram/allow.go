package telegram

import (
	"errors"
	"regexp"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.AllowRule = AllowedID

// userID is a Telegram user id: a positive integer
// (core.telegram.org/bots/api#user); @usernames are not ids.
var userID = regexp.MustCompile(`^[0-9]+$`)

// AllowedID is Telegram's rule for the id of a TIDYBOT_ALLOWED_USERS
// entry: a numeric user id ("telegram:123456"), or in team mode "*"
// (everyone on Telegram, each with their own Todoist).
func AllowedID(id string, team bool) error {
	switch {
	case id == "*" && team:
		return nil
	case id == "*":
		return errors.New("is for team mode only (TODOIST_CLIENT_ID and TODOIST_CLIENT_SECRET), where each person uses their own Todoist")
	case !userID.MatchString(id):
		return errors.New("can never match: Telegram user ids are numeric (e.g. telegram:123456, not a @username); the bot tells an unknown user their id")
	}
	return nil
}
