package discordtest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Interactions as https://discord.com/developers/docs/interactions/receiving-and-responding
// describes them: an interaction arrives (INTERACTION_CREATE over the
// gateway, or a signed POST to the app's endpoint) with an id and a
// token; the app answers once with POST /interactions/{id}/{token}/callback
// within 3 seconds ("If the 3 second deadline is exceeded, the token
// will be invalidated"; later: 10062 Unknown interaction; a second
// answer: 40060 Interaction has already been acknowledged); then for 15
// minutes the token is a webhook: POST /webhooks/{app}/{token} posts
// follow-ups, PATCH /webhooks/{app}/{token}/messages/@original edits the
// first answer. Flag 64 makes a message ephemeral (only the person who
// acted sees it).

// Interaction types (https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object-interaction-type).
const (
	interactionPing      = 1
	interactionCommand   = 2
	interactionComponent = 3
)

// Callback types (https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-response-object-interaction-callback-type).
const (
	callbackPong          = 1
	callbackMessage       = 4
	callbackDeferred      = 5
	callbackDeferedUpdate = 6
	callbackUpdate        = 7
	callbackModal         = 9
)

// tokenLifetime: "Interaction tokens are valid for 15 minutes" (the same page).
const tokenLifetime = 15 * time.Minute

type interaction struct {
	ID, Token string
	Type      int
	UserID    string
	GuildID   string
	ChannelID string
	MessageID string // the message whose button was pressed
	Created   time.Time
	HTTP      bool // posted to the app's endpoint, not the gateway

	callback  int // the accepted answer's type, 0 before
	refused   []int
	original  *message
	followups []*message
	msgs      []*message // every message of this interaction, ephemeral ones included
}

// InteractionState is what became of an interaction.
type InteractionState struct {
	ID, Token string
	// Type is 2 (application command) or 3 (message component).
	Type int
	// Callback is the type of the accepted answer (4 message, 5 deferred
	// message, 6 deferred update, 7 update message), 0 when unanswered.
	Callback int
	// Refused are the JSON error codes of refused answers: 40060 for an
	// answer after the first, 10062 for one after the deadline.
	Refused []int
	// Original is the first answer's message (type 4 or 5, or after an
	// edit of @original), nil without one.
	Original *Message
	// Followups are the follow-up messages, in order.
	Followups []Message
	// Ephemeral is whether the original answer is ephemeral (flag 64).
	Ephemeral bool
}

// Interaction returns what became of an interaction.
func (s *Server) Interaction(id string) InteractionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.interactions[id]
	if !ok {
		return InteractionState{}
	}
	st := InteractionState{ID: in.ID, Token: in.Token, Type: in.Type, Callback: in.callback, Refused: append([]int(nil), in.refused...)}
	if in.original != nil {
		m := in.original.export()
		st.Original = &m
		st.Ephemeral = in.original.Flags&flagEphemeral != 0
	}
	for _, f := range in.followups {
		st.Followups = append(st.Followups, f.export())
	}
	return st
}

func (s *Server) newInteractionLocked(typ int, userID, guildID, channelID string) *interaction {
	in := &interaction{ID: s.newID(), Token: "aW50ZXJhY3Rpb246" + randomHex(24), Type: typ,
		UserID: userID, GuildID: guildID, ChannelID: channelID, Created: time.Now()}
	s.interactions[in.ID] = in
	s.byToken[in.Token] = in
	return in
}

// interactionJSONLocked is the interaction object
// (https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object).
// app_permissions and member.permissions are strings (discordgo
// interactions.go reads them with ",string").
func (s *Server) interactionJSONLocked(in *interaction, data any) map[string]any {
	ch := s.channels[in.ChannelID]
	out := map[string]any{
		"id": in.ID, "application_id": s.appID, "type": in.Type, "token": in.Token, "version": 1,
		"channel_id": in.ChannelID, "locale": "en-US", "app_permissions": "2248473465835073",
		"entitlements": []any{}, "attachment_size_limit": 10485760,
	}
	if data != nil {
		out["data"] = data
	}
	if ch != nil {
		out["channel"] = s.channelJSONLocked(ch)
	}
	if in.GuildID != "" {
		out["guild_id"] = in.GuildID
		out["guild_locale"] = "en-US"
		out["member"] = s.memberJSONLocked(in.UserID, true)
		out["context"] = 0 // GUILD
		out["authorizing_integration_owners"] = map[string]string{"0": in.GuildID}
	} else {
		out["user"] = s.userJSONLocked(in.UserID)
		out["context"] = 1 // BOT_DM
		out["authorizing_integration_owners"] = map[string]string{"0": "0"}
	}
	return out
}

// commandInteractionLocked makes an application command interaction,
// or an error when no such command is registered (Discord shows a
// person only registered commands).
func (s *Server) commandInteractionLocked(userID, guildID, channelID, name string, opts map[string]string) (*interaction, map[string]any, error) {
	s.userLocked(userID)
	cmd := s.findCommandLocked(guildID, name)
	if cmd == nil {
		return nil, nil, fmt.Errorf("no command %q registered globally or in guild %q", name, guildID)
	}
	var ch *channel
	if guildID == "" {
		ch = s.dmLocked(userID)
	} else if channelID == "" {
		return nil, nil, fmt.Errorf("a guild command needs a channel")
	} else {
		ch = s.guildChannelLocked(guildID, channelID)
	}
	in := s.newInteractionLocked(interactionCommand, userID, guildID, ch.ID)
	options := []any{}
	for _, o := range cmd.Options {
		v, ok := opts[o.Name]
		if !ok {
			continue
		}
		options = append(options, map[string]any{"name": o.Name, "type": o.Type, "value": optionValue(o.Type, v)})
	}
	for k := range opts {
		if cmd.option(k) == nil {
			return nil, nil, fmt.Errorf("command %q has no option %q", name, k)
		}
	}
	data := map[string]any{"id": cmd.ID, "name": cmd.Name, "type": cmd.Type, "options": options}
	if cmd.GuildID != "" {
		data["guild_id"] = cmd.GuildID
	}
	return in, s.interactionJSONLocked(in, data), nil
}

// optionValue types an option's value by its option type
// (https://discord.com/developers/docs/interactions/application-commands#application-command-object-application-command-option-type).
func optionValue(typ int, v string) any {
	switch typ {
	case 4: // INTEGER
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	case 5: // BOOLEAN
		return v == "true"
	case 10: // NUMBER
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	}
	return v
}

// pressInteractionLocked makes a button press on a message of the bot.
func (s *Server) pressInteractionLocked(userID, channelID, messageID, customID string) (*interaction, map[string]any, error) {
	s.userLocked(userID)
	ch, m, err := s.lookupLocked(channelID, messageID)
	if err != nil {
		m = s.interactionMessageLocked(messageID)
		if m == nil || m.ChannelID != channelID {
			return nil, nil, fmt.Errorf("no message %s in channel %s", messageID, channelID)
		}
		ch = s.channels[channelID]
	}
	var button *component
	for i := range m.Components {
		for j := range m.Components[i].Components {
			if c := &m.Components[i].Components[j]; c.Type == componentButton && c.CustomID == customID {
				button = c
			}
		}
	}
	if button == nil {
		return nil, nil, fmt.Errorf("message %s has no button %q", messageID, customID)
	}
	if button.Disabled {
		return nil, nil, fmt.Errorf("button %q of message %s is disabled", customID, messageID)
	}
	in := s.newInteractionLocked(interactionComponent, userID, ch.GuildID, ch.ID)
	in.MessageID = m.ID
	out := s.interactionJSONLocked(in, map[string]any{"custom_id": customID, "component_type": componentButton})
	out["message"] = s.messageJSONLocked(m, true)
	return in, out, nil
}

func (s *Server) interactionMessageLocked(id string) *message {
	for _, in := range s.interactions {
		for _, m := range in.msgs {
			if m.ID == id && !m.Deleted {
				return m
			}
		}
	}
	return nil
}

// Command delivers a person's slash command (INTERACTION_CREATE, type 2)
// in a guild channel, or in their DM with the bot when guildID is "".
// The command must be registered (globally, or in that guild); options
// are given as text and typed by the registered option.
func (s *Server) Command(userID, guildID, channelID, name string, opts map[string]string) (interactionID string) {
	s.ensureGuild(guildID)
	s.mu.Lock()
	in, d, err := s.commandInteractionLocked(userID, guildID, channelID, name, opts)
	s.joinLocked(guildID, userID)
	s.mu.Unlock()
	if err != nil {
		s.t.Errorf("discordtest: Command: %v", err)
		return ""
	}
	s.deliver(in, d)
	return in.ID
}

// SetInteractionsEndpoint sets the application's Interactions Endpoint
// URL: Command and Press then post there, signed, instead of sending
// INTERACTION_CREATE over the gateway, as Discord does: an app receives
// interactions either over the gateway or, once an Interactions
// Endpoint URL is configured, as signed posts to it, the two methods
// being mutually exclusive
// (https://discord.com/developers/docs/interactions/receiving-and-responding#receiving-an-interaction).
// "" goes back to the gateway.
func (s *Server) SetInteractionsEndpoint(url string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoint = url
}

// deliver sends an interaction over the gateway, or to the endpoint.
func (s *Server) deliver(in *interaction, d map[string]any) {
	s.mu.Lock()
	url := s.endpoint
	if url != "" {
		in.HTTP = true
	}
	s.mu.Unlock()
	if url == "" {
		s.dispatch("INTERACTION_CREATE", func(*session) any { return d })
		return
	}
	body, _ := json.Marshal(d)
	if status, err := s.deliverHTTP(url, in, body); err != nil || status/100 != 2 {
		s.t.Errorf("discordtest: interactions endpoint answered %d: %v", status, err)
	}
}

// Press delivers a person's press of a button of the bot's message
// (INTERACTION_CREATE, type 3); the button must be there and enabled.
func (s *Server) Press(userID, channelID, messageID, customID string) (interactionID string) {
	s.mu.Lock()
	in, d, err := s.pressInteractionLocked(userID, channelID, messageID, customID)
	s.mu.Unlock()
	if err != nil {
		s.t.Errorf("discordtest: Press: %v", err)
		return ""
	}
	s.deliver(in, d)
	return in.ID
}

// callbackBody is an interaction response
// (https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-response-object).
type callbackBody struct {
	Type int             `json:"type"`
	Data json.RawMessage `json:"data"`
}

func (s *Server) interactionCallback(c *call) (int, any) {
	var body callbackBody
	if err := c.decode(&body); err != nil {
		return 0, err
	}
	s.mu.Lock()
	in, ok := s.interactions[c.p["interaction"]]
	if !ok || in.Token != c.p["token"] {
		s.mu.Unlock()
		return 0, errUnknownInter
	}
	created, err := s.answerLocked(in, &body, c.files)
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	s.dispatchCreated(created)
	return 204, nil
}

// answerLocked applies an interaction's answer; it returns the messages
// to dispatch.
func (s *Server) answerLocked(in *interaction, body *callbackBody, files []*attachment) ([]*message, *apiError) {
	if in.callback != 0 {
		in.refused = append(in.refused, errAcknowledged.Code)
		return nil, errAcknowledged
	}
	if !in.HTTP && time.Since(in.Created) > s.interactionWindow {
		in.refused = append(in.refused, errUnknownInter.Code)
		return nil, errUnknownInter
	}
	// Which answers fit which interaction: PONG only a PING; 6 and 7
	// only a component (the callback type table's notes).
	valid := map[int][]int{
		interactionPing:      {callbackPong},
		interactionCommand:   {callbackMessage, callbackDeferred, callbackModal},
		interactionComponent: {callbackMessage, callbackDeferred, callbackDeferedUpdate, callbackUpdate, callbackModal},
	}[in.Type]
	okType := false
	for _, t := range valid {
		okType = okType || t == body.Type
	}
	if !okType {
		return nil, formError([]string{"type"}, "INTERACTION_RESPONSE_TYPE_INVALID", "Interaction response type is invalid for this interaction")
	}
	var mb messageBody
	if present(body.Data) {
		if err := json.Unmarshal(body.Data, &mb); err != nil {
			return nil, errInvalidJSON
		}
	}
	p, err := parseMessage(&mb)
	if err != nil {
		return nil, err
	}
	ch := s.channels[in.ChannelID]
	var created []*message
	switch body.Type {
	case callbackMessage:
		if (p.content == nil || *p.content == "") && len(p.components) == 0 && len(p.embeds) == 0 && len(files) == 0 {
			return nil, errEmptyMessage
		}
		m := s.interactionPostLocked(in, ch, p, mb.Flags, files)
		in.original = m
		created = append(created, m)
	case callbackDeferred:
		// The "thinking" message: loading until edited.
		m := s.interactionPostLocked(in, ch, &parsed{}, mb.Flags&flagEphemeral|flagLoading, nil)
		in.original = m
		created = append(created, m)
	case callbackUpdate:
		target := s.messageByIDLocked(in.ChannelID, in.MessageID)
		if target == nil {
			return nil, errUnknownMessage
		}
		if err := s.applyEditLocked(target, p, mb.Content, files); err != nil {
			return nil, err
		}
	}
	in.callback = body.Type
	return created, nil
}

func (s *Server) messageByIDLocked(channelID, id string) *message {
	if ch, ok := s.channels[channelID]; ok {
		if m := findMessage(ch, id); m != nil {
			return m
		}
	}
	return s.interactionMessageLocked(id)
}

// interactionPostLocked posts an interaction's message: an ephemeral one
// is kept with the interaction only, as only the person sees it.
func (s *Server) interactionPostLocked(in *interaction, ch *channel, p *parsed, flags int, files []*attachment) *message {
	m := &message{ID: s.newID(), ChannelID: in.ChannelID, GuildID: in.GuildID, AuthorID: s.botID, Created: time.Now(),
		Components: p.components, Embeds: p.embeds, Flags: flags, Interaction: in.ID, Attachments: s.keepFilesLocked(files)}
	if p.content != nil {
		m.Content = *p.content
		m.Pings = p.pings
	}
	in.msgs = append(in.msgs, m)
	if flags&flagEphemeral == 0 && ch != nil {
		ch.msgs = append(ch.msgs, m)
	}
	return m
}

func (s *Server) dispatchCreated(ms []*message) {
	for _, m := range ms {
		if m.Flags&flagEphemeral != 0 {
			continue
		}
		s.mu.Lock()
		ch := s.channels[m.ChannelID]
		s.mu.Unlock()
		if ch != nil {
			s.dispatchMessage(ch, m)
		}
	}
}

// webhookLocked finds the interaction a webhook token belongs to: an
// unknown one is 10015 Unknown Webhook; one older than 15 minutes, or
// whose 3 s deadline passed unanswered ("the token will be
// invalidated"), 50027 Invalid Webhook Token. A follow-up before the
// first answer is 10015 too: the docs only say follow-ups come after
// it; that code is the fake's reading of what bots report, not a
// documented one.
func (s *Server) webhookLocked(c *call) (*interaction, *apiError) {
	in, ok := s.byToken[c.p["token"]]
	if !ok || c.p["app"] != s.appID {
		return nil, errUnknownWebhook
	}
	if time.Since(in.Created) > tokenLifetime {
		return nil, errWebhookToken
	}
	if in.callback == 0 {
		if !in.HTTP && time.Since(in.Created) > s.interactionWindow {
			return nil, errWebhookToken
		}
		return nil, errUnknownWebhook
	}
	return in, nil
}

// followup posts a follow-up message
// (https://discord.com/developers/docs/interactions/receiving-and-responding#create-followup-message);
// the first one after a deferred answer replaces the "thinking" message.
// It answers the message whether or not ?wait=true is given.
func (s *Server) followup(c *call) (int, any) {
	body, p, in, err := s.lockWebhookCall(c)
	if err != nil {
		return 0, err
	}
	if (p.content == nil || *p.content == "") && len(p.components) == 0 && len(p.embeds) == 0 && len(c.files) == 0 {
		s.mu.Unlock()
		return 0, errEmptyMessage
	}
	if o := in.original; o != nil && o.Flags&flagLoading != 0 {
		return s.editResponseUnlock(o, p, body.Content, c.files)
	}
	m := s.interactionPostLocked(in, s.channels[in.ChannelID], p, body.Flags, c.files)
	in.followups = append(in.followups, m)
	out := s.messageJSONLocked(m, true)
	s.mu.Unlock()
	s.dispatchCreated([]*message{m})
	return 200, out
}

func (s *Server) webhookMessageLocked(in *interaction, id string) *message {
	if id == "@original" {
		if in.original == nil && (in.callback == callbackDeferedUpdate || in.callback == callbackUpdate) {
			// After an update (type 6 or 7), the original response is
			// the message the button is on.
			return s.messageByIDLocked(in.ChannelID, in.MessageID)
		}
		if in.original == nil || in.original.Deleted {
			return nil
		}
		return in.original
	}
	for _, m := range in.msgs {
		if m.ID == id && !m.Deleted {
			return m
		}
	}
	return nil
}

// webhookTargetLocked is the message a webhook call's path names
// (@original or a follow-up) of the interaction its token belongs to.
func (s *Server) webhookTargetLocked(c *call) (*message, *apiError) {
	in, err := s.webhookLocked(c)
	if err != nil {
		return nil, err
	}
	m := s.webhookMessageLocked(in, c.p["message"])
	if m == nil {
		return nil, errUnknownMessage
	}
	return m, nil
}

// lockWebhookCall reads the message body a webhook call carries and
// finds the interaction its token belongs to; on success it returns
// with s.mu held.
func (s *Server) lockWebhookCall(c *call) (*messageBody, *parsed, *interaction, *apiError) {
	body, p, err := c.message()
	if err != nil {
		return nil, nil, nil, err
	}
	s.mu.Lock()
	in, err := s.webhookLocked(c)
	if err != nil {
		s.mu.Unlock()
		return nil, nil, nil, err
	}
	return body, p, in, nil
}

func (s *Server) getWebhookMessage(c *call) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.webhookTargetLocked(c)
	if err != nil {
		return 0, err
	}
	return 200, s.messageJSONLocked(m, true)
}

// editWebhookMessage edits @original or a follow-up
// (https://discord.com/developers/docs/interactions/receiving-and-responding#edit-original-interaction-response).
func (s *Server) editWebhookMessage(c *call) (int, any) {
	body, p, in, err := s.lockWebhookCall(c)
	if err != nil {
		return 0, err
	}
	m := s.webhookMessageLocked(in, c.p["message"])
	if m == nil {
		s.mu.Unlock()
		return 0, errUnknownMessage
	}
	return s.editResponseUnlock(m, p, body.Content, c.files)
}

// editResponseUnlock edits an interaction's response or follow-up,
// unlocks s.mu (held by the caller) and tells the gateway of the edit
// unless only the presser sees the message.
func (s *Server) editResponseUnlock(m *message, p *parsed, rawContent json.RawMessage, files []*attachment) (int, any) {
	if err := s.applyEditLocked(m, p, rawContent, files); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	out := s.messageJSONLocked(m, true)
	ch := s.channels[m.ChannelID]
	s.mu.Unlock()
	if ch != nil && m.Flags&flagEphemeral == 0 {
		s.dispatchUpdate(ch, m)
	}
	return 200, out
}

func (s *Server) deleteWebhookMessage(c *call) (int, any) {
	s.mu.Lock()
	m, err := s.webhookTargetLocked(c)
	if err != nil {
		s.mu.Unlock()
		return 0, err
	}
	m.Deleted = true
	ch := s.channels[m.ChannelID]
	s.mu.Unlock()
	if ch != nil && m.Flags&flagEphemeral == 0 {
		s.dispatchDelete(ch, m)
	}
	return 204, nil
}

// Sign signs an interaction body as Discord does: Ed25519 over the
// timestamp followed by the body, hex-encoded, sent as
// X-Signature-Ed25519 with X-Signature-Timestamp
// (https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers).
func (s *Server) Sign(timestamp string, body []byte) string {
	return hex.EncodeToString(ed25519.Sign(s.priv, append([]byte(timestamp), body...)))
}

// PostInteraction posts a body to an interactions endpoint, signed with
// the application's key. The caller closes the response body.
func (s *Server) PostInteraction(url string, body []byte) (*http.Response, error) {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	return s.post(url, body, ts, s.Sign(ts, body))
}

// PostForged posts a body signed with another key, as Discord's
// security checks do ("we will also perform automated, routine security
// checks against your endpoint, including purposefully sending you
// invalid signatures", the same page): the endpoint must answer 401.
func (s *Server) PostForged(url string, body []byte) (status int, err error) {
	_, other, err := ed25519.GenerateKey(nil)
	if err != nil {
		return 0, err
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	resp, err := s.post(url, body, ts, hex.EncodeToString(ed25519.Sign(other, append([]byte(ts), body...))))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (s *Server) post(url string, body []byte, ts, sig string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Discord-Interactions/1.0 (+https://discord.com)")
	req.Header.Set("X-Signature-Ed25519", sig)
	req.Header.Set("X-Signature-Timestamp", ts)
	return http.DefaultClient.Do(req)
}

// Ping posts a PING (type 1) to an interactions endpoint, as Discord
// does when the URL is saved, and reports whether it answered PONG.
func (s *Server) Ping(url string) (bool, error) {
	s.mu.Lock()
	in := s.newInteractionLocked(interactionPing, "", "", "")
	in.HTTP = true
	body, _ := json.Marshal(map[string]any{"id": in.ID, "application_id": s.appID, "type": interactionPing, "token": in.Token, "version": 1})
	s.mu.Unlock()
	_, err := s.deliverHTTP(url, in, body)
	if err != nil {
		return false, err
	}
	return s.Interaction(in.ID).Callback == callbackPong, nil
}

// PostCommand posts a slash command to an interactions endpoint, signed,
// and applies the answer in the response body as Discord would. It
// returns the interaction's id and the endpoint's status.
func (s *Server) PostCommand(url, userID, guildID, channelID, name string, opts map[string]string) (interactionID string, status int, err error) {
	return s.postHTTP(url, func() (*interaction, map[string]any, error) {
		return s.commandInteractionLocked(userID, guildID, channelID, name, opts)
	})
}

// PostPress posts a button press to an interactions endpoint, as
// PostCommand does.
func (s *Server) PostPress(url, userID, channelID, messageID, customID string) (interactionID string, status int, err error) {
	return s.postHTTP(url, func() (*interaction, map[string]any, error) {
		return s.pressInteractionLocked(userID, channelID, messageID, customID)
	})
}

// postHTTP makes an interaction with newLocked (called with s.mu held), marks
// it as sent over HTTP and posts it to url.
func (s *Server) postHTTP(url string, newLocked func() (*interaction, map[string]any, error)) (interactionID string, status int, err error) {
	s.mu.Lock()
	in, d, err := newLocked()
	if err == nil {
		in.HTTP = true
	}
	s.mu.Unlock()
	if err != nil {
		return "", 0, err
	}
	body, _ := json.Marshal(d)
	status, err = s.deliverHTTP(url, in, body)
	return in.ID, status, err
}

// deliverHTTP posts an interaction and applies the endpoint's answer:
// the response to an HTTP interaction is the interaction response
// itself, within 3 seconds (Receiving an Interaction, the same page).
func (s *Server) deliverHTTP(url string, in *interaction, body []byte) (int, error) {
	start := time.Now()
	resp, err := s.PostInteraction(url, body)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, nil
	}
	var cb callbackBody
	if err := json.Unmarshal(raw, &cb); err != nil {
		return resp.StatusCode, fmt.Errorf("interaction response: %w", err)
	}
	s.mu.Lock()
	if time.Since(start) > s.interactionWindow {
		in.refused = append(in.refused, errUnknownInter.Code)
		s.mu.Unlock()
		return resp.StatusCode, fmt.Errorf("interaction response after %v: %w", time.Since(start), errUnknownInter)
	}
	created, aerr := s.answerLocked(in, &cb, nil)
	s.mu.Unlock()
	if aerr != nil {
		return resp.StatusCode, fmt.Errorf("interaction response: %w", aerr)
	}
	s.dispatchCreated(created)
	return resp.StatusCode, nil
}

// AgeInteraction makes an interaction older by d, as if it had arrived
// that much earlier: its 3 s answer deadline and 15-minute token
// lifetime are measured from then.
func (s *Server) AgeInteraction(id string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in, ok := s.interactions[id]; ok {
		in.Created = in.Created.Add(-d)
	}
}
