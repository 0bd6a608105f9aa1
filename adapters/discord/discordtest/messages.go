package discordtest

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxContent is the longest message content, in characters
// (https://discord.com/developers/docs/resources/message#create-message:
// "content: Message contents (up to 2000 characters)"), counted as code
// points: "the API calculates length based on the number of codepoints
// in the string" (a Discord engineer,
// https://github.com/discord/discord-api-docs/issues/1315).
const maxContent = 2000

// nonceWindow is how long enforce_nonce remembers a nonce: Discord says
// "in the past few minutes"
// (https://discord.com/developers/docs/resources/message#create-message-jsonform-params);
// the fake takes five.
const nonceWindow = 5 * time.Minute

// settableFlags are the flags a new message may carry: "only
// SUPPRESS_EMBEDS, SUPPRESS_NOTIFICATIONS, IS_VOICE_MESSAGE, and
// IS_COMPONENTS_V2 can be set" (Create Message); the fake drops the
// others (EPHEMERAL is for interaction answers only).
const settableFlags = 1<<2 | 1<<12 | 1<<13 | 1<<15

// messageBody is what Create Message and Edit Message take
// (https://discord.com/developers/docs/resources/message#create-message-jsonform-params).
type messageBody struct {
	Content          json.RawMessage  `json:"content"`
	Embeds           json.RawMessage  `json:"embeds"`
	Components       json.RawMessage  `json:"components"`
	StickerIDs       []string         `json:"sticker_ids"`
	Poll             json.RawMessage  `json:"poll"`
	Flags            int              `json:"flags"`
	Nonce            json.RawMessage  `json:"nonce"`
	EnforceNonce     bool             `json:"enforce_nonce"`
	AllowedMentions  *allowedMentions `json:"allowed_mentions"`
	MessageReference *struct {
		MessageID       string `json:"message_id"`
		FailIfNotExists *bool  `json:"fail_if_not_exists"`
	} `json:"message_reference"`
}

// parsed is a message body checked against Discord's limits.
type parsed struct {
	content       *string // nil: absent or null
	components    []component
	hasComponents bool // present (an empty list clears them on edit)
	embeds        json.RawMessage
	hasEmbeds     bool
	pings         []string // what content notifies, allowed_mentions applied
}

// allowedMentions is the allowed_mentions object
// (https://discord.com/developers/docs/resources/message#allowed-mentions-object).
type allowedMentions struct {
	Parse       []string `json:"parse"`
	Roles       []string `json:"roles"`
	Users       []string `json:"users"`
	RepliedUser bool     `json:"replied_user"`
}

// pingsOf is what a message's content notifies: "By default [without
// allowed_mentions] ... the content will be parsed for user, role and
// everyone mentions"; with it, only the types in parse, and the users
// and roles listed (Allowed Mentions Object, the page above). A ping is
// "@everyone", "@here", "<@id>" or "<@&id>".
func pingsOf(content string, am *allowedMentions) []string {
	allowed := func(kind, id string) bool {
		if am == nil {
			return true
		}
		switch kind {
		case "users":
			if slices.Contains(am.Users, id) {
				return true
			}
		case "roles":
			if slices.Contains(am.Roles, id) {
				return true
			}
		}
		return slices.Contains(am.Parse, kind)
	}
	var out []string
	for _, e := range []string{"@everyone", "@here"} {
		if strings.Contains(content, e) && allowed("everyone", "") {
			out = append(out, e)
		}
	}
	for rest := content; ; {
		i := strings.Index(rest, "<@")
		if i < 0 {
			break
		}
		rest = rest[i+2:]
		kind := "users"
		switch {
		case strings.HasPrefix(rest, "&"):
			kind, rest = "roles", rest[1:]
		case strings.HasPrefix(rest, "!"):
			rest = rest[1:]
		}
		j := strings.IndexByte(rest, '>')
		if j <= 0 || strings.Trim(rest[:j], "0123456789") != "" {
			continue
		}
		if id := rest[:j]; allowed(kind, id) {
			if kind == "roles" {
				out = append(out, "<@&"+id+">")
			} else {
				out = append(out, "<@"+id+">")
			}
		}
		rest = rest[j:]
	}
	return out
}

func present(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// message decodes and checks the message body a call carries (create,
// edit, follow-up and webhook edit all take the same body).
func (c *call) message() (*messageBody, *parsed, *apiError) {
	var body messageBody
	if err := c.decode(&body); err != nil {
		return nil, nil, err
	}
	p, err := parseMessage(&body)
	if err != nil {
		return nil, nil, err
	}
	return &body, p, nil
}

// parseMessage checks a message body: content length, components and
// embeds shapes.
func parseMessage(b *messageBody) (*parsed, *apiError) {
	p := &parsed{}
	if present(b.Content) {
		var text string
		if err := json.Unmarshal(b.Content, &text); err != nil {
			return nil, formError([]string{"content"}, "STRING_TYPE_CONVERT", "Could not interpret value as string.")
		}
		if utf8.RuneCountInString(text) > maxContent {
			return nil, formError([]string{"content"}, "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
		}
		p.content = &text
		p.pings = pingsOf(text, b.AllowedMentions)
	}
	if present(b.Components) {
		if err := json.Unmarshal(b.Components, &p.components); err != nil {
			return nil, formError([]string{"components"}, "LIST_TYPE_CONVERT", "Only iterables may be used in a ListType")
		}
		if err := checkComponents(p.components); err != nil {
			return nil, err
		}
		p.hasComponents = true
	}
	if present(b.Embeds) {
		var embeds []json.RawMessage
		if err := json.Unmarshal(b.Embeds, &embeds); err != nil {
			return nil, formError([]string{"embeds"}, "LIST_TYPE_CONVERT", "Only iterables may be used in a ListType")
		}
		// "Up to 10 rich embeds (up to 6000 characters)", Create Message.
		if len(embeds) > 10 {
			return nil, formError([]string{"embeds"}, "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length.")
		}
		p.hasEmbeds = true
		if len(embeds) > 0 {
			p.embeds = b.Embeds
		}
	}
	return p, nil
}

// checkComponents applies the limits of legacy message components
// (https://discord.com/developers/docs/components/reference#action-row,
// #button): at most 5 action rows, each holding 1 to 5 buttons or one
// select menu; a button other than a link has a custom_id of at most
// 100 characters, unique in the message; a label has at most 80.
func checkComponents(rows []component) *apiError {
	if len(rows) > 5 {
		return formError([]string{"components"}, "BASE_TYPE_MAX_LENGTH", "Must be 5 or fewer in length.")
	}
	seen := map[string]bool{}
	for i, row := range rows {
		at := []string{"components", strconv.Itoa(i)}
		if row.Type != componentActionRow {
			return formError(append(at, "type"), "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (1,).")
		}
		if len(row.Components) < 1 || len(row.Components) > 5 {
			return formError(append(at, "components"), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 5 in length.")
		}
		for j, c := range row.Components {
			cat := append(append([]string(nil), at...), "components", strconv.Itoa(j))
			switch {
			case c.Type == componentButton:
				if c.Style < 1 || c.Style > buttonPremium {
					return formError(append(cat, "style"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3, 4, 5, 6}.")
				}
				if utf8.RuneCountInString(c.Label) > 80 {
					return formError(append(cat, "label"), "BASE_TYPE_MAX_LENGTH", "Must be 80 or fewer in length.")
				}
				if c.Style == buttonLink {
					if c.URL == "" {
						return formError(append(cat, "url"), "BASE_TYPE_REQUIRED", "This field is required")
					}
					if c.CustomID != "" {
						return formError(append(cat, "custom_id"), "BUTTON_COMPONENT_LINK_CUSTOM_ID", "A link button cannot have a custom id")
					}
					continue
				}
				if c.Style == buttonPremium {
					continue
				}
			case c.Type == componentStringSelect || c.Type >= 5 && c.Type <= componentChannelMenu:
				if len(row.Components) != 1 {
					return formError(append(at, "components"), "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "The specified component exceeds the maximum width")
				}
			default:
				return formError(append(cat, "type"), "COMPONENT_TYPE_INVALID", "The specified component type is invalid in this context")
			}
			if c.CustomID == "" {
				return formError(append(cat, "custom_id"), "BASE_TYPE_REQUIRED", "This field is required")
			}
			if utf8.RuneCountInString(c.CustomID) > 100 {
				return formError(append(cat, "custom_id"), "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length.")
			}
			if seen[c.CustomID] {
				return formError(append(cat, "custom_id"), "COMPONENT_CUSTOM_ID_DUPLICATED", "Component custom id cannot be duplicated")
			}
			seen[c.CustomID] = true
		}
	}
	return nil
}

// checkNonce: "nonce: Can be used to verify a message was sent (up to
// 25 characters)", an integer or a string (Create Message).
func checkNonce(raw json.RawMessage) *apiError {
	if !present(raw) {
		return nil
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		if utf8.RuneCountInString(text) > 25 {
			return formError([]string{"nonce"}, "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
		}
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return formError([]string{"nonce"}, "NONCE_TYPE_INVALID", "Nonce must be an integer or a string")
	}
	return nil
}

// createMessage posts a message
// (https://discord.com/developers/docs/resources/message#create-message).
func (s *Server) createMessage(c *call) (int, any) {
	body, p, err := c.message()
	if err != nil {
		return 0, err
	}
	if err := checkNonce(body.Nonce); err != nil {
		return 0, err
	}
	// "When creating a message, apps must provide a value for at least
	// one of content, embeds, sticker_ids, components, files[n], or
	// poll" (Create Message); else 50006.
	if (p.content == nil || *p.content == "") && len(p.components) == 0 && len(p.embeds) == 0 &&
		len(body.StickerIDs) == 0 && len(c.files) == 0 && !present(body.Poll) {
		return 0, errEmptyMessage
	}
	s.mu.Lock()
	ch, ok := s.channels[c.p["channel"]]
	if !ok {
		s.mu.Unlock()
		return 0, errUnknownChannel
	}
	// enforce_nonce: "If true and nonce is present, it will be checked
	// for uniqueness in the past few minutes. If another message was
	// created by the same author with the same nonce, that message will
	// be returned and no new message will be created." (Create Message)
	if body.EnforceNonce && present(body.Nonce) {
		for _, m := range ch.msgs {
			if m.AuthorID == s.botID && !m.Deleted && bytes.Equal(m.Nonce, body.Nonce) && time.Since(m.Created) < nonceWindow {
				out := s.messageJSONLocked(m, true)
				s.mu.Unlock()
				return 200, out
			}
		}
	}
	m := &message{ID: s.newID(), ChannelID: ch.ID, GuildID: ch.GuildID, AuthorID: s.botID, Created: time.Now(),
		Components: p.components, Embeds: p.embeds, Attachments: s.keepFilesLocked(c.files), Flags: body.Flags & settableFlags}
	if p.content != nil {
		m.Content = *p.content
		m.Mentions = mentions(m.Content)
		m.Pings = p.pings
	}
	if present(body.Nonce) {
		m.Nonce = append(json.RawMessage(nil), body.Nonce...)
	}
	if ref := body.MessageReference; ref != nil && ref.MessageID != "" {
		if findMessage(ch, ref.MessageID) == nil && (ref.FailIfNotExists == nil || *ref.FailIfNotExists) {
			s.mu.Unlock()
			return 0, formError([]string{"message_reference"}, "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message")
		}
		m.Reference = ref.MessageID
	}
	ch.msgs = append(ch.msgs, m)
	out := s.messageJSONLocked(m, true)
	s.mu.Unlock()
	s.dispatchMessage(ch, m)
	return 200, out
}

func findMessage(ch *channel, id string) *message {
	for _, m := range ch.msgs {
		if m.ID == id && !m.Deleted {
			return m
		}
	}
	return nil
}

// lookupLocked finds a channel's message, or the error Discord answers.
func (s *Server) lookupLocked(channelID, messageID string) (*channel, *message, *apiError) {
	ch, ok := s.channels[channelID]
	if !ok {
		return nil, nil, errUnknownChannel
	}
	m := findMessage(ch, messageID)
	if m == nil {
		return ch, nil, errUnknownMessage
	}
	return ch, m, nil
}

// lockMessage takes s.mu and finds the channel and message a call's
// path names; on an error it releases s.mu.
func (s *Server) lockMessage(c *call) (*channel, *message, *apiError) {
	s.mu.Lock()
	ch, m, err := s.lookupLocked(c.p["channel"], c.p["message"])
	if err != nil {
		s.mu.Unlock()
	}
	return ch, m, err
}

func (s *Server) getMessage(c *call) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, m, err := s.lookupLocked(c.p["channel"], c.p["message"])
	if err != nil {
		return 0, err
	}
	return 200, s.messageJSONLocked(m, s.contentVisibleLocked(m))
}

// contentVisibleLocked says whether REST shows a message's content to
// the bot: the MESSAGE_CONTENT intent guards REST reads too, with the
// same exceptions (https://discord.com/developers/docs/events/gateway#message-content-intent).
func (s *Server) contentVisibleLocked(m *message) bool {
	if s.messageContent || m.AuthorID == s.botID || m.GuildID == "" {
		return true
	}
	for _, id := range m.Mentions {
		if id == s.botID {
			return true
		}
	}
	return false
}

// listMessages returns a channel's history, newest first, at most limit
// (1–100, 50 unless given) before, after or around a message id
// (https://discord.com/developers/docs/resources/message#get-channel-messages).
func (s *Server) listMessages(c *call) (int, any) {
	q := c.r.URL.Query()
	limit := 50
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return 0, formError([]string{"limit"}, "NUMBER_TYPE_MAX", "int value should be between 1 and 100.")
		}
		limit = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[c.p["channel"]]
	if !ok {
		return 0, errUnknownChannel
	}
	var live []*message // oldest first
	for _, m := range ch.msgs {
		if !m.Deleted {
			live = append(live, m)
		}
	}
	less := idLess
	var pick []*message
	switch {
	case q.Get("after") != "":
		for _, m := range live {
			if less(q.Get("after"), m.ID) {
				pick = append(pick, m)
			}
		}
		if len(pick) > limit {
			pick = pick[:limit] // the messages right after the id
		}
	case q.Get("around") != "":
		i := sort.Search(len(live), func(i int) bool { return !less(live[i].ID, q.Get("around")) })
		lo := max(0, i-limit/2)
		hi := min(len(live), lo+limit)
		pick = live[lo:hi]
	default:
		for _, m := range live {
			if b := q.Get("before"); b == "" || less(m.ID, b) {
				pick = append(pick, m)
			}
		}
		if len(pick) > limit {
			pick = pick[len(pick)-limit:]
		}
	}
	out := make([]any, 0, len(pick))
	for i := len(pick) - 1; i >= 0; i-- {
		out = append(out, s.messageJSONLocked(pick[i], s.contentVisibleLocked(pick[i])))
	}
	return 200, out
}

// idLess orders snowflakes as numbers.
func idLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// editMessage edits the bot's own message
// (https://discord.com/developers/docs/resources/message#edit-message):
// content, components and embeds given replace the old ones; a message
// of another author is 50005.
func (s *Server) editMessage(c *call) (int, any) {
	body, p, err := c.message()
	if err != nil {
		return 0, err
	}
	ch, m, aerr := s.lockMessage(c)
	if aerr != nil {
		return 0, aerr
	}
	if m.AuthorID != s.botID {
		s.mu.Unlock()
		return 0, errNotAuthor
	}
	if aerr := s.applyEditLocked(m, p, body.Content, c.files); aerr != nil {
		s.mu.Unlock()
		return 0, aerr
	}
	out := s.messageJSONLocked(m, true)
	s.mu.Unlock()
	s.dispatchUpdate(ch, m)
	return 200, out
}

// applyEditLocked changes a message; a message left with nothing to
// show is 50006, as a new one would be.
func (s *Server) applyEditLocked(m *message, p *parsed, rawContent json.RawMessage, files []*attachment) *apiError {
	content, components, embeds := m.Content, m.Components, m.Embeds
	if p.content != nil {
		content = *p.content
		m.Pings = p.pings
	} else if len(rawContent) > 0 { // "content": null clears it
		content = ""
	}
	if p.hasComponents {
		components = p.components
	}
	if p.hasEmbeds {
		embeds = p.embeds
	}
	if content == "" && len(components) == 0 && len(embeds) == 0 && len(m.Attachments)+len(files) == 0 {
		return errEmptyMessage
	}
	if content != m.Content {
		m.Edits = append(m.Edits, m.Content)
		m.Content = content
		m.Mentions = mentions(content)
	}
	m.Components, m.Embeds = components, embeds
	// Files sent with an edit are added to the message's.
	m.Attachments = append(m.Attachments, s.keepFilesLocked(files)...)
	m.Flags &^= flagLoading
	m.Edited = time.Now()
	return nil
}

// deleteMessage deletes the bot's own message: 204
// (https://discord.com/developers/docs/resources/message#delete-message);
// another's needs MANAGE_MESSAGES, which the fake's bot lacks (50013),
// and in a DM cannot be deleted at all (50003).
func (s *Server) deleteMessage(c *call) (int, any) {
	ch, m, err := s.lockMessage(c)
	if err != nil {
		return 0, err
	}
	if m.AuthorID != s.botID {
		s.mu.Unlock()
		if ch.Type == channelDM {
			// No one may delete another's message in a DM.
			return 0, &apiError{status: 403, Code: 50003, Message: "Cannot execute action on a DM channel"}
		}
		return 0, &apiError{status: 403, Code: 50013, Message: "Missing Permissions"}
	}
	m.Deleted = true
	s.mu.Unlock()
	s.dispatchDelete(ch, m)
	return 204, nil
}

// startThread starts a public thread from a message; the thread's id is
// the message's id
// (https://discord.com/developers/docs/resources/channel#start-thread-from-message:
// "The id of the created thread will be the same as the id of the
// source message").
func (s *Server) startThread(c *call) (int, any) {
	var body struct {
		Name                string `json:"name"`
		AutoArchiveDuration int    `json:"auto_archive_duration"`
	}
	if err := c.decode(&body); err != nil {
		return 0, err
	}
	if n := utf8.RuneCountInString(body.Name); n < 1 || n > 100 {
		return 0, formError([]string{"name"}, "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
	}
	switch body.AutoArchiveDuration {
	case 0, 60, 1440, 4320, 10080:
	default:
		return 0, formError([]string{"auto_archive_duration"}, "BASE_TYPE_CHOICES", "Value must be one of {60, 1440, 4320, 10080}.")
	}
	parent, m, err := s.lockMessage(c)
	if err != nil {
		return 0, err
	}
	// A thread from a message only in a server text channel: 50024 is
	// the fake's reading (Discord's documented code for an action on the
	// wrong channel type); the page names no code for it.
	if parent.Type != channelGuildText {
		s.mu.Unlock()
		return 0, &apiError{status: 400, Code: 50024, Message: "Cannot execute action on this channel type"}
	}
	if _, ok := s.channels[m.ID]; ok {
		s.mu.Unlock()
		return 0, errThreadExists
	}
	th := &channel{ID: m.ID, Type: channelPublicThread, GuildID: parent.GuildID, ParentID: parent.ID,
		Name: body.Name, OwnerID: s.botID, Created: time.Now()}
	s.channels[th.ID] = th
	s.threads = append(s.threads, th.ID)
	out := s.channelJSONLocked(th)
	s.mu.Unlock()
	s.dispatchThread(th)
	return 201, out
}

// Reactions are the emoji the bot put on a message.
func (s *Server) Reactions(channelID, messageID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reactions[channelID+"/"+messageID]...)
}

// addReaction: 204 (https://discord.com/developers/docs/resources/message#create-reaction).
func (s *Server) addReaction(c *call) (int, any) {
	return s.changeReactions(c, func(have []string, emoji string) []string {
		if slices.Contains(have, emoji) {
			return have
		}
		return append(have, emoji)
	})
}

func (s *Server) removeReaction(c *call) (int, any) {
	return s.changeReactions(c, func(have []string, emoji string) []string {
		return slices.DeleteFunc(have, func(e string) bool { return e == emoji })
	})
}

// changeReactions sets the bot's reactions on the message a call's path
// names to what change makes of them and the path's emoji: 204.
func (s *Server) changeReactions(c *call, change func(have []string, emoji string) []string) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, _, err := s.lookupLocked(c.p["channel"], c.p["message"]); err != nil {
		return 0, err
	}
	key := c.p["channel"] + "/" + c.p["message"]
	s.reactions[key] = change(s.reactions[key], c.p["emoji"])
	return 204, nil
}

// keepFilesLocked gives uploaded files their ids and serves them.
func (s *Server) keepFilesLocked(files []*attachment) []*attachment {
	for _, a := range files {
		a.ID = s.newID()
		s.files[a.ID] = a
	}
	return files
}
