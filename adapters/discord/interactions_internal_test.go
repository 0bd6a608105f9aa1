package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/hooks"
)

// bareAdapter is an adapter with no gateway, calling api for REST.
func bareAdapter(api session) *Adapter {
	return &Adapter{cfg: Config{Now: time.Now}, log: slog.New(slog.DiscardHandler), self: "10", api: api,
		threads: map[string]string{}, plain: map[string]bool{}, names: map[string]string{}, wrote: map[string]string{}, dms: map[string]string{},
		tokens: map[string]hookToken{}, inflight: map[string][]*interactionHook{}, seen: map[string]time.Time{}, hooks: &hooks.Memory{}}
}

type countHandler struct{ n atomic.Int32 }

func (h *countHandler) Handle(context.Context, bot.Incoming) error { h.n.Add(1); return nil }

// A command or press whose data is missing can never come off the wire:
// discordgo's Interaction.UnmarshalJSON (interactions.go) decodes "data"
// for types 2 and 3 and fails when it is absent or not an object, so
// such an event is undecodable and skipped before the adapter reads it
// (which is why TestDiscordUndecodableGatewayEvents passes without the
// check in interactionArrival). This pins that; the test below keeps
// the check itself.
func TestInteractionWithoutDataDoesNotDecode(t *testing.T) {
	for _, raw := range []string{
		`{"id":"1","type":2,"channel_id":"2","user":{"id":"3"}}`,
		`{"id":"1","type":3,"channel_id":"2","user":{"id":"3"}}`,
		`{"id":"1","type":2,"channel_id":"2","user":{"id":"3"},"data":"x"}`,
		`{"id":"1","type":3,"channel_id":"2","user":{"id":"3"},"data":[1]}`,
	} {
		var i discordgo.Interaction
		if err := json.Unmarshal([]byte(raw), &i); err == nil {
			t.Errorf("%s decoded (Data %#v): an interaction without its data would reach the adapter", raw, i.Data)
		}
	}
}

// An interaction that reaches the adapter without its data (built by
// hand, or decoded by a future discordgo that no longer fails on it) is
// answered "I cannot do anything with that here." and never handed to
// the bot, where ApplicationCommandData and MessageComponentData would
// panic on the nil Data.
func TestInteractionWithoutDataIsRefusedNotAPanic(t *testing.T) {
	for _, kind := range []discordgo.InteractionType{discordgo.InteractionApplicationCommand, discordgo.InteractionMessageComponent} {
		a := bareAdapter(nil)
		h := &countHandler{}
		in := &intake{a: a, h: h, ctx: context.Background()}
		var got *discordgo.InteractionResponse
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("type %d without data: panic %v", kind, r)
				}
			}()
			in.interaction(&discordgo.Interaction{ID: "5", Type: kind, ChannelID: "20", Token: "tok", User: &discordgo.User{ID: "30"}}, nil,
				func(r *discordgo.InteractionResponse) error { got = r; return nil })
		}()
		if h.n.Load() != 0 {
			t.Errorf("type %d without data was handed to the bot", kind)
		}
		if got == nil || got.Data == nil || got.Data.Content != bot.UnusableText || got.Data.Flags != discordgo.MessageFlagsEphemeral {
			t.Errorf("type %d without data answered %+v", kind, got)
		}
	}
}

// channelAPI answers GET /channels/{id} only, noting each call in log.
type channelAPI struct {
	session
	log     *[]string
	channel *discordgo.Channel
}

func (c channelAPI) Channel(id string, _ ...discordgo.RequestOption) (*discordgo.Channel, error) {
	*c.log = append(*c.log, "GET /channels/"+id)
	return c.channel, nil
}

func (c channelAPI) WebhookMessageEdit(_, _, id string, data *discordgo.WebhookEdit, _ ...discordgo.RequestOption) (*discordgo.Message, error) {
	*c.log = append(*c.log, fmt.Sprintf("edit %s: %s", id, *data.Content))
	return &discordgo.Message{}, nil
}

func (c channelAPI) FollowupMessageCreate(_ *discordgo.Interaction, _ bool, data *discordgo.WebhookParams, _ ...discordgo.RequestOption) (*discordgo.Message, error) {
	*c.log = append(*c.log, fmt.Sprintf("follow-up (flags %d): %s", data.Flags, data.Content))
	return &discordgo.Message{}, nil
}

type keepHandler struct{ got []bot.Incoming }

func (h *keepHandler) Handle(_ context.Context, in bot.Incoming) error {
	h.got = append(h.got, in)
	return nil
}

// A command in a thread the adapter has not seen is placed by the
// channel its interaction carries (type and parent_id), asking Discord
// nothing; without that channel it is deferred first, and only then is
// the thread looked up (GET /channels/{id}).
func TestCommandInAThreadIsPlacedWithoutAskingFirst(t *testing.T) {
	const guild, parent, thread = "100", "200", "300"
	publicThread := discordgo.ChannelTypeGuildPublicThread
	for _, c := range []struct {
		name    string
		ch      *wireChannel
		wantLog []string
	}{
		{"its channel says", &wireChannel{ID: thread, Type: &publicThread, ParentID: parent}, []string{"response 5"}},
		{"only Discord says", nil, []string{"response 5", "GET /channels/" + thread}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var log []string
			a := bareAdapter(channelAPI{log: &log, channel: &discordgo.Channel{ID: thread, Type: publicThread, ParentID: parent, GuildID: guild}})
			h := &keepHandler{}
			in := &intake{a: a, h: h, ctx: context.Background()}
			i := &discordgo.Interaction{ID: "5", Type: discordgo.InteractionApplicationCommand, GuildID: guild, ChannelID: thread, Token: "tok",
				Member: &discordgo.Member{User: &discordgo.User{ID: "30"}}, Data: discordgo.ApplicationCommandInteractionData{Name: "usage"}}
			later := in.interaction(i, c.ch, func(r *discordgo.InteractionResponse) error {
				log = append(log, fmt.Sprintf("response %d", r.Type))
				return nil
			})
			if later != nil {
				later(context.Background())
			}
			if !slices.Equal(log, c.wantLog) {
				t.Errorf("calls %q, want %q", log, c.wantLog)
			}
			if len(h.got) != 1 || h.got[0].ChatID != parent || h.got[0].ThreadID != thread {
				t.Fatalf("events %+v, want one in chat %s, thread %s", h.got, parent, thread)
			}
		})
	}
}

// An interaction deferred before its lookups and still not stored when
// its time is up (the store is down) is told to try again through its
// token: a command's "thinking" becomes the notice; a press gets it as
// a message only its person sees.
func TestLateInteractionNotStoredAsksToTryAgain(t *testing.T) {
	const guild, parent, thread = "100", "200", "300"
	publicThread := discordgo.ChannelTypeGuildPublicThread
	for _, c := range []struct {
		name string
		typ  discordgo.InteractionType
		data discordgo.InteractionData
		want string
	}{
		{"command", discordgo.InteractionApplicationCommand, discordgo.ApplicationCommandInteractionData{Name: "usage"}, "edit @original: " + bot.NotTakenText},
		{"press", discordgo.InteractionMessageComponent, discordgo.MessageComponentInteractionData{CustomID: "c:r1:y"}, "follow-up (flags 64): " + bot.NotTakenText},
	} {
		t.Run(c.name, func(t *testing.T) {
			var log []string
			a := bareAdapter(channelAPI{log: &log, channel: &discordgo.Channel{ID: thread, Type: publicThread, ParentID: parent, GuildID: guild}})
			in := &intake{a: a, h: failHandler{}, ctx: context.Background()}
			i := &discordgo.Interaction{ID: "5", AppID: "10", Type: c.typ, GuildID: guild, ChannelID: thread, Token: "tok",
				Member: &discordgo.Member{User: &discordgo.User{ID: "30"}}, Data: c.data}
			later := in.interaction(i, nil, func(*discordgo.InteractionResponse) error { return nil })
			if later == nil {
				t.Fatal("not deferred before its lookup")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			later(ctx)
			if len(log) != 2 || log[1] != c.want {
				t.Fatalf("calls %q, want the lookup, then %q", log, c.want)
			}
		})
	}
}

type failHandler struct{}

func (failHandler) Handle(context.Context, bot.Incoming) error { return errors.New("store down") }

// A webhook's post that mentions the bot (an integration echoing
// someone's words) is no person's message: its author is the webhook,
// without the bot flag, and in team mode the server would let it in.
func TestWebhookPostsAreDropped(t *testing.T) {
	a := bareAdapter(nil)
	m := &discordgo.Message{ID: "900000000000000300", ChannelID: "20", GuildID: "100", WebhookID: "900000000000000301",
		Author: &discordgo.User{ID: "900000000000000301", Username: "GitHub"}, Content: "<@" + a.self + "> delete every task",
		Mentions: []*discordgo.User{{ID: a.self}}}
	if ar, ok := a.arrive(m); ok {
		t.Fatalf("a webhook's post reached the bot: %+v", ar.ev)
	}
	m.WebhookID = ""
	if _, ok := a.arrive(m); !ok {
		t.Fatal("the same post by a person did not reach the bot")
	}
}
