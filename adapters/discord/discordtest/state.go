package discordtest

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Channel types (https://discord.com/developers/docs/resources/channel#channel-object-channel-types).
const (
	channelGuildText    = 0
	channelDM           = 1
	channelPublicThread = 11
)

// Message flags (https://discord.com/developers/docs/resources/message#message-object-message-flags).
const (
	flagEphemeral = 1 << 6
	flagLoading   = 1 << 7
)

type user struct {
	ID   string
	Name string
	Bot  bool
}

type channel struct {
	ID        string
	Type      int
	GuildID   string
	ParentID  string // a thread's channel
	Name      string
	Recipient string // a DM's person
	OwnerID   string
	Created   time.Time
	msgs      []*message
}

type message struct {
	ID          string
	ChannelID   string
	GuildID     string
	AuthorID    string
	Content     string
	Components  []component
	Embeds      json.RawMessage
	Attachments []*attachment
	Flags       int
	Nonce       json.RawMessage
	Created     time.Time
	Edited      time.Time
	Edits       []string
	Deleted     bool
	Reference   string
	Interaction string // the interaction whose answer this is
	Mentions    []string
	Pings       []string // what its content notified (pingsOf)
}

// Message is a message as the fake keeps it, for tests to read.
type Message struct {
	ID        string
	ChannelID string
	AuthorID  string
	// Content is the text after every edit.
	Content string
	// Edits are the earlier texts, oldest first.
	Edits []string
	// Rows are the action rows of buttons under the message.
	Rows [][]Button
	// Attachments are the file names of uploaded files.
	Attachments []string
	// Files are the uploaded files.
	Files []File
	Flags int
	// Nonce is the nonce the post carried, as JSON text.
	Nonce string
	// Reference is the message this one replies to.
	Reference string
	// Interaction is the id of the interaction this message answers.
	Interaction string
	Deleted     bool
	// Pings is what the message's text notified ("@everyone", "@here",
	// "<@id>", "<@&id>"), allowed_mentions applied, as last set.
	Pings []string
}

// Button is a button of a message.
type Button struct {
	CustomID string
	Label    string
	Style    int
	URL      string
	Disabled bool
}

func (m *message) export() Message {
	out := Message{
		ID: m.ID, ChannelID: m.ChannelID, AuthorID: m.AuthorID,
		Content: m.Content, Edits: append([]string(nil), m.Edits...),
		Flags: m.Flags, Nonce: string(m.Nonce), Reference: m.Reference,
		Interaction: m.Interaction, Deleted: m.Deleted, Pings: append([]string(nil), m.Pings...),
	}
	for _, a := range m.Attachments {
		out.Attachments = append(out.Attachments, a.Name)
		out.Files = append(out.Files, File{Name: a.Name, ContentType: a.ContentType, Data: append([]byte(nil), a.Data...)})
	}
	for _, row := range m.Components {
		var bs []Button
		for _, c := range row.Components {
			if c.Type == componentButton {
				bs = append(bs, Button{CustomID: c.CustomID, Label: c.Label, Style: c.Style, URL: c.URL, Disabled: c.Disabled})
			}
		}
		out.Rows = append(out.Rows, bs)
	}
	return out
}

// userLocked returns the person with id, made up on first sight.
func (s *Server) userLocked(id string) *user {
	u, ok := s.users[id]
	if !ok {
		u = &user{ID: id, Name: "user" + id}
		s.users[id] = u
	}
	return u
}

// dmLocked returns the DM channel between the bot and a person, one per
// person as Discord keeps it
// (https://discord.com/developers/docs/resources/user#create-dm).
func (s *Server) dmLocked(userID string) *channel {
	s.userLocked(userID)
	if id, ok := s.dms[userID]; ok {
		return s.channels[id]
	}
	c := &channel{ID: s.newID(), Type: channelDM, Recipient: userID, Created: time.Now()}
	s.channels[c.ID] = c
	s.dms[userID] = c.ID
	return c
}

// guildChannelLocked returns a text channel of a guild, made on first
// sight.
func (s *Server) guildChannelLocked(guildID, channelID string) *channel {
	c, ok := s.channels[channelID]
	if !ok {
		c = &channel{ID: channelID, Type: channelGuildText, GuildID: guildID, Name: "general", Created: time.Now()}
		s.channels[channelID] = c
	}
	return c
}

// AddChannel makes a text channel of a guild known, so the bot may post
// there before anyone speaks in it.
func (s *Server) AddChannel(guildID, channelID string) {
	s.ensureGuild(guildID)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.guildChannelLocked(guildID, channelID)
}

// ensureGuild adds the bot to a guild on first sight, with GUILD_CREATE,
// which Discord sends when the bot joins a guild
// (https://discord.com/developers/docs/events/gateway-events#guild-create;
// it needs the GUILDS intent).
func (s *Server) ensureGuild(guildID string) {
	s.mu.Lock()
	if guildID == "" || slices.Contains(s.guilds, guildID) {
		s.mu.Unlock()
		return
	}
	s.guilds = append(s.guilds, guildID)
	s.mu.Unlock()
	s.dispatch("GUILD_CREATE", func(sess *session) any {
		if sess.intents&intentGuilds == 0 {
			return nil
		}
		return s.guildJSONLocked(guildID)
	})
}

// SetUserName sets the username a person's id shows.
func (s *Server) SetUserName(userID, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.userLocked(userID).Name = name
}

// DMChannel is the id of the DM channel between the bot and a person.
func (s *Server) DMChannel(userID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dmLocked(userID).ID
}

// Messages returns the bot's messages in a channel, oldest first, with
// their text after edits; deleted ones are marked, ephemeral interaction
// answers are not there (see Interaction).
func (s *Server) Messages(channelID string) []Message {
	return s.messagesWhere(channelID, func(m *message) bool { return m.AuthorID == s.botID })
}

// AllMessages returns every message in a channel (people's and the
// bot's), oldest first.
func (s *Server) AllMessages(channelID string) []Message {
	return s.messagesWhere(channelID, func(*message) bool { return true })
}

// messagesWhere returns a channel's messages that keep (called with
// s.mu held) says to, oldest first.
func (s *Server) messagesWhere(channelID string, keep func(*message) bool) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	if c, ok := s.channels[channelID]; ok {
		for _, m := range c.msgs {
			if keep(m) {
				out = append(out, m.export())
			}
		}
	}
	return out
}

// Thread is a thread the bot started from a message.
type Thread struct {
	ID, ParentID, GuildID, Name string
}

// Threads returns the threads started, in order.
func (s *Server) Threads() []Thread {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Thread
	for _, id := range s.threads {
		c := s.channels[id]
		out = append(out, Thread{ID: c.ID, ParentID: c.ParentID, GuildID: c.GuildID, Name: c.Name})
	}
	return out
}

// Typing is how many times the bot triggered the typing indicator in a
// channel.
func (s *Server) Typing(channelID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.typing[channelID]
}

// File is an attached file.
type File struct {
	Name        string
	ContentType string
	Data        []byte
}

type attachment struct {
	ID string
	File
}

// DMFiles delivers a person's direct message with attached files.
func (s *Server) DMFiles(userID, text string, files ...File) (channelID, messageID string) {
	s.mu.Lock()
	c := s.dmLocked(userID)
	m := s.addMessageLocked(c, userID, text)
	m.Attachments = s.attachLocked(files)
	s.mu.Unlock()
	s.dispatchMessage(c, m)
	return c.ID, m.ID
}

// SayFiles delivers a person's guild message with attached files.
func (s *Server) SayFiles(guildID, channelID, userID, text string, files ...File) (messageID string) {
	c := s.lockGuildChannel(guildID, channelID, userID)
	m := s.addMessageLocked(c, userID, text)
	m.Attachments = s.attachLocked(files)
	s.mu.Unlock()
	s.dispatchMessage(c, m)
	return m.ID
}

// lockGuildChannel takes s.mu and returns a guild channel (or thread)
// for a person of that guild to write in.
func (s *Server) lockGuildChannel(guildID, channelID, userID string) *channel {
	s.ensureGuild(guildID)
	s.mu.Lock()
	s.userLocked(userID)
	s.joinLocked(guildID, userID)
	return s.guildChannelLocked(guildID, channelID)
}

func (s *Server) attachLocked(files []File) []*attachment {
	var out []*attachment
	for _, f := range files {
		a := &attachment{ID: s.newID(), File: f}
		s.files[a.ID] = a
		out = append(out, a)
	}
	return out
}

// DM delivers a person's direct message to the bot (MESSAGE_CREATE in
// their DM channel) and returns the channel's and the message's ids.
func (s *Server) DM(userID, text string) (channelID, messageID string) {
	return s.DMFiles(userID, text)
}

// Say delivers a person's message in a guild channel (or a thread in
// it) and returns its id. Write "<@"+BotID()+"> …" to mention the bot.
func (s *Server) Say(guildID, channelID, userID, text string) (messageID string) {
	return s.SayFiles(guildID, channelID, userID, text)
}

// Reply delivers a person's reply to a message in a guild channel (type
// 19 with message_reference and referenced_message); a reply mentions
// the replied-to author, as Discord's client does by default
// (https://discord.com/developers/docs/resources/message#message-reference-types).
func (s *Server) Reply(guildID, channelID, userID, text, replyTo string) (messageID string) {
	c := s.lockGuildChannel(guildID, channelID, userID)
	ref := findMessage(c, replyTo)
	if ref == nil {
		s.mu.Unlock()
		s.t.Errorf("discordtest: Reply: no message %s in channel %s", replyTo, channelID)
		return ""
	}
	m := s.addMessageLocked(c, userID, text)
	m.Reference = replyTo
	if !slices.Contains(m.Mentions, ref.AuthorID) {
		m.Mentions = append(m.Mentions, ref.AuthorID)
	}
	s.mu.Unlock()
	s.dispatchMessage(c, m)
	return m.ID
}

func (s *Server) addMessageLocked(c *channel, authorID, text string) *message {
	m := &message{ID: s.newID(), ChannelID: c.ID, GuildID: c.GuildID, AuthorID: authorID, Content: text, Created: time.Now()}
	m.Mentions = mentions(text)
	c.msgs = append(c.msgs, m)
	return m
}

// mentions are the user ids mentioned as <@id> or <@!id>
// (https://discord.com/developers/docs/reference#message-formatting).
func mentions(text string) []string {
	var out []string
	for {
		i := strings.Index(text, "<@")
		if i < 0 {
			return out
		}
		text = text[i+2:]
		text = strings.TrimPrefix(text, "!")
		j := strings.IndexByte(text, '>')
		if j <= 0 {
			continue
		}
		id := text[:j]
		if strings.Trim(id, "0123456789") == "" {
			out = append(out, id)
		}
		text = text[j:]
	}
}

// Join makes userID a member of guild (the bot in it too); a person who
// speaks or uses a command in a guild is one already.
func (s *Server) Join(guildID, userID string) {
	s.ensureGuild(guildID)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.userLocked(userID)
	s.joinLocked(guildID, userID)
}

// Leave removes userID from guild's members.
func (s *Server) Leave(guildID, userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.members[guildID], userID)
}

func (s *Server) joinLocked(guildID, userID string) {
	if guildID == "" {
		return
	}
	if s.members[guildID] == nil {
		s.members[guildID] = map[string]bool{}
	}
	s.members[guildID][userID] = true
}
