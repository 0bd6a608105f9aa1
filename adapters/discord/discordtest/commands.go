package discordtest

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Application commands
// (https://discord.com/developers/docs/interactions/application-commands):
// PUT /applications/{app}/commands overwrites the global commands,
// PUT /applications/{app}/guilds/{guild}/commands a guild's; a command
// that keeps its name keeps its id.

type command struct {
	ID, GuildID string
	Type        int
	Name        string
	Description string
	Options     []option
	Version     string
}

type option struct {
	Type        int      `json:"type"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Required    bool     `json:"required,omitempty"`
	Options     []option `json:"options,omitempty"`
	Choices     []any    `json:"choices,omitempty"`
}

func (c *command) option(name string) *option {
	for i := range c.Options {
		if c.Options[i].Name == name {
			return &c.Options[i]
		}
	}
	return nil
}

// AppCommand is a registered application command.
type AppCommand struct {
	ID, GuildID, Name, Description string
	// Type is 1 (CHAT_INPUT, a slash command), 2 (USER) or 3 (MESSAGE).
	Type    int
	Options []AppOption
}

// AppOption is an option of a command.
type AppOption struct {
	Name, Description string
	Type              int
	Required          bool
}

// Commands returns the registered commands, global ones (GuildID "")
// first, each list in registration order.
func (s *Server) Commands() []AppCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []AppCommand
	add := func(cs []*command) {
		for _, c := range cs {
			ac := AppCommand{ID: c.ID, GuildID: c.GuildID, Name: c.Name, Description: c.Description, Type: c.Type}
			for _, o := range c.Options {
				ac.Options = append(ac.Options, AppOption{Name: o.Name, Description: o.Description, Type: o.Type, Required: o.Required})
			}
			out = append(out, ac)
		}
	}
	add(s.commands[""])
	for g, cs := range s.commands {
		if g != "" {
			add(cs)
		}
	}
	return out
}

func (s *Server) findCommandLocked(guildID, name string) *command {
	// A guild's own command first; global commands reach every guild
	// and DMs.
	for _, g := range []string{guildID, ""} {
		for _, c := range s.commands[g] {
			if c.Name == name && c.Type == 1 {
				return c
			}
		}
	}
	return nil
}

// nameRule is the naming rule of CHAT_INPUT commands and options:
// "^[-_'\p{L}\p{N}\p{sc=Deva}\p{sc=Thai}]{1,32}$", and "If there is a
// lowercase variant of any letters used, you must use those"
// (https://discord.com/developers/docs/interactions/application-commands#application-command-object-application-command-naming).
var nameRule = regexp.MustCompile(`^[-_'\p{L}\p{N}\p{Devanagari}\p{Thai}]{1,32}$`)

func checkName(at []string, name string) *apiError {
	if !nameRule.MatchString(name) || strings.ToLower(name) != name {
		return formError(append(at, "name"), "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid")
	}
	return nil
}

// checkDescription: CHAT_INPUT commands and options have a description
// of 1–100 characters
// (https://discord.com/developers/docs/interactions/application-commands#application-command-object-application-command-structure:
// "Description for CHAT_INPUT commands, 1-100 characters. Empty string
// for USER and MESSAGE commands").
func checkDescription(at []string, d string) *apiError {
	if n := utf8.RuneCountInString(d); n < 1 || n > 100 {
		return formError(append(at, "description"), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
	}
	return nil
}

type commandBody struct {
	ID          string   `json:"id"`
	Type        int      `json:"type"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Options     []option `json:"options"`
}

// checkCommand applies the command object's rules: name and
// description, at most 25 options, options named as commands are, with
// required options before optional ones.
func checkCommand(at []string, b *commandBody) *apiError {
	if b.Type == 0 {
		b.Type = 1
	}
	switch b.Type {
	case 1:
		if err := checkName(at, b.Name); err != nil {
			return err
		}
		if err := checkDescription(at, b.Description); err != nil {
			return err
		}
	case 2, 3, 4:
		// USER and MESSAGE commands: 1–32 characters, any case, no
		// description (application command structure and naming, cited
		// at checkDescription and nameRule).
		if n := utf8.RuneCountInString(b.Name); n < 1 || n > 32 {
			return formError(append(at, "name"), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 32 in length.")
		}
		if b.Description != "" {
			return formError(append(at, "description"), "APPLICATION_COMMAND_DESCRIPTION_INVALID", "Context menu commands cannot have description")
		}
	default:
		return formError(append(at, "type"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3, 4}.")
	}
	// "Parameters for the command, max of 25" (application command
	// structure); required options come before optional ones
	// (https://discord.com/developers/docs/interactions/application-commands#application-command-object-application-command-option-structure).
	if len(b.Options) > 25 {
		return formError(append(at, "options"), "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
	}
	optional := false
	for i, o := range b.Options {
		oat := append(append([]string(nil), at...), "options", strconv.Itoa(i))
		if err := checkName(oat, o.Name); err != nil {
			return err
		}
		if err := checkDescription(oat, o.Description); err != nil {
			return err
		}
		if o.Type < 1 || o.Type > 11 {
			return formError(append(oat, "type"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}.")
		}
		if o.Required && optional {
			return formError(append(at, "options"), "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID", "Required options must be placed before non-required options")
		}
		optional = optional || !o.Required
	}
	return nil
}

func (s *Server) commandJSON(c *command) map[string]any {
	out := map[string]any{
		"id": c.ID, "application_id": s.appID, "version": c.Version, "type": c.Type, "name": c.Name,
		"description": c.Description, "default_member_permissions": nil, "nsfw": false, "contexts": nil,
		"integration_types": []int{0},
	}
	if c.GuildID != "" {
		out["guild_id"] = c.GuildID
	}
	if len(c.Options) > 0 {
		out["options"] = c.Options
	}
	return out
}

func (s *Server) commandsJSONLocked(guildID string) []any {
	out := []any{}
	for _, c := range s.commands[guildID] {
		out = append(out, s.commandJSON(c))
	}
	return out
}

func (s *Server) getCommands(c *call) (int, any) {
	if c.p["app"] != s.appID {
		return 0, errMissingAccess
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return 200, s.commandsJSONLocked(c.p["guild"])
}

// putCommands is Bulk Overwrite
// (https://discord.com/developers/docs/interactions/application-commands#bulk-overwrite-global-application-commands):
// the list replaces every command of its scope; at most 100 CHAT_INPUT
// commands, names unique per type.
func (s *Server) putCommands(c *call) (int, any) {
	if c.p["app"] != s.appID {
		return 0, errMissingAccess
	}
	var list []commandBody
	if err := json.Unmarshal(c.body, &list); err != nil {
		return 0, errInvalidJSON
	}
	seen := map[string]bool{}
	chat := 0
	for i := range list {
		at := []string{strconv.Itoa(i)}
		if err := checkCommand(at, &list[i]); err != nil {
			return 0, err
		}
		key := strconv.Itoa(list[i].Type) + "/" + list[i].Name
		if seen[key] {
			return 0, formError(at, "APPLICATION_COMMANDS_DUPLICATE_NAME", "Application command names must be unique")
		}
		seen[key] = true
		if list[i].Type == 1 {
			chat++
		}
	}
	if chat > 100 {
		return 0, formError(nil, "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	guild := c.p["guild"]
	old := s.commands[guild]
	var next []*command
	for _, b := range list {
		cmd := &command{ID: s.newID(), GuildID: guild, Type: b.Type, Name: b.Name, Description: b.Description, Options: b.Options}
		for _, o := range old {
			if o.Name == b.Name && o.Type == b.Type {
				cmd.ID = o.ID
			}
		}
		cmd.Version = s.newID()
		next = append(next, cmd)
	}
	s.commands[guild] = next
	return 200, s.commandsJSONLocked(guild)
}

// postCommand creates or, when the name exists, replaces one command
// (https://discord.com/developers/docs/interactions/application-commands#create-global-application-command):
// 201 when new, 200 when it replaced one.
func (s *Server) postCommand(c *call) (int, any) {
	if c.p["app"] != s.appID {
		return 0, errMissingAccess
	}
	var b commandBody
	if err := c.decode(&b); err != nil {
		return 0, err
	}
	if err := checkCommand(nil, &b); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	guild := c.p["guild"]
	cmd := &command{ID: s.newID(), GuildID: guild, Type: b.Type, Name: b.Name, Description: b.Description, Options: b.Options, Version: s.newID()}
	for i, o := range s.commands[guild] {
		if o.Name == b.Name && o.Type == b.Type {
			cmd.ID = o.ID
			s.commands[guild][i] = cmd
			return 200, s.commandJSON(cmd)
		}
	}
	s.commands[guild] = append(s.commands[guild], cmd)
	return 201, s.commandJSON(cmd)
}
