package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/retry"
)

// The gateway does not deliver an event again once it was sent: an event
// is acknowledged by the sequence number the client saw
// (discord.com/developers/docs/events/gateway#resuming), not by what the
// client did with it. So an event whose Handle failed (the store was
// down) is kept in this process and handed to Handle again, with waits
// that double up to handleWaitMax, until it is stored or serve stops;
// the messages of its channel wait behind it, in order, while other
// channels go on. An event the gateway replays after a RESUME (those after the last
// sequence the client had) is stored once: its event id is its message
// or interaction id, and the bot drops a duplicate.
const (
	handleWait    = 200 * time.Millisecond
	handleWaitMax = 30 * time.Second
	// interactionBudget is how long an interaction's Handle may take
	// before its deferred response: Discord waits 3 s for it
	// (discord.com/developers/docs/interactions/receiving-and-responding#responding-to-an-interaction).
	interactionBudget = 2 * time.Second
)

// Run implements bot.Receiver: it opens the gateway session (IDENTIFY,
// then RESUME after a drop: discordgo keeps the session id and sequence),
// registers the bot's slash commands, and hands messages and
// interactions to h until ctx ends. Discord that cannot be reached (the
// network) is waited for as at start (retry.Connect), not an end of
// intake; a refused token or a privileged intent the portal has not
// switched on is an error that says which setting to fix.
func (a *Adapter) Run(ctx context.Context, h bot.Handler) error {
	in := &intake{a: a, h: h, ctx: ctx, lanes: map[string]*lane{}, room: make(chan struct{}, maxWaiting)}
	remove := []func(){
		a.sess.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) { a.ready(r) }),
		a.sess.AddHandler(func(_ *discordgo.Session, c *discordgo.ThreadCreate) {
			if c.Channel != nil && c.ParentID != "" {
				a.learnThread(c.ID, c.ParentID)
			}
		}),
		a.sess.AddHandler(func(_ *discordgo.Session, e *discordgo.Event) { in.raw(ctx, e) }),
	}
	defer func() {
		for _, r := range remove {
			r()
		}
	}()
	err := retry.Connect(ctx, 0, func() error { return a.open() }, func(err error, wait time.Duration) {
		a.log.Warn("discord: cannot open the gateway; retrying", slog.Any("err", err), slog.Duration("retry_in", wait))
	})
	if ctx.Err() != nil {
		_ = a.sess.Close()
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = a.sess.Close() }()
	err = retry.Connect(ctx, 0, func() error { return a.Register(ctx) }, func(err error, wait time.Duration) {
		a.log.Warn("discord: cannot register the slash commands; retrying", slog.Any("err", err), slog.Duration("retry_in", wait))
	})
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		// DMs and mentions work without the commands: say what to fix
		// and go on (a server the bot is not in, a missing
		// applications.commands scope).
		a.log.Error("discord: the slash commands are not registered; messages still work. Check that the bot was added with the applications.commands scope (and is in DISCORD_GUILD_ID's server, if set)",
			slog.Any("err", err))
	}
	a.log.Info("discord ready", slog.String("bot", a.name), slog.Bool("message_content", a.cfg.MessageContent),
		slog.Bool("interactions_endpoint", a.cfg.PublicKey != ""))
	<-ctx.Done()
	return nil
}

// open opens the gateway session; a network failure is an
// agent.ErrUnreachable (Run waits it out), a close code an error naming
// what to fix (discord.com/developers/docs/topics/opcodes-and-status-codes#gateway-gateway-close-event-codes).
func (a *Adapter) open() error {
	err := a.sess.Open()
	if err == nil || errors.Is(err, discordgo.ErrWSAlreadyOpen) {
		return nil
	}
	if u := a.unreached(err); u != nil {
		return fmt.Errorf("discord: open gateway: %w", u)
	}
	switch msg := err.Error(); {
	case strings.Contains(msg, "4004"):
		return fmt.Errorf("discord: open gateway: Discord refused the token (close 4004): check DISCORD_BOT_TOKEN")
	case strings.Contains(msg, "4014"):
		return fmt.Errorf("discord: open gateway: Discord refused the MESSAGE_CONTENT intent (close 4014): switch on Message Content Intent in the developer portal (Bot → Privileged Gateway Intents) or unset DISCORD_MESSAGE_CONTENT")
	}
	return fmt.Errorf("discord: open gateway: %w", redact(err, a.cfg.Token))
}

// ready learns the application id from READY when not configured.
func (a *Adapter) ready(r *discordgo.Ready) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.appID == "" && r.Application != nil && r.Application.ID != "" {
		a.appID = r.Application.ID
	}
}

// intake hands the gateway's events to the bot: the messages of one
// channel in order (a lane each; a thread is a channel of its own),
// interactions at once. What only Discord can tell of a message is
// asked in its lane, never on the gateway's reader (lookups.go).
type intake struct {
	a   *Adapter
	h   bot.Handler
	ctx context.Context //nolint:containedctx // discordgo's handlers take none: Run's

	mu    sync.Mutex
	lanes map[string]*lane
	// room holds a token per message waiting for Handle: when it is
	// full (the store has been down a while), the gateway's reader waits
	// too, so that memory stays bounded; Discord then resumes the session
	// and sends what was not read yet.
	room chan struct{}
}

// maxWaiting is how many messages may wait in memory for Handle.
const maxWaiting = 1000

// lane is one channel's messages waiting for Handle, oldest first.
type lane struct{ queue []arrival }

// raw reads the two events the bot takes from their JSON itself:
// discordgo hands its typed handlers whatever part of an event decoded,
// while an event that does not decode whole is one to skip, log and
// count (Config.Events, outcome "undecodable"), as Telegram's and
// Slack's are, so that it holds up nothing after it.
func (in *intake) raw(ctx context.Context, e *discordgo.Event) {
	switch e.Type {
	case "MESSAGE_CREATE":
		var m discordgo.Message
		if err := json.Unmarshal(e.RawData, &m); err != nil {
			in.a.undecodable(e, err)
			return
		}
		in.message(&m)
	case "INTERACTION_CREATE":
		var i discordgo.Interaction
		if err := json.Unmarshal(e.RawData, &i); err != nil {
			in.a.undecodable(e, err)
			return
		}
		ch := interactionChannel(e.RawData)
		go func() {
			if later := in.interaction(&i, ch, in.a.gatewayResponder(ctx, &i)); later != nil {
				later(ctx)
			}
		}()
	}
}

// undecodable logs and counts an event that does not decode.
func (a *Adapter) undecodable(e *discordgo.Event, err error) {
	a.log.Warn("discord event does not decode; skipped", slog.String("event", e.Type), slog.Int64("seq", e.Sequence), slog.Any("err", err))
	if a.cfg.Events != nil {
		a.cfg.Events.Event(Platform, "undecodable")
	}
}

// message reads one MESSAGE_CREATE into its channel's lane.
func (in *intake) message(m *discordgo.Message) {
	ar, ok := in.a.arrive(m)
	if !ok {
		return
	}
	in.enqueue(ar)
}

// enqueue adds ar to its channel's lane, starting the lane's worker
// when idle.
func (in *intake) enqueue(ar arrival) {
	select {
	case in.room <- struct{}{}:
	case <-in.ctx.Done():
		return
	}
	key := ar.channel
	in.mu.Lock()
	l, running := in.lanes[key]
	if !running {
		l = &lane{}
		in.lanes[key] = l
	}
	l.queue = append(l.queue, ar)
	in.mu.Unlock()
	if !running {
		go in.drain(key, l)
	}
}

// drain stores the lane's messages one by one, each once Discord told
// what it needs (settleWaiting) and until Handle took it.
func (in *intake) drain(key string, l *lane) {
	for {
		in.mu.Lock()
		if len(l.queue) == 0 {
			delete(in.lanes, key)
			in.mu.Unlock()
			return
		}
		ar := l.queue[0]
		l.queue = l.queue[1:]
		in.mu.Unlock()
		ev, err := in.a.settleWaiting(in.ctx, ar)
		if err == nil {
			err = in.a.deliver(in.ctx, in.h, ev, 0)
		}
		if err != nil {
			in.a.log.Warn("discord: event not stored before shutdown", slog.String("event_id", ar.ev.EventID), slog.Any("err", err))
		}
		<-in.room
	}
}

// deliver hands ev to h until it returns nil, waiting between tries;
// within, when positive, bounds the time it tries.
func (a *Adapter) deliver(ctx context.Context, h bot.Handler, ev bot.Incoming, within time.Duration) error {
	var deadline time.Time
	if within > 0 {
		deadline = time.Now().Add(within)
	}
	wait := handleWait
	for {
		err := h.Handle(ctx, ev)
		if err == nil {
			return nil
		}
		if errors.Is(err, bot.ErrStopped) || ctx.Err() != nil {
			return err
		}
		if !deadline.IsZero() && time.Now().Add(wait).After(deadline) {
			return err
		}
		a.log.Warn("discord: could not store an event; trying again", slog.String("event_id", ev.EventID),
			slog.Any("err", redact(err, a.cfg.Token)), slog.Duration("retry_in", wait))
		if err := retry.Sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, handleWaitMax)
	}
}

// arrive reads a message as a bot event, asking Discord nothing (what
// only Discord can tell is left to settle); ok is false for a message
// the bot ignores: its own, another bot's, a system message, one with
// neither text nor an audio file or image, and, in a server, one that
// does not address the bot. In a server the bot reads a message that
// mentions it (<@id>, which a reply that pings it also counts) or
// replies to one of its messages; without the MESSAGE_CONTENT intent
// those are the only server messages whose text reaches it anyway
// ("Apps without the intent will receive empty values in fields that
// contain user-inputted content", except in DMs and messages that
// mention the app,
// discord.com/developers/docs/events/gateway#message-content-intent).
// A mention in a channel is answered in a thread started from it (its
// ThreadID is the message's id, which becomes the thread's); one inside
// a thread is answered there.
func (a *Adapter) arrive(m *discordgo.Message) (arrival, bool) {
	if m == nil || m.Author == nil || m.Author.Bot || m.Author.System || m.Author.ID == a.self || m.ID == "" || m.ChannelID == "" {
		return arrival{}, false
	}
	// A webhook's post (an integration's, or an interaction's follow-up)
	// is no person's: "If the message is generated by a webhook, the
	// author object corresponds to the webhook's id, username, and
	// avatar" (discord.com/developers/docs/resources/message#message-object),
	// without the bot flag; in team mode its server would let it in.
	if m.WebhookID != "" {
		return arrival{}, false
	}
	if m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply {
		return arrival{}, false
	}
	ev := bot.Incoming{
		Platform: Platform, ChatID: m.ChannelID, UserID: m.Author.ID, UserName: m.Author.Username,
		MessageID: m.ID, EventID: "m" + m.ID, At: m.Timestamp, Text: m.Content,
	}
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	ar := arrival{channel: m.ChannelID}
	if m.GuildID == "" {
		ev.DM = true
		a.learnDM(m.ChannelID, m.Author.ID)
	} else {
		text, addressed := a.addressed(m)
		if !addressed {
			return arrival{}, false
		}
		ev.Text, ev.TeamID = text, m.GuildID
		ar.mention, ar.named = true, text
	}
	ev.Attachment = attachment(m.Attachments)
	if strings.TrimSpace(ev.Text) == "" && ev.Attachment == nil {
		return arrival{}, false
	}
	if cmd, args, ok := command(ev.Text); ok && ev.Attachment == nil {
		ev.Command, ev.Text = cmd, args
	}
	ar.ev = ev
	return ar, true
}

// addressed reports whether a server message addresses the bot (it
// mentions it, or replies to one of its messages) and returns its text
// without the bot's mentions.
func (a *Adapter) addressed(m *discordgo.Message) (string, bool) {
	found := false
	for _, u := range m.Mentions {
		if u != nil && u.ID == a.self {
			found = true
		}
	}
	if r := m.ReferencedMessage; r != nil && r.Author != nil && r.Author.ID == a.self {
		found = true
	}
	text := strings.NewReplacer("<@"+a.self+">", " ", "<@!"+a.self+">", " ").Replace(m.Content)
	text = strings.Join(strings.Fields(text), " ")
	text = strings.NewReplacer(" ,", ",", " .", ".", " ?", "?", " !", "!", " :", ":").Replace(text)
	return strings.TrimLeft(text, ",:; "), found
}

// command parses "/name args" typed as text (a slash command's own
// interaction is read elsewhere); ok is false for any other text.
func command(text string) (cmd, args string, ok bool) {
	if !strings.HasPrefix(text, "/") {
		return "", "", false
	}
	head, rest, _ := strings.Cut(text[1:], " ")
	if i := strings.IndexAny(head, "\n\t"); i >= 0 {
		head, rest = head[:i], head[i+1:]+" "+rest
	}
	head = strings.ToLower(head)
	if head == "" {
		return "", "", false
	}
	if c, ok := bot.LookupCommand(head); ok {
		head = c.Name
	}
	return head, strings.TrimSpace(rest), true
}
