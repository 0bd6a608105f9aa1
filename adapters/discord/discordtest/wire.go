package discordtest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The JSON shapes below follow Discord's object pages: the user object
// (https://discord.com/developers/docs/resources/user#user-object), the
// channel object (https://discord.com/developers/docs/resources/channel#channel-object)
// and the message object (https://discord.com/developers/docs/resources/message#message-object).

// timestamp is ISO8601 as Discord writes it ("2026-11-28T20:45:18.123000+00:00").
func timestamp(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000+00:00")
}

func (s *Server) userJSONLocked(id string) map[string]any {
	u := s.userLocked(id)
	out := map[string]any{
		"id": u.ID, "username": u.Name, "discriminator": "0", "global_name": u.Name,
		"avatar": nil, "public_flags": 0,
	}
	if u.Bot {
		out["bot"] = true
		out["global_name"] = nil
	}
	return out
}

// memberJSONLocked is a guild member as an interaction carries it
// (https://discord.com/developers/docs/resources/guild#guild-member-object).
// permissions is a string: discordgo reads it with ",string"
// (discordgo structs.go, Member.Permissions).
func (s *Server) memberJSONLocked(id string, withUser bool) map[string]any {
	out := map[string]any{
		"roles": []string{}, "joined_at": timestamp(time.Now().Add(-time.Hour)),
		"deaf": false, "mute": false, "flags": 0, "nick": nil, "pending": false,
		"permissions": "2248473465835073",
	}
	if withUser {
		out["user"] = s.userJSONLocked(id)
	}
	return out
}

func (s *Server) channelJSONLocked(c *channel) map[string]any {
	out := map[string]any{"id": c.ID, "type": c.Type, "flags": 0, "last_message_id": nil}
	if n := len(c.msgs); n > 0 {
		out["last_message_id"] = c.msgs[n-1].ID
	}
	switch c.Type {
	case channelDM:
		out["recipients"] = []any{s.userJSONLocked(c.Recipient)}
	case channelPublicThread:
		out["guild_id"] = c.GuildID
		out["parent_id"] = c.ParentID
		out["owner_id"] = c.OwnerID
		out["name"] = c.Name
		out["rate_limit_per_user"] = 0
		out["message_count"] = len(c.msgs)
		out["member_count"] = 1
		out["total_message_sent"] = len(c.msgs)
		out["thread_metadata"] = map[string]any{
			"archived": false, "auto_archive_duration": 1440, "locked": false,
			"archive_timestamp": timestamp(c.Created), "create_timestamp": timestamp(c.Created),
		}
	default:
		out["guild_id"] = c.GuildID
		out["name"] = c.Name
		out["position"] = 0
		out["parent_id"] = nil
		out["nsfw"] = false
		out["topic"] = nil
		out["rate_limit_per_user"] = 0
		out["permission_overwrites"] = []any{}
	}
	return out
}

// messageJSONLocked renders a message; content false empties what the
// MESSAGE_CONTENT intent guards (content, embeds, attachments,
// components: https://discord.com/developers/docs/events/gateway#message-content-intent).
func (s *Server) messageJSONLocked(m *message, content bool) map[string]any {
	ments := []any{}
	for _, id := range m.Mentions {
		ments = append(ments, s.userJSONLocked(id))
	}
	out := map[string]any{
		"id": m.ID, "channel_id": m.ChannelID, "author": s.userJSONLocked(m.AuthorID),
		"content": "", "timestamp": timestamp(m.Created), "edited_timestamp": nil,
		"tts": false, "mention_everyone": false, "mentions": ments, "mention_roles": []string{},
		"attachments": []any{}, "embeds": []any{}, "components": []any{}, "pinned": false,
		"type": 0, "flags": m.Flags,
	}
	if m.GuildID != "" {
		out["guild_id"] = m.GuildID
	}
	if !m.Edited.IsZero() {
		out["edited_timestamp"] = timestamp(m.Edited)
	}
	if len(m.Nonce) > 0 {
		out["nonce"] = m.Nonce
	}
	if m.Reference != "" {
		// type 19 is REPLY (https://discord.com/developers/docs/resources/message#message-object-message-types).
		out["type"] = 19
		out["message_reference"] = map[string]any{"type": 0, "message_id": m.Reference, "channel_id": m.ChannelID, "guild_id": m.GuildID}
		if ch, ok := s.channels[m.ChannelID]; ok {
			if ref := findMessage(ch, m.Reference); ref != nil && ref != m {
				rm := s.messageJSONLocked(ref, content)
				delete(rm, "referenced_message") // one level only
				out["referenced_message"] = rm
			}
		}
	}
	if m.Interaction != "" {
		if in, ok := s.interactions[m.Interaction]; ok {
			out["application_id"] = s.appID
			out["webhook_id"] = s.appID
			out["interaction_metadata"] = map[string]any{"id": in.ID, "type": in.Type, "user": s.userJSONLocked(in.UserID)}
			if in.Type == interactionCommand {
				out["type"] = 20 // CHAT_INPUT_COMMAND
			}
		}
	}
	if content {
		out["content"] = m.Content
		if len(m.Embeds) > 0 {
			out["embeds"] = m.Embeds
		}
		if len(m.Components) > 0 {
			out["components"] = m.Components
		}
		atts := []any{}
		for _, a := range m.Attachments {
			atts = append(atts, s.attachmentJSON(m.ChannelID, a))
		}
		out["attachments"] = atts
	}
	return out
}

// component is a message component as posted
// (https://discord.com/developers/docs/components/reference).
type component struct {
	Type       int             `json:"type"`
	ID         int             `json:"id,omitempty"`
	CustomID   string          `json:"custom_id,omitempty"`
	Label      string          `json:"label,omitempty"`
	Style      int             `json:"style,omitempty"`
	URL        string          `json:"url,omitempty"`
	Disabled   bool            `json:"disabled,omitempty"`
	Emoji      json.RawMessage `json:"emoji,omitempty"`
	SKUID      string          `json:"sku_id,omitempty"`
	Options    json.RawMessage `json:"options,omitempty"`
	Components []component     `json:"components,omitempty"`
	// Placeholder, min/max values of select menus.
	Placeholder string `json:"placeholder,omitempty"`
	MinValues   *int   `json:"min_values,omitempty"`
	MaxValues   *int   `json:"max_values,omitempty"`
}

// Component types (https://discord.com/developers/docs/components/reference#component-object-component-types).
const (
	componentActionRow    = 1
	componentButton       = 2
	componentStringSelect = 3
	componentChannelMenu  = 8
	buttonLink            = 5
	buttonPremium         = 6
)

// attachmentJSON is the attachment object
// (https://discord.com/developers/docs/resources/message#attachment-object):
// its url is on the CDN, signed with ex/is/hm parameters
// (https://discord.com/developers/docs/reference#signed-attachment-cdn-urls).
func (s *Server) attachmentJSON(channelID string, a *attachment) map[string]any {
	path := "/attachments/" + channelID + "/" + a.ID + "/" + url.PathEscape(a.Name)
	ex := strconv.FormatInt(time.Now().Add(24*time.Hour).Unix(), 16)
	is := strconv.FormatInt(time.Now().Unix(), 16)
	q := "?ex=" + ex + "&is=" + is + "&hm=" + randomHex(32) + "&"
	out := map[string]any{
		"id": a.ID, "filename": a.Name, "size": len(a.Data),
		"url": s.cdn + path + q, "proxy_url": s.mediaProxy + path + q,
	}
	if a.ContentType != "" {
		out["content_type"] = a.ContentType
	}
	return out
}

// serveAttachment serves a file from the CDN paths the attachment
// object names; the CDN needs no token.
func (s *Server) serveAttachment(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/attachments/"), "/")
	s.mu.Lock()
	var a *attachment
	if len(parts) == 3 {
		a = s.files[parts[1]]
	}
	s.mu.Unlock()
	if a == nil || r.Method != http.MethodGet {
		http.Error(w, "This content is no longer available.", http.StatusNotFound)
		return
	}
	if a.ContentType != "" {
		w.Header().Set("Content-Type", a.ContentType)
	}
	_, _ = w.Write(a.Data)
}

// guildJSONLocked is GUILD_CREATE's guild: the guild object with its
// channels and threads
// (https://discord.com/developers/docs/events/gateway-events#guild-create).
func (s *Server) guildJSONLocked(id string) map[string]any {
	channels, threads := []any{}, []any{}
	for _, c := range s.channels {
		if c.GuildID != id {
			continue
		}
		if c.Type == channelPublicThread {
			threads = append(threads, s.channelJSONLocked(c))
		} else {
			channels = append(channels, s.channelJSONLocked(c))
		}
	}
	return map[string]any{
		"id": id, "name": "guild " + id, "icon": nil, "owner_id": "1", "afk_channel_id": nil,
		"afk_timeout": 300, "verification_level": 0, "default_message_notifications": 0,
		"explicit_content_filter": 0, "roles": []any{}, "emojis": []any{}, "stickers": []any{}, "features": []string{},
		"mfa_level": 0, "system_channel_id": nil, "system_channel_flags": 0, "rules_channel_id": nil,
		"premium_tier": 0, "preferred_locale": "en-US", "nsfw_level": 0, "premium_progress_bar_enabled": false,
		"joined_at": timestamp(time.Now().Add(-time.Hour)), "large": false, "unavailable": false, "member_count": 2,
		"voice_states": []any{}, "members": []any{}, "channels": channels, "threads": threads,
		"presences": []any{}, "stage_instances": []any{}, "guild_scheduled_events": []any{},
	}
}
